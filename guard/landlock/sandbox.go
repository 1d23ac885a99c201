package landlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/changes"
	"github.com/mcpguard/mcpguard/guard/egress"
	"github.com/mcpguard/mcpguard/guard/landlock/auditlog"
	"github.com/mcpguard/mcpguard/guard/landlock/ruleset"
	"github.com/mcpguard/mcpguard/guard/launch"
	"github.com/mcpguard/mcpguard/guard/pathrules"
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
	// Audit receives what Prepare excluded or refused (hard links) and
	// the refusals of the server's session, these bounded (Limited, with
	// a summary at Close); Server and Config label those events.
	Audit          *audit.Logger
	Server, Config string
	// Report receives the session change report (package changes);
	// nil is stderr.
	Report io.Writer
	// RuntimeCache keeps the runtime resolver's helper answers across
	// sessions (runtime.Cache); nil keeps nothing.
	RuntimeCache *runtime.Cache
	// OnDenial, when set, is called with each denial the kernel reports
	// for the server's tree while it runs (Landlock's audit records; see
	// package auditlog), which also go to Audit. Where the records cannot
	// be read, Live says why.
	OnDenial func(audit.Event)
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
	// denials logs the refusals the server provokes (the supervised write
	// roots', the kernel's records, the egress filter's): at most
	// audit.MaxPerTarget and audit.MaxPerRule, summarized at Close.
	denials *audit.Logger
	// stopWatch ends the audit record watcher; live says how denials are
	// reported while the server runs.
	stopWatch func()
	live      string
	// plan is the policy's network as the egress filter applies it; the
	// filter and its gate belong to the session Prepare started.
	plan   egress.Plan
	filter *egress.Filter
	gate   *launch.Gate
	// execConfig refuses writes to what package changes watches
	// (filesystem.protect_exec_config); before is the snapshot the
	// session change report compares with.
	execConfig bool
	before     *changes.Snapshot
	roots      []string
	// events carries the supervised write roots' refusals from stage 1.
	events, eventsW *os.File
	eventsDone      chan struct{}
	// prepared are the rules of the last Prepare (Prepared).
	prepared *Rules
	// launches are what Prepare set up outside the servers, undone by
	// Close; limiters their cgroups.
	launches []*launch.Launch
	limiters []*launch.Limiter
	// scratches are the servers' own TMPDIRs (launch.Scratch), removed
	// by Close.
	scratches []*launch.Scratch
	limits    launch.Limits
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
	lim := launch.Limits{Tasks: p.Limits.Tasks, MemoryMiB: p.Limits.MemoryMiB, CPUs: p.Limits.CPUs}
	if err := lim.Check(); err != nil {
		return nil, err
	}
	plan, err := egress.Compile(p)
	if err != nil {
		return nil, err
	}
	res := runtime.New(runtime.Options{ExtraRead: p.Runtime.Read, ExtraExec: p.Runtime.Exec, Writable: r.WriteRoots(), Cache: o.RuntimeCache})
	return &Sandbox{rules: r, resolver: res, abi: abi, wrapper: w, note: o.Note, opts: o, plan: plan, limits: lim,
		execConfig: p.Filesystem.ProtectExecConfig, denials: o.Audit.Limited(audit.MaxPerTarget, audit.MaxPerRule)}, nil
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
	l := limits(s.abi, s.rules, os.Geteuid() == 0)
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
	spec, err := launch.NewSpec(os.Geteuid(), os.Getenv, r.WriteRoots())
	if err != nil {
		return fmt.Errorf("landlock prepare: %w", err)
	}
	if spec.ProtectIncomplete {
		s.log(launch.RuleProtectWalk, "", launch.ProtectWalkReason())
	}
	s.roots = r.WriteRoots()
	s.before = changes.Take(s.roots, launch.IsProtected)
	if err := s.addScratch(cmd, &spec, r); err != nil {
		return err
	}
	spec.ExecConfig = s.execConfig
	spec.Landlock = r
	spec.Readable, spec.Reach = reachOf(r)
	if err := s.hardLinks(&spec, r); err != nil {
		return err
	}
	cmd.Path, cmd.Args = argv[0], argv
	if spec.Namespaces {
		lim, err := launch.NewLimiter(s.limits)
		if err != nil {
			return fmt.Errorf("landlock prepare: %w", err)
		}
		s.limiters = append(s.limiters, lim)
		lim.Attach(cmd, &spec)
		lim.Watch(s.breach)
		if err := s.egress(cmd, &spec, r); err != nil {
			return err
		}
		if err := s.supervise(cmd, &spec); err != nil {
			s.Close()
			return err
		}
	}
	l, err := launch.Prepare(cmd, spec, launch.Options{Self: s.wrapper})
	if err != nil {
		s.Close()
		return fmt.Errorf("landlock prepare: %w", err)
	}
	s.launches = append(s.launches, l)
	s.prepared = r
	return nil
}

// addScratch gives the server its own TMPDIR (launch.Scratch), a write
// root of its own after the change report's snapshot (it is not the
// user's), not supervised: nothing in it outlives the session, so no name
// there is one the user's tools obey.
func (s *Sandbox) addScratch(cmd *exec.Cmd, spec *launch.Spec, r *Rules) error {
	sc, err := launch.NewScratch(*spec, cmd.Env)
	if err != nil || sc == nil {
		if err != nil {
			return fmt.Errorf("landlock prepare: %w", err)
		}
		return nil
	}
	s.scratches = append(s.scratches, sc)
	r.Paths = append(r.Paths, PathRule{Path: sc.Dir, Access: Write, Why: "server scratch (TMPDIR)"})
	spec.Writable = append(spec.Writable, sc.Dir)
	cmd.Env = sc.Env(cmd.Env)
	return nil
}

// reachOf splits r's grants other than the baseline and the write roots
// into data (the policy's read roots) and runtime (programs, interpreters,
// the resolver's trees): what the server's user must reach (launch.View).
func reachOf(r *Rules) (data, runtime []string) {
	for _, p := range r.Paths {
		switch {
		case p.Access == Write || p.Access == Device || p.Why == "runtime":
		case strings.HasPrefix(p.Why, "policy filesystem."):
			data = append(data, p.Path)
		default:
			runtime = append(runtime, p.Path)
		}
	}
	return data, runtime
}

// egress puts the server's network behind the egress filter: the server's
// namespace has only the filter's listeners and the server's own sockets,
// so Landlock's port rules add nothing there (Rules.Egress leaves the
// network unhandled) and UDP sockets are fine; the filter judges
// addresses and names.
func (s *Sandbox) egress(cmd *exec.Cmd, spec *launch.Spec, r *Rules) error {
	r.AnyConnect, r.ConnectTCP, r.BindTCP, r.AllowUDP, r.Egress = false, nil, nil, true, true
	r.Notes = slices.DeleteFunc(r.Notes, func(n string) bool { return strings.HasPrefix(n, "network.allow") })
	if s.plan.Empty() {
		return nil
	}
	f := egress.New(s.plan, egress.Options{Audit: s.denials, Server: s.opts.Server, Config: s.opts.Config, OnDenial: s.opts.OnDenial})
	gate, err := launch.AttachEgress(cmd, spec)
	if err != nil {
		return fmt.Errorf("landlock prepare: %w", err)
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, f.Env()...)
	s.filter, s.gate = f, gate
	return nil
}

// supervise serves the directory write roots through the supervised file
// system (package namefs), which refuses protected names (Landlock cannot),
// and logs what it refused.
func (s *Sandbox) supervise(cmd *exec.Cmd, spec *launch.Spec) error {
	var dirs []string
	for _, root := range spec.Writable {
		if slices.ContainsFunc(s.scratches, func(sc *launch.Scratch) bool { return sc.Dir == root }) {
			continue
		}
		if fi, err := os.Stat(root); err == nil && fi.IsDir() {
			dirs = append(dirs, filepath.Clean(root))
		}
	}
	// A write root inside another is served by the outer one's mount: a
	// second supervised mount below the first refused every name made
	// in it (policy init writes ${WS} and ${WS}/state: issue 33's matrix).
	for _, d := range dirs {
		if !slices.ContainsFunc(dirs, func(o string) bool { return o != d && pathrules.Host.Within(d, o) }) && !slices.Contains(spec.Supervise, d) {
			spec.Supervise = append(spec.Supervise, d)
		}
	}
	if len(spec.Supervise) == 0 {
		return nil
	}
	r, w, err := launch.AttachEvents(cmd, spec)
	if err != nil {
		return fmt.Errorf("landlock prepare: %w", err)
	}
	s.events, s.eventsW = r, w
	s.eventsDone = make(chan struct{})
	go s.readEvents(r)
	return nil
}

// readEvents logs stage 1's refusals until it is gone, and reports each
// to OnDenial as it comes (like the kernel's records: the supervised write
// root is the Landlock backend's name hook).
func (s *Sandbox) readEvents(r io.Reader) {
	defer close(s.eventsDone)
	dec := json.NewDecoder(r)
	for {
		var ev launch.Event
		if err := dec.Decode(&ev); err != nil {
			return
		}
		e := audit.Event{
			Server: s.opts.Server, Config: s.opts.Config, Layer: "L3",
			Rule: ev.Rule, Decision: audit.Deny, Target: ev.Target,
			Reason: refusalReason(ev),
		}
		s.denials.Log(e)
		if s.opts.OnDenial != nil {
			s.opts.OnDenial(e)
		}
	}
}

// refusalReason says why stage 1 refused ev.
func refusalReason(ev launch.Event) string {
	if ev.Rule == launch.RuleExecutable {
		return ev.Op + " refused: it would leave a program in a write root, which the user's tools would run"
	}
	return ev.Op + " of a protected name refused: the user's tools run or obey what it holds"
}

// Prepared returns the rules the last Prepare applied (the policy's, the
// baseline and the command's runtime), nil before any.
func (s *Sandbox) Prepared() *Rules { return s.prepared }

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

// breach reports a breached limit: the Limiter has ended the session.
func (s *Sandbox) breach(rule, reason string) {
	fmt.Fprintf(os.Stderr, "mcpguard: %s\n", reason)
	s.log(rule, "", reason)
}

// EndReason says why the session was ended by the guard rather than by
// the server ("" when it was not): the error requests in flight get.
func (s *Sandbox) EndReason() string {
	for _, l := range s.limiters {
		if b := l.Breach(); b != "" {
			return b
		}
	}
	return ""
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

// Started implements guard.Sandbox. The domain is already on the process;
// with OnDenial set, the kernel's records of its denials are watched
// (from before the server starts); the egress filter joins its network
// namespace (pid is the launcher's stage 1) and only then lets it start
// the server.
func (s *Sandbox) Started(pid int) error {
	if s.eventsW != nil {
		s.eventsW.Close() // stage 1 holds its own copy
		s.eventsW = nil
	}
	if s.opts.OnDenial != nil {
		s.watch(pid)
	}
	if s.gate == nil {
		return nil
	}
	err := s.gate.OpenAfter(func() error { return s.filter.Start(pid) })
	s.gate = nil
	if err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	return nil
}

// watch reports the kernel's records of the tree's denials to OnDenial
// (and Audit) until Close.
func (s *Sandbox) watch(pid int) {
	stop, err := auditlog.Watch(pid, func(d auditlog.Denial) {
		e := denialEvent(d)
		e.Server, e.Config = s.opts.Server, s.opts.Config
		s.denials.Log(e)
		s.opts.OnDenial(e)
	})
	if err != nil {
		s.live = err.Error()
		return
	}
	s.stopWatch, s.live = stop, ""
}

// Live says how this sandbox's denials reach the guard while the server
// runs: "" when the kernel's audit records do, otherwise why not.
func (s *Sandbox) Live() string { return s.live }

// Close implements guard.Sandbox: the egress filter and the record
// watcher stop; what the launcher set up outside the server (its cgroup,
// ACL entries, stub trees) is undone. The kernel drops the domain with
// the last process in it.
func (s *Sandbox) Close() error {
	if s.eventsW != nil {
		s.eventsW.Close()
		s.eventsW = nil
	}
	if s.events != nil {
		// Stage 1 is gone (Close comes after the server exited): its
		// last refusals are in the pipe, then EOF.
		select {
		case <-s.eventsDone:
		case <-time.After(2 * time.Second):
		}
		s.events.Close()
		s.events = nil
	}
	if s.gate != nil {
		s.gate.Close()
		s.gate = nil
	}
	if s.filter != nil {
		s.filter.Close()
		s.filter = nil
	}
	if s.stopWatch != nil {
		s.stopWatch()
		s.stopWatch = nil
	}
	s.denials.Summarize()
	if s.before != nil {
		w := s.opts.Report
		if w == nil {
			w = os.Stderr
		}
		changes.Report(w, s.opts.Audit, s.opts.Server, s.opts.Config, changes.Compare(s.before, changes.Take(s.roots, launch.IsProtected)))
		s.before = nil
	}
	var errs []error
	for _, l := range s.limiters {
		errs = append(errs, l.Close())
	}
	for _, l := range s.launches {
		errs = append(errs, l.Close())
	}
	for _, sc := range s.scratches {
		errs = append(errs, sc.Close())
	}
	s.launches, s.limiters, s.scratches = nil, nil, nil
	return errors.Join(errs...)
}

// denialEvent is an audit event for one denial the kernel reported, with
// the rule names the BPF backend's events use.
func denialEvent(d auditlog.Denial) audit.Event {
	e := audit.Event{Layer: "L3", Decision: audit.Deny, PID: d.PID, Target: d.Target()}
	switch d.Kind() {
	case "exec":
		e.Rule = "exec.denied"
	case "connect":
		e.Rule = "net.connect_denied"
	case "bind":
		e.Rule = "net.bind_denied"
	case "write":
		e.Rule = "file.write_denied"
	default:
		e.Rule = "file.open_denied"
	}
	who := d.Comm
	if who == "" {
		who = "the server"
	}
	e.Reason = fmt.Sprintf("%s (pid %d) was refused %s on %s (Landlock's audit record, domain %s)", who, d.PID, strings.Join(d.Blockers, ","), e.Target, d.Domain)
	return e
}
