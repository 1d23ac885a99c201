package configs

import (
	"context"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/policy"
	"github.com/mcpguard/mcpguard/guard/sandbox"
)

// newEBPF starts the BPF LSM sandbox for p (package sandbox, Linux only).
func newEBPF(p *policy.Policy, o Options, config string) (guard.Sandbox, error) {
	sb, err := sandbox.New(context.Background(), p, sandbox.Options{
		Server:       o.Server,
		Config:       config,
		Audit:        o.Audit,
		Report:       o.Report,
		OnDenial:     o.OnDenial,
		RuntimeCache: o.RuntimeCache,
	})
	if err != nil {
		return nil, err
	}
	return sb, nil
}
