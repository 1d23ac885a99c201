package validate

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// Layer is the name L2 events and denials carry.
const Layer = "L2"

// Rule ids of the response side of L2.
const (
	RuleToolPoisoned     = "tool.poisoned"
	RuleRugPull          = "tool.rug_pull"
	RuleResponseInject   = "response.prompt_injection"
	RuleResponseSecret   = "response.secret"
	RuleResponseHidden   = "response.hidden_unicode"
	RuleResponseMalforms = "response.malformed"
)

// Options configures the response side of L2.
type Options struct {
	Server, Config string
	Audit          *audit.Logger
	// Waived reports whether an operator override waives rule for tool
	// (nil: nothing is waived).
	Waived func(tool, rule string) bool
	// Pinned returns the digest (ToolDigest) the policy recorded for a
	// tool when the operator approved it, or "" when it recorded none. A
	// listed tool that differs from its pin is a rug pull even at its first
	// sight in this session (the server changed between sessions).
	Pinned func(tool string) string
	// ListTimeout bounds the wait for each page of the layer's own
	// tools/list (zero: DefaultListTimeout).
	ListTimeout time.Duration
	// AllowMethods lists methods outside the MCP schema that pass (the
	// policy's "protocol": {"allow_methods": [...]}; "*" for any): their
	// params are not judged, what the server sends in them is read as
	// text. Every other method outside the schema is refused.
	AllowMethods []string
	// Confine judges values the user typed into an elicitation form as
	// L1 judges a prompt's arguments (paths and URLs confined to the
	// policy, secrets and environment references refused); it returns the
	// rule and reason of a refusal, or "". Nil: not confined.
	Confine func(ctx context.Context, values map[string]any) (rule, reason string)
	// InRoots says why a root the client offers the server (a file: URI)
	// is outside the policy's read roots, or "" when it is inside. Nil:
	// roots are not checked.
	InRoots func(ctx context.Context, uri string) string
	// Fetch says why the client may not fetch an http(s) or file: URI for
	// the server (an icon's src, a URL-mode elicitation's url): one the
	// policy's network list or read roots do not admit. Nil: not checked.
	Fetch func(ctx context.Context, uri string) string
}

// Stage returns the L2 layer for what servers send back, as a Stage
// that is also a Waiter: it pins every tool's description and schema at
// first sight in tools/list, hides and blocks tools whose description is
// poisoned or later changes (rug pull), denies tool results that carry
// prompt injection, and redacts secrets and strips hidden characters from
// the rest. A client that calls a tool without having listed the tools
// whole (one that cached the list, say), or without listing them again
// after the server announced a change (notifications/tools/list_changed),
// makes the layer list them itself first (Wait: the call takes the
// proxy's slow path), so that no tool is called unseen or on a stale view.
// Every other request and response takes the fast path. State is per
// Stage value, that is per guarded session.
func Stage(o Options) guard.Stage {
	return &session{o: o, pins: map[string]string{}, blocked: map[string]string{}, listID: newListID()}
}

// listStart is the Request state key of a client's tools/list: the
// server's tools/list_changed count when the list began.
type listStart struct{}

// Wait makes a tools/call wait for the layer's own tools/list when the
// call needs one (see ensureListed). It never blocks: while another call's
// list is under way, the call waits for it on the slow path, unless that
// list only looks for a tool no list showed (a relist) and the call is to
// a tool already seen, with no tools/list_changed since: the list cannot
// change that call's judgement, so the call does not queue behind it.
func (s *session) Wait(ctx context.Context, req *guard.Request) func(context.Context, guard.Handler) {
	if req.Method != "tools/call" {
		return nil
	}
	changes := guard.NoticesFrom(ctx).Count(guard.ToolsListChanged)
	if s.listMu.TryLock() {
		need := s.needsList(req.Tool, changes)
		s.listMu.Unlock()
		if !need {
			return nil
		}
	} else {
		s.mu.Lock()
		_, seen := s.pins[req.Tool]
		pass := s.relisting && seen && changes <= s.relistAt
		s.mu.Unlock()
		if pass {
			return nil
		}
	}
	return func(ctx context.Context, send guard.Handler) { s.ensureListed(ctx, req, send) }
}

// Request refuses a method outside the MCP schema and params not read
// exactly (protocolRequest), denies a call to a blocked tool, and notes
// when a client's tools/list began.
func (s *session) Request(ctx context.Context, req *guard.Request) *guard.Response {
	if r := s.protocolRequest(req); r != nil {
		return r
	}
	if r := s.requestSecret(req); r != nil {
		return r
	}
	switch req.Method {
	case "tools/call":
		if rule, ok := s.isBlocked(req.Tool); ok {
			reason := fmt.Sprintf("tool %q was blocked at tools/list (%s)", req.Tool, rule)
			s.log(req, audit.Deny, rule, req.Tool, reason)
			return guard.Deny(Layer, rule, reason)
		}
	case "tools/list":
		req.SetState(listStart{}, guard.NoticesFrom(ctx).Count(guard.ToolsListChanged))
	}
	return nil
}

// Response judges what the server answered, by the rule of the request's
// row in the MCP table: read by exact keys, then as its judge says.
func (s *session) Response(ctx context.Context, req *guard.Request, resp *guard.Response) *guard.Response {
	j, refused := s.resultJudge(req, resp)
	if refused != nil {
		return refused
	}
	if j != judgeKeys {
		resp = s.icons(ctx, req, resp)
	}
	switch j {
	case judgeTools:
		if changes, ok := req.State(listStart{}).(uint64); ok && completeList(req, resp) {
			s.markListed(changes)
		}
		return s.redactListing(req, s.tools(ctx, req, resp))
	case judgeDefinitions:
		return s.redactListing(req, s.definitions(ctx, req, resp))
	case judgeInitialize:
		return s.initialize(req, resp)
	}
	return s.sanitize(req, resp)
}

type session struct {
	o       Options
	mu      sync.Mutex
	pins    map[string]string // tool -> digest of description and schema at first sight
	blocked map[string]string // tool -> rule that blocked it
	// relisting is set while the layer's own list runs only to find a
	// tool no list showed, with the tools/list_changed count then; a call
	// to a seen tool need not wait for it (see Wait).
	relisting bool
	relistAt  uint64

	// listMu is held while the layer lists the tools itself, so that
	// concurrent first calls wait for that list.
	listMu   sync.Mutex
	listed   bool            // the tools were listed whole, by the client or the layer
	listedAt uint64          // the server's tools/list_changed count when that list began
	relisted map[string]bool // tools called unseen after that, listed again for
	listID   string          // the id prefix of the layer's own requests
	listSeq  int             // the layer's own requests so far
}

// maxListPages bounds the pages the layer follows in its own tools/list,
// and DefaultListTimeout the wait for each: calls wait for that list, and
// a server that never answers it must not hold them up for good.
const (
	maxListPages       = 100
	DefaultListTimeout = 10 * time.Second
)

// newListID returns an id prefix for the layer's own tools/list requests
// that no client's id will equal.
func newListID() string {
	var b [8]byte
	rand.Read(b[:])
	return "mcpguard-l2-tools-list-" + hex.EncodeToString(b[:]) + "-"
}

// completeList reports whether resp answers req with the whole list: the
// first page, and no next one.
func completeList(req *guard.Request, resp *guard.Response) bool {
	if resp == nil || resp.Error != nil {
		return false
	}
	var p struct {
		Cursor string `json:"cursor"`
	}
	var r struct {
		NextCursor string `json:"nextCursor"`
	}
	json.Unmarshal(req.Params, &p)
	return json.Unmarshal(resp.Result, &r) == nil && p.Cursor == "" && r.NextCursor == ""
}

// markListed records a whole list that began when the server had sent
// changes tools/list_changed notifications.
func (s *session) markListed(changes uint64) {
	s.listMu.Lock()
	s.listed = true
	s.listedAt = max(s.listedAt, changes)
	s.listMu.Unlock()
}

// ensureListed lists the server's tools through next before the first
// call, unless the client listed them whole; again after the server sent
// notifications/tools/list_changed, unless the client listed them since;
// and again, once per tool, when a tool is called that no list showed (one
// the server added without saying so): each tool is pinned and judged
// (poisoning, rug pull against the session's and the policy's pins) before
// it is called. A server that fails the list still serves calls, checked
// as before. A server that announces changes before every call gets a
// list before every call: it slows down only itself.
func (s *session) ensureListed(ctx context.Context, call *guard.Request, next guard.Handler) {
	s.listMu.Lock()
	defer s.listMu.Unlock()
	changes := guard.NoticesFrom(ctx).Count(guard.ToolsListChanged)
	if !s.needsList(call.Tool, changes) {
		return
	}
	if s.listed && changes <= s.listedAt { // a tool no list showed
		if s.relisted == nil {
			s.relisted = map[string]bool{}
		}
		s.relisted[call.Tool] = true
		s.mu.Lock()
		s.relisting, s.relistAt = true, s.listedAt
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.relisting = false
			s.mu.Unlock()
		}()
	}
	s.listed = true
	s.listedAt = changes
	wait := s.o.ListTimeout
	if wait <= 0 {
		wait = DefaultListTimeout
	}
	var cursor string
	for range maxListPages {
		s.listSeq++
		req := &guard.Request{Method: "tools/list", ID: json.RawMessage(strconv.Quote(s.listID + strconv.Itoa(s.listSeq))),
			Server: call.Server, Config: call.Config}
		if cursor != "" {
			req.Params, _ = json.Marshal(map[string]string{"cursor": cursor})
		}
		lctx, cancel := context.WithTimeout(ctx, wait)
		resp := next(lctx, req)
		cancel()
		if resp == nil || resp.Error != nil {
			return
		}
		s.judgeTools(ctx, req, resp, "the guard's own tools/list; calls to it are denied")
		var res struct {
			NextCursor string `json:"nextCursor"`
		}
		if json.Unmarshal(resp.Result, &res) != nil || res.NextCursor == "" {
			return
		}
		cursor = res.NextCursor
	}
}

// needsList reports whether a call to tool must wait for a list of the
// server's tools (see ensureListed), given the server's tools/list_changed
// count; s.listMu must be held.
func (s *session) needsList(tool string, changes uint64) bool {
	if !s.listed || changes > s.listedAt {
		return true
	}
	s.mu.Lock()
	_, seen := s.pins[tool]
	s.mu.Unlock()
	return !seen && !s.relisted[tool]
}

func (s *session) isBlocked(tool string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.blocked[tool]
	return r, ok
}

func (s *session) waived(tool, rule string) bool {
	return s.o.Waived != nil && s.o.Waived(tool, rule)
}

func (s *session) log(req *guard.Request, decision, rule, target, reason string) {
	s.o.Audit.Log(audit.Event{
		Server: s.o.Server, Config: s.o.Config, Layer: Layer, Rule: rule, Tool: req.Tool,
		Decision: decision, Reason: reason, Target: target, ArgsDigest: audit.Digest(req.Arguments),
	})
}

// tools inspects a tools/list result, dropping poisoned and changed tools;
// the rest of the result is read as text.
func (s *session) tools(ctx context.Context, req *guard.Request, resp *guard.Response) *guard.Response {
	if out := s.judgeTools(ctx, req, resp, "tool removed from tools/list"); out != nil {
		resp = &guard.Response{Result: out}
	}
	return s.sanitize(req, resp)
}

// judgeTools pins and judges every tool of a tools/list result, logging
// each it blocks with what follows (outcome); it returns the result without
// the blocked tools, or nil when it blocked none or cannot read the result.
func (s *session) judgeTools(ctx context.Context, req *guard.Request, resp *guard.Response, outcome string) json.RawMessage {
	if resp == nil || resp.Error != nil || len(resp.Result) == 0 {
		return nil
	}
	return guard.FilterTools(resp.Result, func(raw json.RawMessage) bool {
		var t struct {
			Name        string          `json:"name"`
			Title       string          `json:"title"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return false
		}
		if rule, reason := s.judgeTool(t.Name, t.Title, t.Description, t.InputSchema, raw); rule != "" {
			tr := &guard.Request{Method: req.Method, Tool: t.Name}
			s.log(tr, audit.Rewrite, rule, t.Name, reason+"; "+outcome)
			s.announce(ctx, "tool", t.Name, rule, reason, outcome)
			return false
		}
		return true
	})
}

// judgeTool pins and checks one listed tool; it returns the rule that
// blocks it, or "".
func (s *session) judgeTool(name, title, desc string, schema, raw json.RawMessage) (rule, reason string) {
	digest := ToolDigest(name, title, desc, schema)
	// The session pins the whole definition: annotations, outputSchema,
	// _meta and fields yet to come reach the model (or steer the client)
	// as much as the description does, so a change to any is a rug pull.
	whole := DefinitionDigest(raw)
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.blocked[name]; ok {
		return r, "tool was blocked earlier in this session"
	}
	if s.o.Pinned != nil {
		if pin := s.o.Pinned(name); pin != "" && pin != digest && !s.waived(name, RuleRugPull) {
			s.blocked[name] = RuleRugPull
			return RuleRugPull, fmt.Sprintf("description or schema of %q differs from the one pinned in the policy", name)
		}
	}
	if pin, ok := s.pins[name]; ok {
		if pin != whole && !s.waived(name, RuleRugPull) {
			s.blocked[name] = RuleRugPull
			return RuleRugPull, fmt.Sprintf("definition of %q (description, schema, annotations or metadata) changed after first sight", name)
		}
		return "", ""
	}
	s.pins[name] = whole
	if f, ok := findDefinitionPoisoning(title+"\n"+desc+"\n", raw); ok && !s.waived(name, RuleToolPoisoned) {
		s.blocked[name] = RuleToolPoisoned
		return RuleToolPoisoned, fmt.Sprintf("description of %q looks poisoned (%s)", name, f.Kind)
	}
	return "", ""
}

// ToolDigest hashes what the model reads about a tool (name, title,
// description, input schema), as "sha256:HEX". The schema is re-encoded so
// that key order does not count as a change.
func ToolDigest(name, title, desc string, schema json.RawMessage) string {
	canon := []byte(schema)
	if b, ok := appendSorted(nil, schema); ok {
		canon = b
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte(name), []byte(title), []byte(desc), canon} {
		h.Write([]byte(fmt.Sprintf("%d:", len(part))))
		h.Write(part)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// DefinitionDigest hashes a whole tool, prompt or resource definition as
// "sha256:HEX", re-encoded so that key order and spacing do not count.
func DefinitionDigest(raw json.RawMessage) string {
	canon := []byte(raw)
	if b, ok := appendSorted(nil, raw); ok {
		canon = b
	}
	h := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(h[:])
}

// suspicious is the cheap filter on a raw result: only results with
// non-ASCII bytes, JSON escapes of them, a secret or injection anchor, or
// more than one text are decoded and walked. Several texts are read
// joined (sanitize), and an anchor split across two of them ("disre",
// "gard all previous rules") is in no raw byte range, so they always take
// the full walk.
func suspicious(raw []byte) bool {
	return riskyBytes(raw) || resultAnchors.inFold(raw) || multiText(raw)
}

// multiText reports whether raw (valid JSON) holds two or more string
// values that joinTexts could join: every string value counts but a
// label key's (type, mimeType, role, uri) string value, so it counts at
// least what joinTexts joins. A key spelled with an escape counts as
// no label (and riskyBytes flags the escape anyway).
func multiText(raw []byte) bool {
	n := 0
	label := false
	for i := 0; i < len(raw); i++ {
		if raw[i] != '"' {
			continue
		}
		j := i + 1
		for j < len(raw) && raw[j] != '"' {
			if raw[j] == '\\' {
				j++
			}
			j++
		}
		if j >= len(raw) {
			return true // not valid JSON: let the decoder decide
		}
		k := skipSpace(raw, j+1)
		if k < len(raw) && raw[k] == ':' {
			switch string(raw[i+1 : j]) {
			case "type", "mimeType", "role", "uri":
				// a label only when its value is a string (eachString)
				v := skipSpace(raw, k+1)
				label = v < len(raw) && raw[v] == '"'
			default:
				label = false
			}
		} else {
			if !label {
				if n++; n >= 2 {
					return true
				}
			}
			label = false
		}
		i = j
	}
	return false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// sanitize checks a result (a tool's, a resource's, a prompt's, a
// completion's, a task's) or an error: prompt injection denies it; secrets
// are redacted and hidden characters stripped (each a logged rewrite).
// Strings and keys are read as the model reads them (see FindInjection),
// with markup reduced, and also joined: a phrase or a key split across
// content items is what the model reads whole. A secret that cannot be
// redacted in place (split across items, base64-encoded) denies the
// result. The result is read in place (scanText).
func (s *session) sanitize(req *guard.Request, resp *guard.Response) *guard.Response {
	if resp != nil && resp.Error != nil {
		return s.sanitizeError(req, resp)
	}
	if resp == nil || len(resp.Result) == 0 || !mayInject(resp.Result) {
		return resp
	}
	v := scanText(resp.Result, textOptions{
		inject: !s.waived(req.Tool, RuleResponseInject),
		strip:  !s.waived(req.Tool, RuleResponseHidden),
		redact: !s.waived(req.Tool, RuleResponseSecret),
	})
	what := resultName(req)
	switch {
	case v.inject != nil:
		reason := fmt.Sprintf("%s carries a prompt injection (%s)", what, v.inject.Kind)
		s.log(req, audit.Deny, RuleResponseInject, req.Tool, reason)
		return guard.Deny(Layer, RuleResponseInject, reason)
	case v.deepSecret != nil:
		reason := fmt.Sprintf("%s carries a secret that cannot be redacted in place (%s)", what, v.deepSecret.Kind)
		s.log(req, audit.Deny, RuleResponseSecret, v.deepSecret.Kind, reason)
		return guard.Deny(Layer, RuleResponseSecret, reason)
	case v.out == nil:
		return resp
	}
	if err := validValue(v.out); err != nil {
		reason := fmt.Sprintf("%s is not one value after sanitising (%v)", what, err)
		s.log(req, audit.Deny, RuleResponseMalforms, req.Tool, reason)
		return guard.Deny(Layer, RuleResponseMalforms, reason)
	}
	if v.hidden {
		s.log(req, audit.Rewrite, RuleResponseHidden, req.Tool, "hidden Unicode characters stripped from the result")
	}
	if len(v.kinds) > 0 {
		s.log(req, audit.Rewrite, RuleResponseSecret, strings.Join(dedup(v.kinds), ","), "secrets redacted from the result")
	}
	return &guard.Response{Result: v.out}
}

// resultName names what answered req, for reasons.
func resultName(req *guard.Request) string {
	if req.Tool != "" {
		return fmt.Sprintf("result of %q", req.Tool)
	}
	return "result of " + req.Method
}

// sanitizeError checks a JSON-RPC error from the server: its message and
// data reach the model as a result does.
func (s *session) sanitizeError(req *guard.Request, resp *guard.Response) *guard.Response {
	e := resp.Error
	text := e.Message + "\n" + string(e.Data)
	if !s.waived(req.Tool, RuleResponseInject) {
		if f, ok := FindInjection(text); ok {
			reason := fmt.Sprintf("the server's error for %s carries a prompt injection (%s)", req.Method, f.Kind)
			s.log(req, audit.Deny, RuleResponseInject, req.Tool, reason)
			return guard.Deny(Layer, RuleResponseInject, reason)
		}
	}
	if s.waived(req.Tool, RuleResponseSecret) {
		return resp
	}
	if f, ok := FindSecretDeep(text); ok {
		msg, _ := RedactSecrets(StripHidden(e.Message))
		if _, still := FindSecretDeep(msg); still || len(e.Data) > 0 {
			reason := fmt.Sprintf("the server's error for %s carries a secret (%s)", req.Method, f.Kind)
			s.log(req, audit.Deny, RuleResponseSecret, f.Kind, reason)
			return guard.Deny(Layer, RuleResponseSecret, reason)
		}
		s.log(req, audit.Rewrite, RuleResponseSecret, f.Kind, "secrets redacted from the server's error")
		return &guard.Response{Error: &jsonrpc.Error{Code: e.Code, Message: msg}}
	}
	return resp
}

func dedup(ss []string) []string {
	seen := map[string]bool{}
	out := ss[:0]
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
