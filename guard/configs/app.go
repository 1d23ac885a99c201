package configs

import (
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
	p, err := policy.LoadWithOverrides(o.PolicyFile, o.Vars)
	if err != nil {
		return err
	}
	e, err := policy.Compile(p, policy.EngineOptions{L2: true})
	if err != nil {
		return err
	}
	lo := policy.LayerOptions{Server: o.Server, Config: s.Name, Audit: o.Audit}
	vo := validate.Options{Server: o.Server, Config: s.Name, Audit: o.Audit,
		Waived: e.Waived, Pinned: e.Pinned}
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
