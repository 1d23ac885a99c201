package validate

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// Rule ids of the definition and server-message checks.
const (
	RuleDefinitionPoisoned = "definition.poisoned"
	RuleDefinitionChanged  = "definition.rug_pull"
	RuleInstructions       = "initialize.instructions"
	RuleServerMessage      = "server_message.prompt_injection"
)

// listKeys maps each list method to the key of its items and the field
// that names an item.
var listKeys = map[string][2]string{
	"prompts/list":             {"prompts", "name"},
	"resources/list":           {"resources", "uri"},
	"resources/templates/list": {"resourceTemplates", "uriTemplate"},
}

// definitions judges a prompts, resources or resource templates list as
// tools/list is judged: every string of every item (name, title,
// description, arguments, annotations, _meta) is checked for poisoning,
// and each item is pinned whole at first sight; a poisoned or changed
// item is removed from the list (a logged rewrite, said on stderr). The
// rest of the result is read as text. The list is read in place.
func (s *session) definitions(ctx context.Context, req *guard.Request, resp *guard.Response) *guard.Response {
	keys, ok := listKeys[req.Method]
	if !ok || resp == nil || resp.Error != nil || len(resp.Result) == 0 {
		return s.sanitize(req, resp)
	}
	out, removed, listed := jsonrpc.FilterMember(resp.Result, keys[0], func(raw []byte) bool {
		name := jsonrpc.Unquote(jsonrpc.Member(raw, keys[1]).In(raw))
		pinKey := req.Method + "\x00" + name
		if rule, reason := s.judgeDefinition(pinKey, name, raw); rule != "" {
			outcome := "removed from " + req.Method
			s.log(&guard.Request{Method: req.Method}, audit.Rewrite, rule, name, reason+"; "+outcome)
			s.announce(ctx, kinds[req.Method], name, rule, reason, outcome)
			return false
		}
		return true
	})
	if !listed || !removed {
		return s.sanitize(req, resp)
	}
	return s.sanitize(req, &guard.Response{Result: out})
}

// announce says on the session's stderr that a definition was removed from
// a listing, why, and how an operator restores it: the client, and so the
// user, would otherwise only see it missing.
func (s *session) announce(ctx context.Context, kind, name, rule, reason, outcome string) {
	restore := "the definition rules are not waived per " + kind + " (docs/policy.md, Overrides)"
	if kind == "tool" {
		restore = fmt.Sprintf("if the server is trusted, restore it with `mcpguard policy override --audit FILE --tool %s --write DIR` "+
			"(FILE: this session's --audit log; DIR: the overrides/ directory beside the policy), which waives %s for it", name, rule)
	}
	guard.Logf(ctx, "L2 %s %q (rule %s): %s; %s", outcome, name, rule, reason, restore)
}

// kinds names what each list holds, for messages.
var kinds = map[string]string{"prompts/list": "prompt", "resources/list": "resource", "resources/templates/list": "resource template"}

// judgeDefinition pins and checks one listed prompt or resource.
func (s *session) judgeDefinition(pinKey, name string, raw json.RawMessage) (rule, reason string) {
	digest := DefinitionDigest(raw)
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.blocked[pinKey]; ok {
		return r, fmt.Sprintf("%q was blocked earlier in this session", name)
	}
	if pin, ok := s.pins[pinKey]; ok {
		if pin != digest {
			s.blocked[pinKey] = RuleDefinitionChanged
			return RuleDefinitionChanged, fmt.Sprintf("definition of %q changed after first sight", name)
		}
		return "", ""
	}
	s.pins[pinKey] = digest
	if f, ok := findDefinitionPoisoning("", raw); ok {
		s.blocked[pinKey] = RuleDefinitionPoisoned
		return RuleDefinitionPoisoned, fmt.Sprintf("definition of %q looks poisoned (%s)", name, f.Kind)
	}
	return "", ""
}

// initialize drops the server's instructions when they carry an injection,
// hidden characters, a credential store's name (all prose: see
// findCredentialPointer) or a secret: the client hands them to the model. The
// rest of the result is read as text.
func (s *session) initialize(req *guard.Request, resp *guard.Response) *guard.Response {
	if resp == nil || resp.Error != nil || len(resp.Result) == 0 {
		return s.sanitize(req, resp)
	}
	span := jsonrpc.Member(resp.Result, "instructions")
	if !span.Present() || resp.Result[span.Off] != '"' {
		return s.sanitize(req, resp)
	}
	instr := jsonrpc.Unquote(span.In(resp.Result))
	f, ok := FindPoisoning(instr)
	if !ok {
		f, ok = findCredentialPointer(instr)
	}
	if !ok {
		f, ok = FindSecretDeep(instr)
	}
	if !ok {
		return s.sanitize(req, resp)
	}
	out := withoutMember(resp.Result, span)
	s.log(req, audit.Rewrite, RuleInstructions, f.Kind, fmt.Sprintf("the server's instructions were removed (%s)", f.Kind))
	return s.sanitize(req, &guard.Response{Result: out})
}

// withoutMember returns the object obj without the member whose value is
// at val (the key, the colon and one comma go with it).
func withoutMember(obj []byte, val jsonrpc.Span) []byte {
	k := val.Off - 1
	for obj[k] != '"' { // back over the colon to the key's closing quote
		k--
	}
	k-- // into the key
	for obj[k] != '"' || escapedAt(obj, k) {
		k--
	}
	start, end := k, val.End
	// one comma: the one after the member, else the one before it
	j := end
	for j < len(obj) && (obj[j] == ' ' || obj[j] == '\t' || obj[j] == '\n' || obj[j] == '\r') {
		j++
	}
	if j < len(obj) && obj[j] == ',' {
		end = j + 1
	} else {
		i := start - 1
		for i > 0 && (obj[i] == ' ' || obj[i] == '\t' || obj[i] == '\n' || obj[i] == '\r') {
			i--
		}
		if obj[i] == ',' {
			start = i
		}
	}
	out := make([]byte, 0, len(obj)-(end-start))
	out = append(out, obj[:start]...)
	return append(out, obj[end:]...)
}

// escapedAt reports whether the quote at b[i] is escaped.
func escapedAt(b []byte, i int) bool {
	n := 0
	for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

// ServerMessageVerdict is what ScanServerMessage decided.
type ServerMessageVerdict struct {
	// Drop: the message carries a prompt injection; a notification is
	// to be dropped, a request answered with an error in the client's
	// stead.
	Drop bool
	// Params is the message's params with hidden characters stripped and
	// secrets redacted, or nil when nothing changed.
	Params json.RawMessage
	// Finding says what was found (Kind), when Drop or Params is set.
	Finding Finding
}

// ScanServerMessage checks what a server sends the client on its own,
// outside an answer (a log line, a progress or task status message, a
// sampling request's messages and system prompt, an elicitation's message
// and schema, any notification or request): every string and key of
// params is read as FindInjection reads it, with markup reduced, alone and
// joined; secrets are redacted and hidden characters stripped. Params it
// cannot read are passed (zero verdict).
func ScanServerMessage(method string, params json.RawMessage) ServerMessageVerdict {
	if len(params) == 0 || !mayInject(params) || validValue(params) != nil {
		// The proxy's params are always one value the Scanner accepted
		// (the walkers rely on it); anything else is not read here.
		return ServerMessageVerdict{}
	}
	v := scanText(params, textOptions{inject: true, strip: true, redact: true})
	switch {
	case v.inject != nil:
		return ServerMessageVerdict{Drop: true, Finding: *v.inject}
	case v.deepSecret != nil:
		return ServerMessageVerdict{Drop: true, Finding: *v.deepSecret}
	case v.out == nil:
		return ServerMessageVerdict{}
	case validValue(v.out) != nil:
		return ServerMessageVerdict{Drop: true, Finding: Finding{Kind: "unencodable"}}
	}
	return ServerMessageVerdict{Params: v.out, Finding: Finding{Kind: "sanitised"}}
}
