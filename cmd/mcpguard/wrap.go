package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"time"

	"github.com/joho/godotenv"

	"github.com/mcpguard/mcpguard/clients"
	"github.com/mcpguard/mcpguard/guard/configs"
	"github.com/mcpguard/mcpguard/guard/landlock"
)

// bestConfig is the strongest config that runs here without root: L1+L2
// and Landlock where the kernel has it, L1+L2 alone elsewhere, with why.
func bestConfig() (name, note string) {
	if goruntime.GOOS != "linux" {
		return configs.CApp, fmt.Sprintf("L3 is Linux's and this is %s: wrapping with C-app (L1+L2); docs/platforms.md", goruntime.GOOS)
	}
	if _, err := landlock.KernelABI(); err != nil {
		return configs.CApp, fmt.Sprintf("no Landlock here (%v): wrapping with C-app (L1+L2)", err)
	}
	return configs.CFullLandlock, ""
}

// wrapOptions are wrap's flags beyond the selection.
type wrapOptions struct {
	config, mcpguard string
	dryRun, reinit   bool
	timeout          time.Duration
}

func cmdWrap(ctx context.Context, s stdio, args []string) error {
	fs := newFlags(s, "wrap", "[--client NAME] [--server NAME] [--config C] [--project DIR] [--dry-run]",
		`Puts mcpguard in front of the stdio servers of the MCP clients' configurations
('mcpguard clients' lists them). For each server it derives a policy with
'mcpguard policy init' (the server started with its own env from the client's
configuration), keeps it in the configuration directory, starts the server once
through mcpguard as the client will, and only then rewrites the entry to run
'mcpguard run --config C --policy FILE -- <the server's own command>', keeping
the entry's env, cwd, comments and key order. A backup of every file is
kept; 'mcpguard unwrap' restores it byte for byte. Wrapping twice changes
nothing. HTTP servers are listed as not wrapped, with the reason.`)
	var c clientFlags
	c.register(fs)
	def, _ := bestConfig()
	var o wrapOptions
	fs.StringVar(&o.config, "config", def, "the config the wrapped servers run under: "+strings.Join(configs.Names(), ", "))
	fs.StringVar(&o.mcpguard, "mcpguard", "", "the mcpguard `binary` the entries run (default: this one)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "say what would be wrapped; change nothing, start nothing")
	fs.BoolVar(&o.reinit, "reinit", false, "derive the policy again even where one is kept")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "give up on one server's policy init after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !slices.Contains(configs.Names(), o.config) {
		return fmt.Errorf("%w: unknown config %q", errUsage, o.config)
	}
	if _, note := bestConfig(); note != "" && !isFlagSet(fs, "config") {
		fmt.Fprintln(s.err, "mcpguard wrap: "+note)
	}
	if o.mcpguard == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find mcpguard's own path (give --mcpguard): %w", err)
		}
		o.mcpguard = exe
	}
	st, err := clients.DefaultStore()
	if err != nil {
		return err
	}
	env, found, err := c.discover()
	if err != nil {
		return err
	}
	w := wrapper{s: s, st: st, env: env, o: o}
	selected := 0
	for _, f := range found {
		n, err := w.file(ctx, &c, f)
		if err != nil {
			return err
		}
		selected += n
	}
	if selected == 0 && w.failed == 0 {
		fmt.Fprintln(s.err, "no server selected (mcpguard clients lists them)")
	}
	if w.failed > 0 {
		return &exitCode{code: 1, err: fmt.Errorf("%w: %d wrapped, %d not (see above)", errNotWrapped, w.wrapped, w.failed)}
	}
	return nil
}

// isFlagSet reports whether the command line gave the flag.
func isFlagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// wrapper wraps the servers of one run of `mcpguard wrap`.
type wrapper struct {
	s               stdio
	st              clients.Store
	env             clients.Env
	o               wrapOptions
	wrapped, failed int
}

// file wraps the selected servers of one file; it returns how many were
// selected.
func (w *wrapper) file(ctx context.Context, c *clientFlags, f clients.Found) (int, error) {
	where := f.Client + " " + shortPath(w.env, f.Path)
	if f.Err != nil {
		fmt.Fprintf(w.s.err, "%s: cannot read: %v\n", where, f.Err)
		w.failed++
		return 0, nil
	}
	wraps := map[string][]string{}
	selected := 0
	for _, srv := range f.Servers {
		if !c.matches(srv) {
			continue
		}
		selected++
		prefix, why := w.server(ctx, f, srv)
		if why != "" {
			fmt.Fprintf(w.s.out, "%s %s: not wrapped: %s\n", where, srv.Name, why)
			continue
		}
		wraps[clients.KeyString(srv.Key)] = prefix
	}
	if len(wraps) == 0 || w.o.dryRun {
		return selected, nil
	}
	changes, moved, err := w.write(f, wraps)
	if err != nil {
		fmt.Fprintf(w.s.err, "%s: not written: %v\n", where, err)
		w.failed += len(wraps)
		return selected, nil
	}
	for _, name := range moved {
		fmt.Fprintf(w.s.out, "%s %s: not wrapped: its entry changed while wrap ran (run mcpguard wrap again)\n", where, name)
		w.failed++
	}
	for _, ch := range changes {
		fmt.Fprintf(w.s.out, "%s %s: wrapped (%s)\n", where, ch.Key[len(ch.Key)-1], w.o.config)
	}
	w.wrapped += len(changes)
	return selected, nil
}

// write puts the prepared wraps into the file as it is now: it is read
// again (policy init and the start checks take seconds, and a client such
// as Claude Code writes its file whenever it starts), an entry is wrapped
// only if it is still the one that was checked (moved lists those that
// are not), and never over a change made meanwhile (clients.Replace; the
// edit is redone on the new bytes, three times at most). The backup is of
// the bytes replaced, and the changes are recorded before the file is
// written and forgotten again if it is not.
func (w *wrapper) write(f clients.Found, wraps map[string][]string) (changes []clients.Change, moved []string, err error) {
	checked := map[string]clients.Server{}
	for _, s := range f.Servers {
		checked[clients.KeyString(s.Key)] = s
	}
	for try := 1; ; try++ {
		cur, err := os.ReadFile(f.Path)
		if err != nil {
			return nil, nil, err
		}
		now, err := clients.Parse(f.File, cur)
		if err != nil {
			return nil, nil, err
		}
		todo := map[string][]string{}
		moved = nil
		for k, prefix := range wraps {
			i := slices.IndexFunc(now, func(s clients.Server) bool { return clients.KeyString(s.Key) == k })
			if i < 0 || !sameServer(now[i], checked[k]) {
				moved = append(moved, checked[k].Name)
				continue
			}
			todo[k] = prefix
		}
		slices.Sort(moved)
		out, changes, err := clients.Wrap(f.File, cur, todo)
		if err != nil || len(changes) == 0 {
			return changes, moved, err
		}
		backup, err := w.st.Backup(f.Path, cur)
		if err != nil {
			return nil, nil, err
		}
		if err := w.st.AddChanges(f.Path, backup, changes); err != nil {
			return nil, nil, err
		}
		err = clients.Replace(f.Path, cur, out)
		if err == nil {
			return changes, moved, nil
		}
		keys := make([][]string, 0, len(changes))
		for _, c := range changes {
			keys = append(keys, c.Key)
		}
		if derr := w.st.DropChanges(f.Path, keys); derr != nil {
			fmt.Fprintf(w.s.err, "mcpguard wrap: %v\n", derr)
		}
		if !errors.Is(err, clients.ErrChanged) || try == 3 {
			return nil, nil, err
		}
	}
}

// sameServer reports whether two readings of an entry start the same
// server: command, args, env and cwd.
func sameServer(a, b clients.Server) bool {
	return a.Transport == b.Transport && a.Command == b.Command && slices.Equal(a.Args, b.Args) &&
		maps.Equal(a.Env, b.Env) && a.Cwd == b.Cwd && a.Guarded == b.Guarded && a.Disabled == b.Disabled
}

// server prepares one server: its policy, and the mcpguard command line
// that goes before its own. why is set when it is not wrapped.
func (w *wrapper) server(ctx context.Context, f clients.Found, srv clients.Server) (prefix []string, why string) {
	switch {
	case srv.Guarded:
		return nil, "already guarded"
	case srv.Problem != "":
		return nil, srv.Problem
	}
	argv, env, missing, err := expandServer(f.File, w.env, srv)
	if err != nil {
		w.failed++
		return nil, err.Error()
	}
	if len(missing) > 0 {
		w.failed++
		return nil, fmt.Sprintf("its entry uses %s, which only %s knows when it starts the server", strings.Join(missing, ", "), f.Client)
	}
	policyFile := w.st.PolicyPath(f.File, srv)
	ws := w.workspace(f, srv)
	if w.o.dryRun {
		fmt.Fprintf(w.s.out, "%s %s %s: would derive %s and wrap with %s\n", f.Client, shortPath(w.env, f.Path), srv.Name, policyFile, w.o.config)
		return nil, "dry run"
	}
	if _, err := os.Stat(policyFile); err != nil || w.o.reinit {
		ictx, cancel := context.WithTimeout(ctx, w.o.timeout)
		// The policy (so the session, its audit events and the overrides
		// made from them) is named after its file, which is unique: two
		// projects' "files" servers never share an override, and `mcpguard
		// audit` finds the policy an event came from.
		err := initPolicy(ictx, w.s, strings.TrimSuffix(filepath.Base(policyFile), ".json"), argv, env, policyFile)
		cancel()
		if err != nil {
			w.failed++
			return nil, fmt.Sprintf("policy init failed: %v", err)
		}
	} else {
		fmt.Fprintf(w.s.err, "%s: keeping the policy derived before (--reinit derives it again)\n", policyFile)
	}
	prefix = []string{w.o.mcpguard, "run", "--config", w.o.config, "--policy", policyFile,
		"--audit", filepath.Join(w.st.Dir, "audit.jsonl"), "--var", "WS=" + ws, "--"}
	n, err := w.check(ctx, f, srv, append(slices.Clone(prefix), argv...), env)
	if err != nil {
		w.failed++
		return nil, fmt.Sprintf("it does not start through mcpguard, so its entry is left as it was: %v\n  (the policy is %s: edit it, then mcpguard wrap --server %s again; --reinit derives it again)", err, policyFile, srv.Name)
	}
	fmt.Fprintf(w.s.err, "%s %s: %d tools through mcpguard (%s)\n", f.Client, srv.Name, n, w.o.config)
	return prefix, ""
}

// check starts the server as its client will once it is wrapped (the
// wrapped command line, this environment with the entry's env, in the
// entry's cwd) and lists its tools through mcpguard: an entry whose
// wrapped command would not start (a policy mcpguard run refuses, a
// runtime L3 refuses) is never written.
func (w *wrapper) check(ctx context.Context, f clients.Found, srv clients.Server, argv, env []string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, w.o.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	if v, _ := clients.Expand(f.File, w.env, srv.Cwd); filepath.IsAbs(v) {
		cmd.Dir = v
	}
	stderr := &tailBuffer{max: 4 << 10}
	// mcpguard run confines the server and opens its egress gate itself.
	tools, err := session(ctx, cmd, stderr, nil, nil, nil)
	if err != nil {
		return 0, fmt.Errorf("%w%s", err, indentLines(lastLines(stderr.bytes(), 6), "    "))
	}
	return len(tools), nil
}

// lastLines is the last n lines of b.
func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// indentLines puts each line of s on a new line after prefix ("" for "").
func indentLines(s, prefix string) string {
	if strings.TrimSpace(s) == "" {
		return ""
	}
	return "\n" + prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

// workspace is ${WS} for a wrapped server, the directory its tools'
// path arguments are judged against: the entry's cwd, the project of a
// project's file, else an empty directory of its own in the store (a
// client such as Claude Desktop starts servers in /, which must not become
// a root).
func (w *wrapper) workspace(f clients.Found, srv clients.Server) string {
	switch {
	case srv.Cwd != "":
		if v, _ := clients.Expand(f.File, w.env, srv.Cwd); filepath.IsAbs(v) {
			return v
		}
	case f.Scope == "project":
		return w.env.Project
	case strings.HasPrefix(srv.Scope, "local "):
		return strings.TrimPrefix(srv.Scope, "local ")
	}
	d := strings.TrimSuffix(w.st.PolicyPath(f.File, srv), ".json")
	d = filepath.Join(w.st.Dir, "workspaces", filepath.Base(d))
	// The rest of the store stays the user's alone (0700); the workspace
	// is the server's working directory, which a server run as another
	// user (a root proxy runs it as nobody) must be able to open: the
	// launcher reaches it through its view, but an interpreter's shim
	// (pyenv's) fails in a working directory it cannot read.
	err := os.MkdirAll(filepath.Dir(d), 0o700)
	if err == nil {
		if err = os.Mkdir(d, 0o755); errors.Is(err, os.ErrExist) {
			err = nil
		}
	}
	if err == nil {
		err = os.Chmod(d, 0o755)
	}
	if err != nil {
		fmt.Fprintf(w.s.err, "mcpguard wrap: %v\n", err)
	}
	return d
}

// expandServer is the server's command line and env as the client would
// start it (its envFile's variables, then its env, which wins), with the
// variables mcpguard could not resolve.
func expandServer(f clients.File, e clients.Env, srv clients.Server) (argv, env, missing []string, err error) {
	add := func(v string) string {
		x, m := clients.Expand(f, e, v)
		missing = append(missing, m...)
		return x
	}
	for _, a := range srv.Argv() {
		argv = append(argv, add(a))
	}
	vars := map[string]string{}
	if srv.EnvFile != "" {
		p := add(srv.EnvFile)
		if len(missing) == 0 {
			if !filepath.IsAbs(p) {
				p = filepath.Join(e.Project, p)
			}
			// godotenv reads the file as the clients' own dotenv parsers
			// do; a file that cannot be read leaves the entry as it is.
			if vars, err = godotenv.Read(p); err != nil {
				return nil, nil, nil, fmt.Errorf("its envFile cannot be read: %v", err)
			}
		}
	}
	for k, v := range srv.Env {
		vars[k] = v
	}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		v := vars[k]
		if _, ok := srv.Env[k]; ok {
			v = add(v) // the client expands variables in env, not in the file
		}
		env = append(env, k+"="+v)
	}
	return argv, env, missing, nil
}

// initPolicy derives the policy of one configured server into file: the
// one place wrap starts a server before it is wrapped, so that it runs as
// `mcpguard policy init` runs servers (confined, with the entry's env).
func initPolicy(ctx context.Context, s stdio, name string, argv, env []string, file string) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	args := []string{"--out", file, "--server", name}
	for _, kv := range env {
		args = append(args, "--env", kv)
	}
	args = append(append(args, "--"), argv...)
	err := policyInit(ctx, s, args)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("the server did not list its tools in time (--timeout): %w", err)
	}
	if err == nil {
		err = os.Chmod(file, 0o600)
	}
	return err
}
