package policy

import (
	"context"
	"os"
	"os/exec"
	"strings"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
)

// LayerOptions names the session for audit events.
type LayerOptions struct {
	Server, Config string
	Audit          *audit.Logger
}

// Middleware returns the argument side of L1 (and L2 when the engine has
// it): every tools/call is checked before it reaches the server; a refused
// call is logged and answered with a denial naming the rule.
func Middleware(e *Engine, o LayerOptions) guard.Middleware {
	return func(next guard.Handler) guard.Handler {
		return func(ctx context.Context, req *guard.Request) *guard.Response {
			if req.Method != "tools/call" {
				return next(ctx, req)
			}
			v := e.Check(ctx, req.Tool, req.Arguments)
			if v == nil {
				return next(ctx, req)
			}
			o.Audit.Log(audit.Event{
				Server: o.Server, Config: o.Config, Layer: v.Layer, Rule: v.Rule, Tool: req.Tool,
				Decision: audit.Deny, Reason: v.Reason, Target: v.Target,
				ArgsDigest: audit.Digest(req.Arguments),
			})
			return guard.Deny(v.Layer, v.Rule, v.Reason)
		}
	}
}

// EnvFilter returns a Prepare hook that gives the server only the
// environment variables p allows (from the command's own environment, or
// the guard's when the command has none). The names it drops, never their
// values, are logged as one rewrite event.
func EnvFilter(p *Policy, o LayerOptions) func(*exec.Cmd) error {
	allow := append([]string(nil), p.Env.Allow...)
	return func(cmd *exec.Cmd) error {
		env := cmd.Env
		if env == nil {
			env = os.Environ()
		}
		kept, dropped := filterEnv(env, allow)
		if kept == nil {
			kept = []string{} // non-nil: an empty environment, not the guard's
		}
		cmd.Env = kept
		if len(dropped) > 0 {
			o.Audit.Log(audit.Event{
				Server: o.Server, Config: o.Config, Layer: LayerL1, Rule: "env.filtered",
				Decision: audit.Rewrite, Target: strings.Join(dropped, ","),
				Reason: "environment variables not in the policy's env allow-list were not passed to the server",
			})
		}
		return nil
	}
}
