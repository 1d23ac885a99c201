package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpguard/mcpguard/guard/landlock"
	"github.com/mcpguard/mcpguard/guard/policy"
)

// initBox is the sandbox `policy init` (and --learn) starts the server in
// (issue 31): deriving a policy from an unknown server must be safe, so it
// is confined like a guarded server, by the Landlock backend and the
// launcher (namespaces, the server's unprivileged user, seccomp), with a
// policy of its own:
//
//   - no network at all (a network namespace of its own under a root
//     proxy, Landlock's TCP rules and the seccomp filter's UDP refusal
//     otherwise; where neither can hold, init refuses to start the server);
//   - write access to a scratch directory (its TMPDIR), removed after, and
//     to the --data directories the operator names, nothing else;
//   - read access to the working directory (the workspace policy init is
//     run in, as docs/policy.md says), unless it holds $HOME or is /, and
//     to what the server's own arguments name (argumentRoots);
//   - the runtime the resolver finds for its command (confined as well)
//     and the system baseline;
//   - the minimal environment: PATH, HOME and LANG of the caller, TMPDIR,
//     and what --env gives; nothing else of the caller's.
type initBox struct {
	sb      *landlock.Sandbox
	scratch string
	dir     string
	env     []string
	// rules are the last prepared command's rules (for learn mode).
	rules *landlock.Rules
}

// errInitUnconfined is returned where the server could not be confined.
var errInitUnconfined = errors.New("policy init cannot confine the server here")

func newInitBox(name string, extraEnv []string, nets []policy.NetRule, argRoots []argRoot, data []string) (*initBox, error) {
	dir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	scratch, err := os.MkdirTemp("", "mcpguard-init-*")
	if err != nil {
		return nil, fmt.Errorf("policy init: scratch directory: %w", err)
	}
	// The server's user must be able to write it (a root proxy runs the
	// server as another user); nobody else can reach it below the 0700
	// temporary directories of a private /tmp, and it is removed after.
	if err := os.Chmod(scratch, 0o1777); err != nil {
		os.RemoveAll(scratch)
		return nil, fmt.Errorf("policy init: scratch directory: %w", err)
	}
	b := &initBox{scratch: scratch, dir: dir, env: initEnv(os.Environ(), scratch, extraEnv)}
	// --data: what the operator says the server writes while it starts.
	p := &policy.Policy{Server: name, Filesystem: policy.Filesystem{Write: append([]string{scratch}, data...)},
		Network: policy.Network{Allow: nets}}
	if home := os.Getenv("HOME"); dir != "/" && (home == "" || !under(home, dir)) {
		p.Filesystem.Read = []string{dir}
	}
	// What the server's own arguments name (its directory, its database)
	// it may read while it lists its tools; never write.
	for _, r := range argRoots {
		p.Filesystem.Read = append(p.Filesystem.Read, r.Root)
	}
	b.sb, err = landlock.New(p, landlock.Options{Server: name, Config: "policy-init", Report: io.Discard})
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("%w: %w", errInitUnconfined, err)
	}
	if os.Geteuid() != 0 && b.sb.ABI() < 4 {
		b.Close()
		return nil, fmt.Errorf("%w: Landlock ABI %d cannot deny TCP (needs 4) and there is no network namespace without root", errInitUnconfined, b.sb.ABI())
	}
	return b, nil
}

// initEnv is the server's environment under policy init.
func initEnv(environ []string, scratch string, extra []string) []string {
	var env []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if k == "PATH" || k == "HOME" || k == "LANG" {
			env = append(env, kv)
		}
	}
	return append(append(env, "TMPDIR="+scratch), extra...)
}

// command returns the server's command, confined.
func (b *initBox) command(ctx context.Context, argv []string) (*exec.Cmd, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = b.dir, b.env
	if err := b.sb.Prepare(cmd); err != nil {
		return nil, err
	}
	b.rules = b.sb.Prepared()
	return cmd, nil
}

// runtimeGranted reports whether p is granted by the sandbox's runtime
// and baseline rules (not the working directory or scratch: data).
func (b *initBox) runtimeGranted(p string) bool {
	if b.rules == nil {
		return false
	}
	if self, err := os.Executable(); err == nil && p == self {
		return true // the launcher's stages run before the server
	}
	return slices.ContainsFunc(b.rules.Paths, func(r landlock.PathRule) bool {
		return !strings.HasPrefix(r.Why, "policy filesystem.") && under(p, r.Path)
	})
}

func (b *initBox) Close() {
	if b.sb != nil {
		b.sb.Close()
	}
	if b.scratch != "" {
		os.RemoveAll(b.scratch)
	}
}

// under reports whether path is dir or below it.
func under(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// netList is policy init's --net: HOST:PORT destinations the server needs
// at start-up.
// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

type netList struct{ rules []policy.NetRule }

func (l *netList) String() string { return fmt.Sprint(l.rules) }

func (l *netList) Set(v string) error {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return fmt.Errorf("--net %q: want HOST:PORT: %w", v, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("--net %q: bad port", v)
	}
	l.rules = append(l.rules, policy.NetRule{Host: host, Ports: []int{n}})
	return nil
}
