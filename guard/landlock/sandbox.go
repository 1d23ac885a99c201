package landlock

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/landlock/ruleset"
	"github.com/mcpguard/mcpguard/guard/launch"
	"github.com/mcpguard/mcpguard/guard/policy"
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
	rules   *Rules
	abi     int
	wrapper string
	note    string
	opts    Options
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
		chain, err := interpreters(pr.Path, os.Getenv("PATH"))
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
	return &Sandbox{rules: r, abi: abi, wrapper: w, note: o.Note, opts: o}, nil
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
// policy's plus the server program and its interpreters (executable) and
// its code directory (readable, see codeFile).
func (s *Sandbox) Prepare(cmd *exec.Cmd) error {
	if cmd.Err != nil {
		return fmt.Errorf("landlock prepare: %w", cmd.Err)
	}
	r, prog, err := s.forCommand(cmd)
	if err != nil {
		return err
	}
	spec, err := launch.NewSpec(os.Geteuid(), os.Getenv, r.WriteRoots(), r.NoNetwork())
	if err != nil {
		return fmt.Errorf("landlock prepare: %w", err)
	}
	spec.Landlock = r
	if err := s.hardLinks(&spec, r); err != nil {
		return err
	}
	cmd.Path = prog
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

// forCommand returns the rules for running cmd and its program's absolute path.
func (s *Sandbox) forCommand(cmd *exec.Cmd) (*Rules, string, error) {
	prog := cmd.Path
	if !filepath.IsAbs(prog) {
		base := cmd.Dir
		if base == "" {
			wd, err := os.Getwd()
			if err != nil {
				return nil, "", fmt.Errorf("landlock prepare: %w", err)
			}
			base = wd
		}
		prog = filepath.Join(base, prog)
	}
	r := *s.rules
	r.Paths = append([]PathRule(nil), s.rules.Paths...)
	r.Paths = append(r.Paths, PathRule{Path: prog, Access: Exec, Why: "server program"})
	chain, err := interpreters(prog, pathEnv(cmd))
	if err != nil {
		return nil, "", fmt.Errorf("landlock prepare: %w", err)
	}
	for _, c := range chain {
		r.Paths = append(r.Paths, PathRule{Path: c, Access: Exec, Why: "interpreter of the server program"})
	}
	if code := codeFile(prog, cmd.Args, cmd.Dir); code != "" {
		home := envValue(cmd, "HOME")
		for _, d := range []string{filepath.Dir(code), filepath.Dir(filepath.Dir(code))} {
			if d == "/" || (home != "" && within(home, d)) {
				r.Notes = append(r.Notes, fmt.Sprintf("server code directory %s not granted: it holds $HOME", d))
				break
			}
			r.Paths = append(r.Paths, PathRule{Path: d, Access: Read, Why: "server code directory"})
		}
	}
	return &r, prog, nil
}

// interpreterName matches the programs whose first operand is the code
// they run.
var interpreterName = regexp.MustCompile(`^(python[0-9.]*|pypy[0-9.]*|node|nodejs|deno|bun|ruby|perl|php|bash|sh|dash)$`)

// codeFile is the server's own code when it is not the program itself: the
// script an interpreter runs (`python3 -u server.py`, `node server.js`), or
// the program when it is a #! script. Its directory and that directory's
// parent become readable: sibling modules, a shared ../lib, a package's
// node_modules one level up.
func codeFile(prog string, args []string, dir string) string {
	if isScript(prog) {
		return prog
	}
	if !interpreterName.MatchString(filepath.Base(prog)) {
		return ""
	}
	return scriptOperand(args, dir)
}

func isScript(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, 2)
	n, _ := f.Read(b)
	return n == 2 && string(b) == "#!"
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// pathEnv is the PATH the server will see, for `#!/usr/bin/env node`.
func pathEnv(cmd *exec.Cmd) string { return envValue(cmd, "PATH") }

// envValue is the value of name in the server's environment (the last
// one wins, as in exec.Cmd).
func envValue(cmd *exec.Cmd, name string) string {
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	val := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			val = v
		}
	}
	return val
}

// scriptOperand returns the first non-flag argument after argv[0] when it
// names a regular file: the script an interpreter runs.
func scriptOperand(args []string, dir string) string {
	for _, a := range args[min(1, len(args)):] {
		if strings.HasPrefix(a, "-") {
			continue
		}
		if !filepath.IsAbs(a) {
			if dir == "" {
				var err error
				if dir, err = os.Getwd(); err != nil {
					return ""
				}
			}
			a = filepath.Join(dir, a)
		}
		if fi, err := os.Stat(a); err == nil && fi.Mode().IsRegular() {
			return a
		}
		return ""
	}
	return ""
}

// interpreters returns what the kernel also executes to start path: its
// ELF interpreter (the dynamic loader), or for a #! script the named
// interpreter and that one's own chain. The kernel opens each with the
// execute right, so each needs an Exec rule.
func interpreters(path, pathEnv string) ([]string, error) {
	return interpretersDepth(path, pathEnv, 0)
}

func interpretersDepth(path, pathEnv string, depth int) ([]string, error) {
	// The kernel gives up after a few levels of binfmt recursion too.
	if depth > 4 {
		return nil, fmt.Errorf("interpreter chain of %s too deep", path)
	}
	next, err := interpreterOf(path, pathEnv)
	if err != nil {
		return nil, fmt.Errorf("interpreter of %s: %w", path, err)
	}
	var out []string
	for _, n := range next {
		out = append(out, n)
		more, err := interpretersDepth(n, pathEnv, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}

// interpreterOf returns the direct interpreter(s) of path: nothing for a
// static binary, the PT_INTERP loader for a dynamic one, the #! program
// (and, for /usr/bin/env NAME, NAME looked up in pathEnv) for a script.
func interpreterOf(path, pathEnv string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := f.Read(head)
	head = head[:n]
	switch {
	case bytes.HasPrefix(head, []byte("\x7fELF")):
		ef, err := elf.NewFile(f)
		if err != nil {
			return nil, err
		}
		for _, p := range ef.Progs {
			if p.Type != elf.PT_INTERP {
				continue
			}
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return nil, fmt.Errorf("read PT_INTERP: %w", err)
			}
			return []string{string(bytes.TrimRight(b, "\x00"))}, nil
		}
		return nil, nil
	case bytes.HasPrefix(head, []byte("#!")):
		line, _, _ := bufio.NewReader(bytes.NewReader(head[2:])).ReadLine()
		fields := strings.Fields(string(line))
		if len(fields) == 0 {
			return nil, fmt.Errorf("empty #! line")
		}
		out := []string{fields[0]}
		if filepath.Base(fields[0]) == "env" {
			for _, f := range fields[1:] {
				if strings.HasPrefix(f, "-") || strings.Contains(f, "=") {
					continue
				}
				found, err := lookPath(f, pathEnv)
				if err != nil {
					return nil, err
				}
				// env runs NAME from PATH: NAME executes too.
				out = append(out, found)
				break
			}
		}
		return out, nil
	}
	return nil, nil
}

// lookPath finds name in the given PATH, the one the server will have.
func lookPath(name, pathEnv string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH %q", name, pathEnv)
}

// Started implements guard.Sandbox. The domain is already on the process.
func (s *Sandbox) Started(pid int) error { return nil }

// Close implements guard.Sandbox. The kernel drops the domain with the
// last process in it; nothing to release here.
func (s *Sandbox) Close() error { return nil }
