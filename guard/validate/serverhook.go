package validate

import (
	"context"
	"fmt"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/jsonrpc"
	"github.com/mcpguard/mcpguard/guard/mcpspec"
)

// ServerHook is L2 on what the server sends on its own, outside an answer
// (every notification and request of the server's side of the MCP table):
// the proxy runs it on every such message before the client sees it (see
// guard.ServerHook). A method the table does not have for the server (one
// outside the schema, or a request's method sent as a notification) is
// dropped unless the policy allows it; params are read by exact keys; a
// tool definition it carries (sampling/createMessage's tools, MCP
// 2025-11-25) is judged as a listed tool's is, and a poisoned one drops
// the message; then every string and key is read as text (ScanServerMessage): a message
// that carries a prompt injection is dropped (a request is then answered
// to the server with a denial), hidden characters and secrets are
// stripped or redacted. Each decision is one audit event.
func ServerHook(o Options) guard.ServerHook {
	return func(ctx context.Context, m *guard.ServerMessage) *guard.ServerMessage {
		kind := mcpspec.Notification
		if m.Kind == jsonrpc.KindRequest {
			kind = mcpspec.Request
		}
		drop := func(rule, reason string) *guard.ServerMessage {
			o.Audit.Log(audit.Event{Server: o.Server, Config: o.Config, Layer: Layer, Rule: rule,
				Decision: audit.Deny, Target: m.Method, Reason: reason})
			guard.Logf(ctx, "denied by L2 rule %s: %s", rule, reason)
			return nil
		}
		row, ok := mcpspec.Lookup(mcpspec.Server, kind, m.Method)
		switch {
		case ok:
			if err := row.CheckParams(m.Params); err != nil {
				return drop(RuleServerCaseKey, fmt.Sprintf("the server's %s was dropped: %v", m.Method, err))
			}
		case !o.allowed(m.Method):
			rule, reason := unknownReason(mcpspec.Server, kind, m.Method)
			if rule == RuleUnknownMethod {
				rule = RuleServerUnknown
			}
			return drop(rule, "the server's message was dropped: "+reason)
		}
		if name, f, ok := poisonedDefinition(m.Params); ok {
			return drop(RuleServerToolPoisoned, fmt.Sprintf("the server's %s was dropped: the definition of tool %q it carries looks poisoned (%s)", m.Method, name, f.Kind))
		}
		m, refused := o.fetchesInMessage(ctx, m)
		if refused != "" {
			return drop(RuleClientFetch, refused)
		}
		if m.Method == "sampling/createMessage" {
			if out := withoutContext(m); out != m {
				o.Audit.Log(audit.Event{Server: o.Server, Config: o.Config, Layer: Layer, Rule: RuleSamplingContext,
					Decision: audit.Rewrite, Target: m.Method,
					Reason: "the server's sampling request asked the client to include its conversation context: includeContext set to none"})
				guard.Logf(ctx, "L2 rule %s: the server's sampling request asked for the client's context (includeContext): set to none", RuleSamplingContext)
				m = out
			}
		}
		v := ScanServerMessage(m.Method, m.Params)
		switch {
		case v.Drop:
			o.Audit.Log(audit.Event{
				Server: o.Server, Config: o.Config, Layer: Layer, Rule: "server_message." + v.Finding.Kind,
				Decision: audit.Deny, Target: m.Method,
				Reason: "the server's own " + m.Method + " carries a prompt injection: dropped",
			})
			return nil
		case v.Params != nil:
			o.Audit.Log(audit.Event{
				Server: o.Server, Config: o.Config, Layer: Layer, Rule: "server_message." + v.Finding.Kind,
				Decision: audit.Rewrite, Target: m.Method,
				Reason: "hidden characters or secrets removed from the server's own " + m.Method,
			})
			out := *m
			out.Params = v.Params
			return &out
		}
		return m
	}
}

// RuleServerToolPoisoned drops a server message that carries a poisoned
// tool definition.
const RuleServerToolPoisoned = "server_message.tool_poisoned"

// poisonedDefinition judges every tool definition in params' tools array
// (sampling/createMessage's, MCP 2025-11-25) as a listed tool's definition
// is judged (findDefinitionPoisoning): a definition
// reaches the model wherever the server puts it. It returns the first
// poisoned one's name.
func poisonedDefinition(params []byte) (name string, f Finding, poisoned bool) {
	span := jsonrpc.Member(params, "tools")
	if !span.Present() {
		return "", Finding{}, false
	}
	arr := span.In(params)
	jsonrpc.Elements(arr, func(el jsonrpc.Span) bool {
		raw := el.In(arr)
		if f, poisoned = findDefinitionPoisoning("", raw); poisoned {
			name = jsonrpc.Unquote(jsonrpc.Member(raw, "name").In(raw))
			return false
		}
		return true
	})
	return name, f, poisoned
}

// RuleSamplingContext: a sampling request that asks the client to include
// its conversation (includeContext "thisServer" or "allServers") would hand
// the server what the user and other servers' tools said; the request goes
// on with "none".
const RuleSamplingContext = "server_message.sampling_context"

// withoutContext returns m with includeContext set to "none", or m itself
// when it asks for no context.
func withoutContext(m *guard.ServerMessage) *guard.ServerMessage {
	span := jsonrpc.Member(m.Params, "includeContext")
	if !span.Present() || string(span.In(m.Params)) == `"none"` {
		return m
	}
	out := make([]byte, 0, len(m.Params))
	out = append(out, m.Params[:span.Off]...)
	out = append(out, `"none"`...)
	out = append(out, m.Params[span.End:]...)
	c := *m
	c.Params = out
	return &c
}
