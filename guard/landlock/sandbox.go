package landlock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/landlock/ruleset"
	"github.com/mcpguard/mcpguard/guard/launch"
	"github.com/mcpguard/mcpguard/guard/policy"
	"github.com/mcpguard/mcpguard/guard/runtime"
)

// Options tune New. The zero value is right outside tests.
type Options struct {
	// Wrapper is the binary Prepare starts in place of the server. It must
	// link this package (mcpguard does; so does any test binary that
	// imports it). Empty means os.Executable().
	Wrapper string
	// Probe reports the kernel's Landlock ABI. Nil means KernelABI; tests
	// pass a probe that stands in for a kernel without Landlock.
	Probe Probe
	// Note is added to Limits, e.g. why `--l3 auto` chose this backend.
	Note string
	// Audit receives what Prepare excluded or refused (hard links);
	// Server and Config label those events.
	Audit          *audit.Logger
	Server, Config string
}

// ErrHardLinks is returned by Prepare under a non-root proxy when a read
// or write root holds a regular file with several names: Landlock judges
// the name opened, so another name of a secret would be readable, and
// without a mount namespace the file cannot be masked.
var ErrHardLinks = errors.New("landlock: multiply-linked files under the policy's roots")

// Sandbox is the Landlock guard.Sandbox. It holds the policy's compiled
// rules; Prepare adds the server program's own and rewrites the command.
type Sandbox struct {
	rules    *Rules
	resolver *runtime.Resolver
	abi      int
	wrapper  string
	note     string
	opts     Options
}

var _ guard.Sandbox = (*Sandbox)(nil)

// New compiles p for the running kernel. It fails closed: a kernel without
// Landlock gives an error wrapping guard.ErrKernelRefused that says why.
func New(p *policy.Policy, o Options) (*Sandbox, error) {
	probe := o.Probe
	if probe == nil {
		probe = ruleset.KernelABI
	}
	abi, err := checkABI(probe)
	if err != nil {
		return nil, err
	}
	r, err := Compile(p, exists)
	if err != nil {
		return nil, err
	}
	// What exec.allow admits must be able to start: its ELF or #!
	// interpreters become executable too.
	for _, pr := range r.Paths {
		if pr.Access != Exec {
			continue
		}
		chain, err := runtime.Interpreters(pr.Path, os.Getenv("PATH"))
		if err != nil {
			r.Notes = append(r.Notes, fmt.Sprintf("exec.allow %s: %v", pr.Path, err))
			continue
		}
		for _, c := range chain {
			r.Paths = append(r.Paths, PathRule{Path: c, Access: Exec, Why: "interpreter of " + pr.Path})
		}
	}
	w := o.Wrapper
	if w == "" {
		if w, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("landlock: find the wrapper binary: %w", err)
		}
	}
	res := runtime.New(runtime.Options{ExtraRead: p.Runtime.Read, ExtraExec: p.Runtime.Exec})
	return &Sandbox{rules: r, resolver: res, abi: abi, wrapper: w, note: o.Note, opts: o}, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Name implements guard.Sandbox.
func (s *Sandbox) Name() string { return "landlock" }

// ABI is the running kernel's Landlock ABI version (capped at MaxABI).
func (s *Sandbox) ABI() int { return s.abi }

// Rules returns the compiled policy rules (without a program's own).
func (s *Sandbox) Rules() *Rules { return s.rules }

// Limits says in one line what this backend cannot stop on this kernel
// with this policy, for `run` and the eval table (configs.Limits).
func (s *Sandbox) Limits() string {
	l := limits(s.abi, s.rules)
	if s.note != "" {
		l += "; " + s.note
	}
	return l
}

// Prepare implements guard.Sandbox: it makes cmd start through the
// launcher (package launch), which drops the server's privileges, applies
// the rules and execve()s the server. The rules for this command are the
// policy's plus the runtime grants for this command (CommandRules).
func (s *Sandbox) Prepare(cmd *exec.Cmd) error {
	if cmd.Err != nil {
		return fmt.Errorf("landlock prepare: %w", cmd.Err)
	}
	r, argv, err := s.CommandRules(context.Background(), cmd)
	if err != nil {
		return err
	}
	spec, err := launch.NewSpec(os.Geteuid(), os.Getenv, r.WriteRoots(), r.NoNetwork())
	if err != nil {
		return fmt.Errorf("landlock prepare: %w", err)
	}
	if spec.ProtectIncomplete {
		s.log(launch.RuleProtectWalk, "", launch.ProtectWalkReason())
	}
	spec.Landlock = r
	if err := s.hardLinks(&spec, r); err != nil {
		return err
	}
	cmd.Path, cmd.Args = argv[0], argv
	if err := launch.Prepare(cmd, spec, launch.Options{Self: s.wrapper}); err != nil {
		return fmt.Errorf("landlock prepare: %w", err)
	}
	return nil
}

// hardLinks finds the multiply-linked regular files under the policy's
// read and write roots (not named by the policy themselves). Under a root
// proxy they are masked in the server's mount namespace; otherwise the
// session is refused. Each is logged.
func (s *Sandbox) hardLinks(spec *launch.Spec, r *Rules) error {
	var roots []string
	for _, p := range r.Paths {
		if strings.HasPrefix(p.Why, "policy filesystem.") {
			roots = append(roots, p.Path)
		}
	}
	files, complete := launch.HardLinks(roots)
	if !complete {
		s.log("landlock.hardlink_walk_incomplete", "", fmt.Sprintf("stopped after %d entries under the policy's roots: hard links further on are not masked", launch.MaxWalk))
	}
	if len(files) == 0 {
		return nil
	}
	if spec.Namespaces {
		spec.Mask = files
		for _, f := range files {
			s.log("landlock.hardlink_masked", f, "a regular file with several hard links under a policy root: another name may be a secret outside it; masked (unreadable) in the server's mount namespace")
		}
		return nil
	}
	for _, f := range files {
		s.log("landlock.hardlink_refused", f, "a regular file with several hard links under a policy root; without a mount namespace (non-root proxy) it cannot be masked: session refused")
	}
	return fmt.Errorf("%w: %s (and %d more); remove the extra links or name the files in the policy", ErrHardLinks, files[0], len(files)-1)
}

func (s *Sandbox) log(rule, target, reason string) {
	s.opts.Audit.Log(audit.Event{
		Server: s.opts.Server, Config: s.opts.Config, Layer: "L3",
		Rule: rule, Decision: audit.Deny, Target: target, Reason: reason,
	})
}

// CommandRules returns the rules for running cmd: the policy's plus the
// runtime grants of guard/runtime for this command (the program, its
// interpreter chain, its code and the trees that code loads from), and
// the command to start in place of cmd (npx and shims resolved). The BPF
// backend takes its runtime grants from the same resolver.
func (s *Sandbox) CommandRules(ctx context.Context, cmd *exec.Cmd) (*Rules, []string, error) {
	argv := append([]string{cmd.Path}, cmd.Args[1:]...)
	if !filepath.IsAbs(cmd.Path) && len(cmd.Args) > 0 {
		argv[0] = cmd.Args[0]
	}
	rt, err := s.resolver.Resolve(ctx, runtime.Command{Argv: argv, Dir: cmd.Dir, Env: cmd.Env})
	if err != nil {
		return nil, nil, fmt.Errorf("landlock prepare: %w", err)
	}
	r := *s.rules
	r.Paths = append([]PathRule(nil), s.rules.Paths...)
	r.Paths = append(r.Paths, RuntimeRules(rt)...)
	r.Notes = append(append([]string(nil), s.rules.Notes...), rt.Notes...)
	return &r, rt.Argv, nil
}

// RuntimeRules turns runtime grants into Landlock rules: Exec (execute
// and read) on each program, Read on each tree.
func RuntimeRules(rt *runtime.Runtime) []PathRule {
	var out []PathRule
	for _, p := range rt.Exec {
		out = append(out, PathRule{Path: p, Access: Exec, Why: "runtime exec"})
	}
	for _, p := range rt.Read {
		out = append(out, PathRule{Path: p, Access: Read, Why: "runtime read"})
	}
	return out
}

// Started implements guard.Sandbox. The domain is already on the process.
func (s *Sandbox) Started(pid int) error { return nil }

// Close implements guard.Sandbox. The kernel drops the domain with the
// last process in it; nothing to release here.
func (s *Sandbox) Close() error { return nil }
