package validate

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/jsonrpc"
	"github.com/mcpguard/mcpguard/guard/mcpspec"
)

// Rule ids of the protocol side of L2: every message is judged by the rule
// of its type in the MCP table (rules.go), and what the table does not
// have is refused.
const (
	RuleUnknownMethod  = "protocol.unknown_method"
	RuleWrongKind      = "protocol.wrong_kind"
	RuleCaseKey        = "protocol.case_key"
	RuleClientSecret   = "client.secret"
	RuleClientConfined = "client.confined"
	RuleClientRoots    = "client.roots"
	RuleServerUnknown  = "server_message.unknown_method"
	RuleServerCaseKey  = "server_message.case_key"
)

// AllowMethodsField is how a policy allows methods outside the schema:
// the error that refuses one names it.
const AllowMethodsField = `"protocol": {"allow_methods": [...]}`

// allowed reports whether the policy lets method outside the schema pass.
func (o *Options) allowed(method string) bool {
	return slices.Contains(o.AllowMethods, method) || slices.Contains(o.AllowMethods, "*")
}

// unknownReason says why method, sent by from as kind, is refused.
func unknownReason(from mcpspec.Side, kind mcpspec.Kind, method string) (rule, reason string) {
	if mcpspec.Known(method) {
		what := "sent by the other side"
		if _, ok := mcpspec.Lookup(from, other(kind), method); ok {
			what = "a " + other(kind).String()
			if kind == mcpspec.Notification {
				what += fmt.Sprintf(": sent without an id, a %s may run it unjudged", receiver(from))
			}
		}
		return RuleWrongKind, fmt.Sprintf("%s is not a %s %s in the MCP schema (it is %s)", method, from, kind, what)
	}
	return RuleUnknownMethod, fmt.Sprintf("method %q is not in the MCP schema (versions %s); a policy allows it with %s naming it",
		method, strings.Join(mcpspec.Versions, ", "), strings.Replace(AllowMethodsField, "...", fmt.Sprintf("%q", method), 1))
}

// receiver is the side that gets what from sends.
func receiver(from mcpspec.Side) mcpspec.Side {
	if from == mcpspec.Client {
		return mcpspec.Server
	}
	return mcpspec.Client
}

func other(k mcpspec.Kind) mcpspec.Kind {
	if k == mcpspec.Request {
		return mcpspec.Notification
	}
	return mcpspec.Request
}

// protocolError is a refusal with a JSON-RPC code of its own (-32601 for a
// method outside the schema, -32600 for a message read two ways).
func protocolError(code int, rule, reason string) *guard.Response {
	r := guard.Deny(Layer, rule, reason)
	r.Error.Code = code
	return r
}

// protocolRequest judges a client request by its row of the MCP table:
// a method outside the schema is refused (-32601) unless the policy
// allows it, and params are read by exact keys.
func (s *session) protocolRequest(req *guard.Request) *guard.Response {
	m, ok := mcpspec.Lookup(mcpspec.Client, mcpspec.Request, req.Method)
	if !ok {
		if s.o.allowed(req.Method) {
			return nil
		}
		rule, reason := unknownReason(mcpspec.Client, mcpspec.Request, req.Method)
		s.log(req, audit.Deny, rule, req.Method, reason)
		code := jsonrpc.CodeMethodNotFound
		if rule == RuleWrongKind {
			code = jsonrpc.CodeInvalidRequest
		}
		return protocolError(code, rule, reason)
	}
	if err := m.CheckParams(req.Params); err != nil {
		reason := fmt.Sprintf("%s params: %v", req.Method, err)
		s.log(req, audit.Deny, RuleCaseKey, req.Method, reason)
		return protocolError(jsonrpc.CodeInvalidRequest, RuleCaseKey, reason)
	}
	return nil
}

// resultJudge returns the judge of the server's answer to req, or a
// refusal when the answer is not read exactly.
func (s *session) resultJudge(req *guard.Request, resp *guard.Response) (judge, *guard.Response) {
	m, ok := mcpspec.Lookup(mcpspec.Client, mcpspec.Request, req.Method)
	if !ok {
		return judgeText, nil // a method the policy allows: its answer is text
	}
	var err error
	switch {
	case resp == nil:
	case resp.Error != nil:
		// The core read the error object by exact keys already.
	default:
		err = m.CheckResult(resp.Result)
	}
	if err != nil {
		reason := fmt.Sprintf("the server's answer to %s: %v", req.Method, err)
		s.log(req, audit.Deny, RuleCaseKey, req.Method, reason)
		return judgeUnset, guard.Deny(Layer, RuleCaseKey, reason)
	}
	return rules[m.Key()].result, nil
}

// Client judges what the client sends besides requests (guard.ClientJudge):
// a notification by its row of the MCP table (one that carries a request's
// method is refused: servers that run a call whether or not it has an id
// would run it unjudged), and an answer to a server's request by the rule
// of that request's result: secrets refuse it, elicitation values are
// confined by L1 as prompt arguments are, roots outside the policy's are
// removed.
func (s *session) Client(ctx context.Context, m *guard.ClientMessage) *guard.ClientMessage {
	if m.Kind == jsonrpc.KindNotification {
		return s.clientNotification(ctx, m)
	}
	return s.clientAnswer(ctx, m)
}

func (s *session) clientNotification(ctx context.Context, m *guard.ClientMessage) *guard.ClientMessage {
	row, ok := mcpspec.Lookup(mcpspec.Client, mcpspec.Notification, m.Method)
	switch {
	case ok:
		if err := row.CheckParams(m.Params); err != nil {
			s.refuseClient(ctx, m, RuleCaseKey, fmt.Sprintf("%v", err))
			return nil
		}
	case s.o.allowed(m.Method):
	default:
		rule, reason := unknownReason(mcpspec.Client, mcpspec.Notification, m.Method)
		s.refuseClient(ctx, m, rule, reason)
		return nil
	}
	// Every notification is read for secrets, whatever its rule.
	if f, ok := findSecretIn(m.Params); ok {
		s.refuseClient(ctx, m, RuleClientSecret, fmt.Sprintf("it carries a secret (%s)", f.Kind))
		return nil
	}
	return m
}

func (s *session) clientAnswer(ctx context.Context, m *guard.ClientMessage) *guard.ClientMessage {
	row, ok := mcpspec.Lookup(mcpspec.Server, mcpspec.Request, m.Method)
	j := judgeSecrets
	if ok {
		if m.Error == nil {
			if err := row.CheckResult(m.Result); err != nil {
				return s.refuseAnswer(ctx, m, RuleCaseKey, fmt.Sprintf("%v", err))
			}
		}
		j = rules[row.Key()].result
	}
	if m.Error != nil {
		text := m.Error.Message + "\n" + string(m.Error.Data)
		if f, ok := FindSecretDeep(text); ok {
			return s.refuseAnswer(ctx, m, RuleClientSecret, fmt.Sprintf("its error carries a secret (%s)", f.Kind))
		}
		return m
	}
	// Every answer is read for secrets, whatever its rule (a root's name
	// reaches the server as surely as a sampling answer's text).
	if f, ok := findSecretIn(m.Result); ok {
		return s.refuseAnswer(ctx, m, RuleClientSecret, fmt.Sprintf("it carries a secret (%s)", f.Kind))
	}
	switch j {
	case judgeKeys:
		return m
	case judgeRoots:
		return s.clientRoots(ctx, m)
	}
	if j == judgeValues && s.o.Confine != nil {
		var r struct {
			Content map[string]any `json:"content"`
		}
		if json.Unmarshal(m.Result, &r) == nil && len(r.Content) > 0 {
			if rule, reason := s.o.Confine(ctx, r.Content); rule != "" {
				return s.refuseAnswer(ctx, m, rule, reason)
			}
		}
	}
	return m
}

// clientRoots removes from the client's roots/list answer every root the
// policy's read roots do not hold: a server that takes its roots from the
// client (server-filesystem does) would otherwise reach wherever the
// client points it.
func (s *session) clientRoots(ctx context.Context, m *guard.ClientMessage) *guard.ClientMessage {
	if s.o.InRoots == nil {
		return m
	}
	out, removed, _ := jsonrpc.FilterMember(m.Result, "roots", func(raw []byte) bool {
		uri := jsonrpc.Unquote(jsonrpc.Member(raw, "uri").In(raw))
		if reason := s.o.InRoots(ctx, uri); reason != "" {
			s.logClient(ctx, m, RuleClientRoots, uri, "root "+uri+" removed from the client's roots/list answer: "+reason)
			return false
		}
		return true
	})
	if !removed {
		return m
	}
	c := *m
	c.Result = out
	return &c
}

// findSecretIn reads every string and key of raw for a secret, alone and
// joined in the order they are written.
func findSecretIn(raw []byte) (Finding, bool) {
	return findSecretOutside(raw, jsonrpc.Span{})
}

// findSecretOutside is findSecretIn leaving out the string values (not the
// keys) inside skip: a tools/call's argument values, which the argument
// side judges knowing the tool's secret slots and waivers.
func findSecretOutside(raw []byte, skip jsonrpc.Span) (Finding, bool) {
	var found *Finding
	var joined strings.Builder
	texts := 0
	eachString(raw, func(sp strSpan) bool {
		if !sp.Key && skip.Present() && sp.Off >= skip.Off && sp.End <= skip.End {
			return true
		}
		t := sp.text(raw)
		if f, ok := FindSecretDeep(t); ok {
			found = &f
			return false
		}
		texts++ // keys too: a secret split between a key and its value
		joined.WriteString(t)
		return true
	})
	if found != nil {
		return *found, true
	}
	if texts > 1 {
		if f, ok := FindSecretDeep(joined.String()); ok {
			return f, true
		}
	}
	return Finding{}, false
}

// requestSecret refuses a client request that carries a secret in any
// string or key of its params, whatever the method and the member (an
// argument's key, _meta, a member the schema does not name): a secret
// the client holds reaches the server through no member the guard does
// not read. A tools/call's argument values are the argument side's
// (policy.Stage, which runs before this layer).
func (s *session) requestSecret(req *guard.Request) *guard.Response {
	var skip jsonrpc.Span
	if req.Method == "tools/call" {
		skip = jsonrpc.Member(req.Params, "arguments")
	}
	f, ok := findSecretOutside(req.Params, skip)
	if !ok {
		return nil
	}
	reason := fmt.Sprintf("the client's %s request carries a secret (%s) outside the values the argument side judges", req.Method, f.Kind)
	s.log(req, audit.Deny, RuleClientSecret, req.Method, reason)
	return guard.Deny(Layer, RuleClientSecret, reason)
}

func (s *session) logClient(ctx context.Context, m *guard.ClientMessage, rule, target, reason string) {
	s.o.Audit.Log(audit.Event{Server: s.o.Server, Config: s.o.Config, Layer: Layer, Rule: rule,
		Decision: audit.Rewrite, Target: target, Reason: reason})
	guard.Logf(ctx, "L2 rule %s: %s", rule, reason)
}

// refuseClient logs a refused notification (the client is not told: a
// notification has no answer), on stderr too.
func (s *session) refuseClient(ctx context.Context, m *guard.ClientMessage, rule, reason string) {
	reason = fmt.Sprintf("the client's %s notification was dropped: %s", m.Method, reason)
	s.o.Audit.Log(audit.Event{Server: s.o.Server, Config: s.o.Config, Layer: Layer, Rule: rule,
		Decision: audit.Deny, Target: m.Method, Reason: reason})
	guard.Logf(ctx, "denied by L2 rule %s: %s", rule, reason)
}

// refuseAnswer replaces the client's answer with a denial to the server,
// and says so on stderr (the client does not learn it).
func (s *session) refuseAnswer(ctx context.Context, m *guard.ClientMessage, rule, reason string) *guard.ClientMessage {
	reason = fmt.Sprintf("the client's answer to %s was refused: %s", m.Method, reason)
	s.o.Audit.Log(audit.Event{Server: s.o.Server, Config: s.o.Config, Layer: Layer, Rule: rule,
		Decision: audit.Deny, Target: m.Method, Reason: reason})
	guard.Logf(ctx, "denied by L2 rule %s: %s", rule, reason)
	d := guard.Deny(Layer, rule, reason)
	c := *m
	c.Result, c.Error = nil, d.Error
	return &c
}
