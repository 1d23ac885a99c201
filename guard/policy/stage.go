package policy

import (
	"context"
	"encoding/json"
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

// Stage returns the argument side of L1 (and L2 when the engine has it)
// as a two-phase layer: every tools/call, and every other request that
// carries a path, URL or command (CheckedMethods: resources, prompts,
// completions), is checked in the request phase, before it reaches the
// server; a refused request is logged and answered with a denial naming
// the rule. The response phase hides from tools/list the tools the policy
// does not allow.
func Stage(e *Engine, o LayerOptions) guard.Stage {
	return &stage{e: e, o: o, sess: NewSession()}
}

type stage struct {
	e    *Engine
	o    LayerOptions
	sess *Session // one stage per proxy session (configs.Build)
}

func (st *stage) Request(ctx context.Context, req *guard.Request) *guard.Response {
	var v *Violation
	digest := req.Arguments
	switch {
	case req.Method == "tools/call":
		v = st.e.CheckCall(ctx, req.Tool, req.Arguments, st.sess)
	case Checks(req.Method):
		v = st.e.CheckRequest(ctx, req.Method, req.Params)
		digest = req.Params
	}
	if v == nil {
		return nil
	}
	st.o.Audit.Log(audit.Event{
		Server: st.o.Server, Config: st.o.Config, Layer: v.Layer, Rule: v.Rule, Tool: req.Tool,
		Decision: audit.Deny, Reason: v.Reason, Target: v.Target,
		ArgsDigest: audit.Digest(digest),
	})
	return guard.Deny(v.Layer, v.Rule, v.Reason)
}

func (st *stage) Response(_ context.Context, req *guard.Request, resp *guard.Response) *guard.Response {
	if req.Method == "tools/list" {
		return hideTools(st.e, st.o, resp)
	}
	return resp
}

// hideTools drops from a tools/list result the tools the policy does not
// allow: the model is not offered a tool whose every call would be denied.
// One rewrite event names what was hidden. A result it cannot read is
// passed on unchanged (calls are still checked one by one).
func hideTools(e *Engine, o LayerOptions, resp *guard.Response) *guard.Response {
	if resp == nil || resp.Error != nil || len(resp.Result) == 0 {
		return resp
	}
	var hidden []string
	out := guard.FilterTools(resp.Result, func(raw json.RawMessage) bool {
		var t struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &t) == nil && !e.Allows(t.Name) {
			hidden = append(hidden, t.Name)
			return false
		}
		return true
	})
	if out == nil {
		return resp
	}
	o.Audit.Log(audit.Event{
		Server: o.Server, Config: o.Config, Layer: LayerL1, Rule: RuleToolNotAllowed,
		Decision: audit.Rewrite, Target: strings.Join(hidden, ","),
		Reason: "tools not in the policy were removed from tools/list",
	})
	return &guard.Response{Result: out}
}

// EnvFilter returns a Prepare hook that gives the server only the
// environment variables p allows (from the command's own environment, or
// the guard's when the command has none). The names it drops, never their
// values, are logged as one rewrite event.
func EnvFilter(p *Policy, o LayerOptions) func(*exec.Cmd) error {
	allow := append(append([]string(nil), p.Env.Allow...), p.Runtime.Env...)
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
