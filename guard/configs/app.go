package configs

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mcpguard/mcpguard/guard/agentbound"
	"github.com/mcpguard/mcpguard/guard/policy"
	"github.com/mcpguard/mcpguard/guard/validate"
)

// buildApp adds L1 (the server's policy, with the overrides beside it) and
// L2 (argument content checks, then response and tools/list checks), and
// the environment allow-list as a Prepare hook. A missing or broken policy
// is an error: the application layers never run without one.
func buildApp(o Options, s *Setup) error {
	if o.PolicyFile == "" {
		return errors.New("L1 needs a policy file (--policy)")
	}
	p, err := loadPolicy(o, s)
	if err != nil {
		return err
	}
	e, err := policy.Compile(p, policy.EngineOptions{L2: true})
	if err != nil {
		return err
	}
	lo := policy.LayerOptions{Server: o.Server, Config: s.Name, Audit: o.Audit}
	vo := validate.Options{Server: o.Server, Config: s.Name, Audit: o.Audit,
		Waived: e.Waived, Pinned: e.Pinned, AllowMethods: p.Protocol.AllowMethods,
		Confine: confine(e), InRoots: inRoots(e), Fetch: fetch(e)}
	s.Stages = append(s.Stages, policy.Stage(e, lo), validate.Stage(vo))
	s.ServerHooks = append(s.ServerHooks, validate.ServerHook(vo))
	s.Prepare = append(s.Prepare, policy.EnvFilter(p, lo))
	return nil
}

// buildAB adds the AgentBound-style manifest check.
func buildAB(o Options, s *Setup) error {
	if o.ManifestFile == "" {
		return errors.New("C-AB needs a manifest file")
	}
	m, err := agentbound.Load(o.ManifestFile, o.Vars)
	if err != nil {
		return err
	}
	s.Stages = append(s.Stages, agentbound.Stage(agentbound.NewChecker(m),
		agentbound.LayerOptions{Server: o.Server, Config: s.Name, Audit: o.Audit}))
	return nil
}

// confine judges elicitation form values as L1 judges a prompt's
// arguments: values that name files or URLs are confined to the policy's
// roots and network list, and every value is scanned for secrets and
// environment references as a tool argument is.
func confine(e *policy.Engine) func(context.Context, map[string]any) (string, string) {
	return func(ctx context.Context, values map[string]any) (string, string) {
		params, err := json.Marshal(map[string]any{"arguments": values})
		if err != nil {
			return policy.RuleParamsMalformed, "the values cannot be encoded"
		}
		if v := e.CheckRequest(ctx, "prompts/get", params); v != nil {
			return v.Rule, v.Reason
		}
		return "", ""
	}
}

// inRoots says why a root the client offers is outside the policy's read
// roots (policy's resource check: a file: URI confined as a read path).
func inRoots(e *policy.Engine) func(context.Context, string) string {
	return func(ctx context.Context, uri string) string {
		if !validate.IsFileURI(uri) {
			return "a root must be a file: URI"
		}
		return resourceReason(ctx, e, uri)
	}
}

// fetch says why the client may not fetch a URL for the server (an icon,
// a URL-mode elicitation): it is a resource the server names, confined as
// a resource URI is (http(s) to the network allow-list, file: to the read
// roots).
func fetch(e *policy.Engine) func(context.Context, string) string {
	return func(ctx context.Context, uri string) string { return resourceReason(ctx, e, uri) }
}

// resourceReason says why the policy does not admit uri as a resource
// (L1's resources/read check), or "".
func resourceReason(ctx context.Context, e *policy.Engine, uri string) string {
	params, err := json.Marshal(map[string]string{"uri": uri})
	if err != nil {
		return "the URI cannot be encoded"
	}
	if v := e.CheckRequest(ctx, "resources/read", params); v != nil {
		return v.Reason
	}
	return ""
}
