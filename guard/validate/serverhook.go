package validate

import (
	"context"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
)

// ServerHook is L2 on what the server sends on its own, outside an answer
// (notifications/message, sampling/createMessage, elicitation/create): the
// proxy runs it on every such message before the client sees it (see
// guard.ServerHook). A message that carries a prompt injection is dropped
// (a request is then answered to the server with a denial); hidden
// characters and secrets are stripped or redacted. Each decision is one
// audit event.
func ServerHook(o Options) guard.ServerHook {
	return func(_ context.Context, m *guard.ServerMessage) *guard.ServerMessage {
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
