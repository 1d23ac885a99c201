//go:build linux

// Package sandbox is the controller of layer L3's eBPF backend: it checks
// that the kernel enforces BPF LSM, attaches the programs of package bpf
// once (pinned under /sys/fs/bpf/mcpguard), and for each guarded server
// compiles its policy into map entries, starts it straight into a
// dedicated cgroup v2 that the programs know, turns the kernel's denials
// into audit events, and kills the whole process tree at the end.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/mcpguard/mcpguard/bpf"
	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/changes"
	"github.com/mcpguard/mcpguard/guard/egress"
	"github.com/mcpguard/mcpguard/guard/launch"
	"github.com/mcpguard/mcpguard/guard/policy"
	"github.com/mcpguard/mcpguard/guard/runtime"
	"github.com/mcpguard/mcpguard/guard/validate"
)

// DefaultPinRoot is where the programs' links and maps are pinned.
const DefaultPinRoot = "/sys/fs/bpf/mcpguard"

// Options configure a session.
type Options struct {
	// PinRoot is the bpffs directory for pins (DefaultPinRoot if empty).
	PinRoot string
	// CgroupParent is the cgroup v2 directory under which each session's
	// cgroup is made (<cgroup2 mount>/mcpguard if empty).
	CgroupParent string
	// Server and Config label audit events.
	Server, Config string
	// Audit receives one event per kernel denial, at most
	// audit.MaxPerTarget and audit.MaxPerRule (Limited) with a summary of
	// the rest at Close.
	Audit *audit.Logger
	// OnDenial, when set, is called with each kernel denial as it is read
	// from the ring buffer (after Audit), while the server runs.
	OnDenial func(audit.Event)
	// Resolver resolves host names in network rules (net.DefaultResolver
	// if nil).
	Resolver validate.Resolver
	// ReapGrace is how old a session cgroup whose proxy is gone must be
	// before Prepare reaps it (10 s if zero; see Reap).
	ReapGrace time.Duration
	// Self is the launcher binary (os.Executable() if empty); it must link
	// package launch.
	Self string
	// Report receives the session change report (package changes); nil
	// is stderr.
	Report io.Writer
	// RuntimeCache keeps the runtime resolver's helper answers across
	// sessions (runtime.Cache); nil keeps nothing.
	RuntimeCache *runtime.Cache
}

// Session confines one server process tree. It implements guard.Sandbox.
type Session struct {
	opts  Options
	pol   *policy.Policy
	objs  *bpf.Objects
	rules Rules
	// resolver gives the server's runtime grants (shared with Landlock);
	// runtime are the paths it granted for the prepared command.
	resolver *runtime.Resolver
	runtime  []string
	// launch is what the launcher set up outside the server; limiter
	// watches the session cgroup's limits.
	launch  *launch.Launch
	limiter *launch.Limiter
	cg      *cgroup
	id      uint64 // policy id: the session cgroup's id
	rb      *ebpf.Map
	rd      *ringbuf.Reader
	done    chan struct{}
	mu      sync.Mutex
	keys    []bpf.InodeKey // fs_rules entries written
	execs   []bpf.InodeKey
	nets    []bpf.NetKey
	execCfg []bpf.ExecKey
	denied  int
	first   []audit.Event // the first denials, for the early-exit report
	closed  bool
	// filter is the server's one way out of its network namespace (nil
	// when the policy grants no network); gate holds stage 1 until the
	// filter is set up.
	filter *egress.Filter
	gate   *launch.Gate
	// before is the snapshot the session change report compares with.
	before *changes.Snapshot
	// scratch is the server's own TMPDIR, removed by Close.
	scratch *launch.Scratch
	// denials logs the kernel's and the egress filter's refusals, bounded
	// (Options.Audit).
	denials *audit.Logger
}

var _ guard.Sandbox = (*Session)(nil)

// New attaches the programs if they are not yet (after a preflight) and
// compiles p. It fails, with an error wrapping guard.ErrKernelRefused when
// the kernel refused, if enforcement cannot be had: the caller must not
// start the server then.
func New(ctx context.Context, p *policy.Policy, o Options) (*Session, error) {
	if o.PinRoot == "" {
		o.PinRoot = DefaultPinRoot
	}
	plan, err := egress.Compile(p)
	if err != nil {
		return nil, fmt.Errorf("compile policy: %w", err)
	}
	// The server's network is its own namespace, out only through the
	// egress filter: the kernel rules admit the filter's listeners there
	// (InsideNet), not the policy's destinations, which the filter dials.
	local := *p
	local.Network.Allow = nil
	rules, err := Compile(ctx, &local, o.Resolver)
	if err != nil {
		return nil, fmt.Errorf("compile policy: %w", err)
	}
	var filter *egress.Filter
	denials := o.Audit.Limited(audit.MaxPerTarget, audit.MaxPerRule)
	rules.Net = InsideNet(egress.Loopback())
	if !plan.Empty() {
		filter = egress.New(plan, egress.Options{Audit: denials, Server: o.Server, Config: o.Config, OnDenial: o.OnDenial})
		rules.Net = InsideNet(plan.InsideRules(filter.DNSAddrs()))
	}
	objs, err := open(o.PinRoot)
	if err != nil {
		return nil, err
	}
	s := &Session{opts: o, pol: p, objs: objs, rules: rules, filter: filter, denials: denials}
	s.resolver = runtime.New(runtime.Options{ExtraRead: p.Runtime.Read, ExtraExec: p.Runtime.Exec, Writable: s.writeRoots(), Cache: o.RuntimeCache})
	return s, nil
}

// InsideNet turns the egress filter's inside destinations into net rules.
func InsideNet(in []egress.InsideRule) []NetRule {
	out := make([]NetRule, 0, len(in))
	for _, r := range in {
		out = append(out, NetRule{Prefix: r.Prefix, Port: r.Port})
	}
	return out
}

// open attaches (after a preflight) or opens the pinned programs' maps.
func open(root string) (*bpf.Objects, error) {
	pinned := filepath.Join(root, bpf.Version(), "links", "file_guard")
	if _, err := syscallStat(pinned); err != nil {
		// Nothing attached yet: find out whether the kernel will have it
		// before loading the real programs, for a clear error.
		if err := Preflight(); err != nil {
			return nil, err
		}
	}
	objs, err := bpf.Attach(root)
	if err != nil {
		if errors.Is(err, bpf.ErrNotBPFFS) {
			return nil, fmt.Errorf("pinned maps unavailable: %w", err)
		}
		return nil, refused("attach programs", err)
	}
	return objs, nil
}

// netnsOf returns the inode number of /proc/PROC/ns/net, the network
// namespace of that process ("thread-self" or a pid: its main thread),
// as the kernel's ns.inum.
func netnsOf(proc string) (uint32, error) {
	st, err := syscallStat("/proc/" + proc + "/ns/net")
	if err != nil {
		return 0, fmt.Errorf("network namespace of %s: %w", proc, err)
	}
	return uint32(st.Ino), nil
}

func syscallStat(path string) (syscall.Stat_t, error) {
	var st syscall.Stat_t
	err := syscall.Stat(path, &st)
	return st, err
}

// Name implements guard.Sandbox.
func (s *Session) Name() string { return "ebpf" }

// PolicyID is the session's policy id (its cgroup's id); 0 before Prepare.
func (s *Session) PolicyID() uint64 { return s.id }

// Prepare creates the session cgroup, writes the policy into the maps
// under the cgroup's id, and makes cmd start inside that cgroup
// (clone3 with CLONE_INTO_CGROUP), so the server is confined from its
// first instruction.
func (s *Session) Prepare(cmd *exec.Cmd) error {
	parent := s.opts.CgroupParent
	if parent == "" {
		mnt, err := cgroup2Mount()
		if err != nil {
			return err
		}
		parent = filepath.Join(mnt, "mcpguard")
	}
	spec, err := launch.NewSpec(os.Geteuid(), os.Getenv, s.writeRoots())
	if err != nil {
		return fmt.Errorf("ebpf prepare: %w", err)
	}
	if spec.ProtectIncomplete {
		s.opts.Audit.Log(audit.Event{Server: s.opts.Server, Config: s.opts.Config, Layer: "L3",
			Rule: RuleProtectWalk, Decision: audit.Deny, Reason: launch.ProtectWalkReason()})
	}
	s.before = changes.Take(s.writeRoots(), launch.IsProtected)
	self := s.opts.Self
	if self == "" {
		if self, err = os.Executable(); err != nil {
			return fmt.Errorf("ebpf prepare: find own binary: %w", err)
		}
	}
	// Sessions of proxies that died before closing them go first: the
	// cgroup map is small.
	Reap(s.objs, parent, s.opts.ReapGrace)
	cg, err := newCgroup(parent)
	if err != nil {
		return err
	}
	if err := lockSession(cg); err != nil {
		cg.remove(0)
		return fmt.Errorf("lock session cgroup: %w", err)
	}
	s.cg, s.id = cg, cg.id
	if spec.Namespaces {
		lim, err := launch.LimitCgroup(cg.dir, launch.Limits{Tasks: s.pol.Limits.Tasks, MemoryMiB: s.pol.Limits.MemoryMiB, CPUs: s.pol.Limits.CPUs})
		if err != nil {
			s.Close()
			return fmt.Errorf("ebpf prepare: %w", err)
		}
		s.limiter = lim
		lim.Watch(s.breach)
	}
	if err := s.addScratch(cmd, &spec); err != nil {
		s.Close()
		return fmt.Errorf("ebpf prepare: %w", err)
	}
	if err := s.load(cmd, self); err != nil {
		s.Close()
		return err
	}
	if s.filter != nil && spec.Namespaces {
		if s.gate, err = launch.AttachEgress(cmd, &spec); err != nil {
			s.Close()
			return fmt.Errorf("ebpf prepare: %w", err)
		}
		if cmd.Env == nil {
			cmd.Env = os.Environ()
		}
		cmd.Env = append(cmd.Env, s.filter.Env()...)
	}
	spec.Readable, spec.Reach = s.reachOf()
	l, err := launch.Prepare(cmd, spec, launch.Options{Self: self})
	if err != nil {
		s.Close()
		return fmt.Errorf("ebpf prepare: %w", err)
	}
	s.launch = l
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = cg.fd
	return nil
}

// addScratch gives the server its own TMPDIR (launch.Scratch), a write
// root of its session, after the change report's snapshot: it is not the
// user's.
func (s *Session) addScratch(cmd *exec.Cmd, spec *launch.Spec) error {
	sc, err := launch.NewScratch(*spec, cmd.Env)
	if err != nil || sc == nil {
		return err
	}
	s.scratch = sc
	s.rules.Files = append(s.rules.Files, FileRule{Path: sc.Dir, Access: bpf.AccRead | bpf.AccWrite})
	spec.Writable = append(spec.Writable, sc.Dir)
	cmd.Env = sc.Env(cmd.Env)
	return nil
}

// reachOf splits the session's grants other than the baseline and the
// write roots into data (the policy's read roots) and runtime (exec.allow
// and the resolver's trees and programs): what the server's user must
// reach (launch.View).
func (s *Session) reachOf() (data, runtime []string) {
	for _, f := range s.rules.Files {
		if f.Access == bpf.AccRead {
			data = append(data, f.Path)
		}
	}
	runtime = append(append(runtime, s.rules.Exec...), s.runtime...)
	return data, runtime
}

// writeRoots are the policy's write grants, where the launcher looks for
// entries to protect.
func (s *Session) writeRoots() []string {
	var out []string
	for _, f := range s.rules.Files {
		if f.Access&bpf.AccWrite != 0 {
			out = append(out, f.Path)
		}
	}
	return out
}

// load writes the session's map entries and starts reading its denials.
// self is the launcher binary (this one), which runs inside the session
// before it becomes the server: executable and readable, like the server.
func (s *Session) load(cmd *exec.Cmd, self string) error {
	files := append(Baseline(), s.rules.Files...)
	execs := s.rules.Exec
	if self != "" {
		files = append(files, FileRule{Path: self, Access: bpf.AccRead})
		execs = append(execs, self)
	}
	if cmd != nil {
		argv := append([]string{cmd.Path}, cmd.Args[1:]...)
		if !filepath.IsAbs(cmd.Path) && len(cmd.Args) > 0 {
			argv[0] = cmd.Args[0]
		}
		f, e, run, err := ServerFiles(context.Background(), s.resolver, runtime.Command{Argv: argv, Dir: cmd.Dir, Env: cmd.Env})
		if err != nil {
			return fmt.Errorf("ebpf prepare: %w", err)
		}
		files = append(files, f...)
		execs = append(execs, e...)
		for _, r := range f {
			s.runtime = append(s.runtime, r.Path)
		}
		cmd.Path, cmd.Args = run[0], run
	}
	acc := map[bpf.InodeKey]uint32{}
	for _, f := range files {
		k, err := InodeKeyOf(s.id, f.Path)
		if err != nil {
			continue // a root that does not exist admits nothing
		}
		acc[k] |= f.Access
	}
	for k, a := range acc {
		if err := s.objs.FSRules.Put(k, a); err != nil {
			return fmt.Errorf("write fs rule: %w", err)
		}
		s.keys = append(s.keys, k)
	}
	loaders := loaderKeys(s.id, execs)
	for _, p := range execs {
		k, err := InodeKeyOf(s.id, p)
		if err != nil || loaders[k] {
			continue
		}
		if err := s.objs.ExecRules.Put(k, uint32(1)); err != nil {
			return fmt.Errorf("write exec rule: %w", err)
		}
		s.execs = append(s.execs, k)
	}
	for _, n := range s.rules.Net {
		k := NetKey(s.id, n.Prefix, n.Port)
		if err := s.objs.NetRules.Put(k, uint32(1)); err != nil {
			return fmt.Errorf("write net rule: %w", err)
		}
		s.nets = append(s.nets, k)
	}
	for k, v := range Protected() {
		if err := s.objs.Protected.Put(k, v); err != nil {
			return fmt.Errorf("write protected name: %w", err)
		}
	}
	if s.pol.Filesystem.ProtectExecConfig {
		for k, v := range ExecConfig(s.id) {
			if err := s.objs.ExecConfig.Put(k, v); err != nil {
				return fmt.Errorf("write exec config name: %w", err)
			}
			s.execCfg = append(s.execCfg, k)
		}
	}
	rb, err := s.objs.NewSessionEvents()
	if err != nil {
		return err
	}
	s.rb = rb
	if err := s.objs.Events.Put(s.id, rb); err != nil {
		return fmt.Errorf("register ring buffer: %w", err)
	}
	rd, err := ringbuf.NewReader(rb)
	if err != nil {
		return fmt.Errorf("ring buffer reader: %w", err)
	}
	s.rd = rd
	s.done = make(chan struct{})
	go s.read()
	if err := s.registerOutside(); err != nil {
		return err
	}
	// Last: from here on, tasks in the cgroup are confined.
	if err := s.objs.Cgroups.Put(s.id, s.id); err != nil {
		return fmt.Errorf("register cgroup: %w", err)
	}
	return nil
}

// registerOutside writes the session's session_netns entry with the
// guard's own namespace as outside.
func (s *Session) registerOutside() error {
	// The net rules name the server's namespace's addresses; in the
	// guard's own they would be the host's services. The calling
	// thread's, not /proc/self's: that is the main thread's, which the
	// egress filter's locked thread may be, joined to an earlier
	// server's namespace for good (a goroutine on any other thread is
	// in the guard's).
	outside, err := netnsOf("thread-self")
	if err != nil {
		return err
	}
	if err := s.objs.SessionNetns.Put(s.id, bpf.NetnsVal{Outside: outside}); err != nil {
		return fmt.Errorf("register network namespace: %w", err)
	}
	return nil
}

// read turns ring buffer records into audit events until the reader is
// flushed or closed.
func (s *Session) read() {
	defer close(s.done)
	for {
		rec, err := s.rd.Read()
		if err != nil {
			return
		}
		ev, err := decodeEvent(rec.RawSample)
		if err != nil {
			continue
		}
		e := auditEvent(ev)
		e.Server, e.Config = s.opts.Server, s.opts.Config
		s.mu.Lock()
		s.denied++
		if len(s.first) < maxFirst {
			s.first = append(s.first, e)
		}
		s.mu.Unlock()
		s.denials.Log(e)
		if s.opts.OnDenial != nil {
			s.opts.OnDenial(e)
		}
	}
}

// maxFirst is how many denials Denied keeps.
const maxFirst = 16

// Denied returns the first kernel denials of the session (at most 16), for
// the report `run` prints when the server exits early.
func (s *Session) Denied() []audit.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]audit.Event(nil), s.first...)
}

// Denials is the number of kernel denials seen so far.
func (s *Session) Denials() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.denied
}

// breach reports a breached limit: the Limiter has ended the session.
func (s *Session) breach(rule, reason string) {
	fmt.Fprintf(os.Stderr, "mcpguard: %s\n", reason)
	s.opts.Audit.Log(audit.Event{Server: s.opts.Server, Config: s.opts.Config, Layer: "L3",
		Rule: rule, Decision: audit.Deny, Reason: reason})
}

// EndReason says why the session was ended by the guard rather than by
// the server ("" when it was not): the error requests in flight get.
func (s *Session) EndReason() string { return s.limiter.Breach() }

// Started implements guard.Sandbox: the server's own pid is tracked too, so
// it stays confined wherever it moves.
func (s *Session) Started(pid int) error {
	if s.id == 0 {
		return errors.New("started before prepare")
	}
	if err := s.objs.Tasks.Put(uint32(pid), s.id); err != nil {
		return fmt.Errorf("track server pid: %w", err)
	}
	// From now on the net rules hold only in the namespace pid started in
	// (the launcher's own). A task joined in the guard's namespace keeps
	// none: the entry's outside is that namespace. A pid already gone
	// leaves the entry as it was: no namespace but the guard's is
	// excluded then, which still keeps the host's services out.
	if inside, err := netnsOf(strconv.Itoa(pid)); err == nil {
		var ns bpf.NetnsVal
		if err := s.objs.SessionNetns.Lookup(s.id, &ns); err != nil {
			return fmt.Errorf("read network namespace: %w", err)
		}
		if inside != ns.Outside {
			ns.Inside = inside
			if err := s.objs.SessionNetns.Put(s.id, ns); err != nil {
				return fmt.Errorf("register network namespace: %w", err)
			}
		}
	}
	if s.gate == nil {
		return nil
	}
	// pid is the launcher's stage 1: the filter joins its network
	// namespace, and only then does it start the server.
	err := s.gate.OpenAfter(func() error { return s.filter.Start(pid) })
	s.gate = nil
	if err != nil {
		return fmt.Errorf("ebpf: %w", err)
	}
	return nil
}

// Release stops tracking pid by tgid (a process that joined the session
// through Started and leaves it alive, such as a benchmark guarding
// itself for a while). Its children stay guarded.
func (s *Session) Release(pid int) error {
	if err := s.objs.Tasks.Delete(uint32(pid)); err != nil {
		return fmt.Errorf("release pid %d: %w", pid, err)
	}
	return nil
}

// Close kills every process of the session (those in its cgroup and those
// tracked by tgid, such as a daemon that double-forked away), waits for
// them, delivers the last denials, and removes the session's map entries
// and cgroup. The programs stay attached for other sessions.
func (s *Session) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	errs = append(errs, s.limiter.Close())
	if s.gate != nil {
		s.gate.Close()
	}
	if s.filter != nil {
		s.filter.Close()
	}
	defer s.report()
	if s.cg != nil {
		deadline := time.Now().Add(5 * time.Second)
		for {
			s.cg.kill()
			left := s.killTracked()
			if (len(s.cg.pids()) == 0 && left == 0) || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if s.rd != nil {
		// Flush hands over what is pending, then ends the read loop.
		if err := s.rd.Flush(); err != nil {
			s.rd.Close()
		}
		<-s.done
		errs = append(errs, s.rd.Close())
	}
	s.denials.Summarize()
	if s.id != 0 {
		s.objs.Cgroups.Delete(s.id)
		s.objs.Events.Delete(s.id)
		s.objs.SessionNetns.Delete(s.id)
		s.forgetTasks()
	}
	for _, k := range s.keys {
		s.objs.FSRules.Delete(k)
	}
	for _, k := range s.execs {
		s.objs.ExecRules.Delete(k)
	}
	for _, k := range s.nets {
		s.objs.NetRules.Delete(k)
	}
	for _, k := range s.execCfg {
		s.objs.ExecConfig.Delete(k)
	}
	if s.rb != nil {
		errs = append(errs, s.rb.Close())
	}
	if s.cg != nil {
		errs = append(errs, s.cg.remove(2*time.Second))
	}
	errs = append(errs, s.launch.Close())
	errs = append(errs, s.scratch.Close())
	errs = append(errs, s.objs.Close())
	return errors.Join(errs...)
}

// report writes the session change report, once every process of the
// session is gone.
func (s *Session) report() {
	if s.before == nil {
		return
	}
	w := s.opts.Report
	if w == nil {
		w = os.Stderr
	}
	changes.Report(w, s.opts.Audit, s.opts.Server, s.opts.Config, changes.Compare(s.before, changes.Take(s.writeRoots(), launch.IsProtected)))
	s.before = nil
}

// killTracked SIGKILLs every tracked tgid of this session that is still
// alive and returns how many there were.
func (s *Session) killTracked() int {
	var (
		tgid uint32
		id   uint64
		n    int
	)
	it := s.objs.Tasks.Iterate()
	for it.Next(&tgid, &id) {
		if id != s.id {
			continue
		}
		if err := syscall.Kill(int(tgid), syscall.SIGKILL); err == nil {
			n++
		} else {
			s.objs.Tasks.Delete(tgid) // gone without an exit we saw
		}
	}
	return n
}

func (s *Session) forgetTasks() {
	var (
		tgid uint32
		id   uint64
		dead []uint32
	)
	it := s.objs.Tasks.Iterate()
	for it.Next(&tgid, &id) {
		if id == s.id {
			dead = append(dead, tgid)
		}
	}
	for _, t := range dead {
		s.objs.Tasks.Delete(t)
	}
}

// loaderKeys are the inodes of the ELF interpreters (the dynamic loader)
// of execs, which get no exec rule: the kernel maps a program's loader
// with no exec check of its own (bprm_check_security runs for the program
// only; the loader's open is file_open's, a read), so every listed program
// still starts, while `ld.so PROGRAM`, the loader run as a program, is
// refused: it would map a readable PROGRAM that the list does not name
// with no hook of ours seeing it (red team K01).
func loaderKeys(id uint64, execs []string) map[bpf.InodeKey]bool {
	out := map[bpf.InodeKey]bool{}
	for _, p := range execs {
		interp, err := runtime.ELFInterpreter(p)
		if err != nil || interp == "" {
			continue
		}
		if k, err := InodeKeyOf(id, interp); err == nil {
			out[k] = true
		}
	}
	return out
}
