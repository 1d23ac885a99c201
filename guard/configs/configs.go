// Package configs turns a config name (C0, C-AB, C-app, C-ebpf, C-full,
// C-AB+ebpf, ...) into the list of layers and the sandbox that implement it.
// A config is just a list of layers around the forwarding core.
package configs

import (
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/policy"
	"github.com/mcpguard/mcpguard/guard/runtime"
)

// Sentinel errors; callers branch on them (the eval harness skips a config
// that is unavailable here, the CLI exits with a usage error on an unknown one).
var (
	ErrUnknown     = errors.New("unknown config")
	ErrUnavailable = errors.New("config not available")
)

// The six configs of the study, in table order. More may be added, never renamed.
const (
	C0      = "C0"
	CAB     = "C-AB"
	CApp    = "C-app"
	CEBPF   = "C-ebpf"
	CFull   = "C-full"
	CABEBPF = "C-AB+ebpf"
)

// Names lists every config name this build knows, in table order.
func Names() []string {
	return append([]string{C0, CAB, CApp, CEBPF, CFull, CABEBPF}, extraNames()...)
}

// Options carries what the layers need to know about the guarded server.
type Options struct {
	// Server names the guarded server (for audit events and policy lookup).
	Server string
	// PolicyFile is the server's L1 policy (JSON). Overrides are read from
	// the overrides/ directory beside it.
	PolicyFile string
	// ManifestFile is the server's AgentBound manifest (C-AB configs).
	ManifestFile string
	// Audit receives one event per denial or rewrite; nil drops them.
	Audit *audit.Logger
	// L3 picks the kernel backend for configs with L3: "auto", "ebpf" or
	// "landlock". Empty means the config's own backend.
	L3 string
	// Vars expands ${NAME} placeholders in policy and manifest files (the
	// eval harness sets WS, HOME and TMP for each case).
	Vars map[string]string
	// OnDenial, when set, is called with each L3 denial as the kernel
	// reports it while the server runs (BPF LSM's ring buffer, Landlock's
	// audit records), for `run` to explain it then.
	OnDenial func(audit.Event)
	// Dir is the directory the server runs in (`run --cwd`). Empty: the
	// policy's workdir, else its first filesystem root. Relative path
	// arguments are judged against exactly Setup.Dir.
	Dir string
	// AuditFile is the audit log's path, if it is a file: it must not lie
	// under a write root (policy.CheckGuardFiles).
	AuditFile string
	// Report receives the L3 backends' session change report besides the
	// audit log (package guard/changes); nil is stderr.
	Report io.Writer
	// RuntimeCache keeps what L3's runtime resolver learned from its
	// confined helpers across the sessions of this process, while the
	// files it came from are unchanged (runtime.Cache: the eval harness
	// and the gateway start the same servers many times); nil keeps
	// nothing.
	RuntimeCache *runtime.Cache
}

// Setup is a built config, ready for the proxy.
type Setup struct {
	Name string
	// Stages are the defence layers, run by the proxy on its read loops
	// (Proxy.Stages), in order.
	Stages []guard.Stage
	// ServerHooks see what the server sends on its own (L2 on
	// notifications and server-to-client requests).
	ServerHooks []guard.ServerHook
	// Prepare hooks run on the server command before it starts (e.g. L1's
	// environment allow-list).
	Prepare []func(*exec.Cmd) error
	// Sandbox is the L3 backend, nil when the config has none.
	Sandbox guard.Sandbox
	// Dir is the directory the proxy must start the server in
	// (guard.Proxy.Dir): the one relative path arguments are judged
	// against. Empty: the proxy's own (no policy names one).
	Dir string
}

// Build returns the setup for config name. A config whose layers cannot run
// here (L3 on a kernel that refuses BPF LSM, say) fails with an error that
// wraps ErrUnavailable and says why: configs with L3 fail closed.
func Build(name string, o Options) (*Setup, error) {
	switch name {
	case C0:
		return &Setup{Name: C0, Dir: o.Dir}, nil
	case CAB:
		return combine(name, o, buildAB)
	case CApp:
		return combine(name, o, buildApp)
	case CEBPF:
		return combine(name, o, buildL3)
	case CFull:
		return combine(name, o, buildApp, buildL3)
	case CABEBPF:
		return combine(name, o, buildAB, buildL3)
	}
	if b, ok := extraBuilder(name); ok {
		return combine(name, o, b...)
	}
	return nil, fmt.Errorf("%w %q (known: %v)", ErrUnknown, name, Names())
}

type builder func(o Options, s *Setup) error

func combine(name string, o Options, parts ...builder) (*Setup, error) {
	s := &Setup{Name: name, Dir: o.Dir}
	for _, b := range parts {
		if err := b(o, s); err != nil {
			if s.Sandbox != nil {
				s.Sandbox.Close()
			}
			return nil, fmt.Errorf("config %s: %w", name, err)
		}
	}
	return s, nil
}

// loadPolicy loads the server's policy with its overrides, as every layer
// that uses it does: the directory the server runs in decided (Options.Dir,
// else the policy's workdir, else its first filesystem root), the policy's
// workdir set to exactly it (relative paths are judged against the
// directory the server resolves them in), and a policy whose write roots
// reach the guard's own files refused.
func loadPolicy(o Options, s *Setup) (*policy.Policy, error) {
	p, err := policy.LoadWithOverrides(o.PolicyFile, o.Vars)
	if err != nil {
		return nil, err
	}
	if err := policy.CheckGuardFiles(p, policy.GuardFiles(o.PolicyFile, o.AuditFile)); err != nil {
		return nil, fmt.Errorf("policy %s: %w", o.PolicyFile, err)
	}
	dir := o.Dir
	switch {
	case dir != "":
	case p.Workdir != "":
		dir = p.Workdir
	case len(p.Filesystem.Read) > 0:
		dir = p.Filesystem.Read[0]
	case len(p.Filesystem.Write) > 0:
		dir = p.Filesystem.Write[0]
	}
	if dir != "" {
		if !filepath.IsAbs(dir) {
			return nil, fmt.Errorf("server directory %q is not absolute", dir)
		}
		p.Workdir, s.Dir = dir, dir
	}
	return p, nil
}
