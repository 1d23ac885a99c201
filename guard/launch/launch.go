// Package launch starts a guarded MCP server with the least privilege it
// can run with, the same way for both L3 backends, so that the kernel
// hooks only have to judge what is left:
//
//   - the server's user (ServerUser: configured, else the sudo caller,
//     else uid 0 without any capability), no supplementary groups;
//   - every capability gone (bounding and ambient sets emptied; the
//     setuid away from root, or for uid 0 the locked SECBIT_NOROOT and an
//     empty inheritable set, clears the rest) and no_new_privs set;
//   - a fresh anonymous session keyring;
//   - its own mount namespace (private propagation, a /proc of its own,
//     protected paths bind-mounted read-only), its own pid namespace (the
//     proxy and every other process invisible) and its own network
//     namespace, always: loopback only, plus, when the policy grants any
//     network, the listeners of the guard's egress filter (package egress),
//     which alone reach out;
//   - the seccomp filter of package seccomp;
//   - for the Landlock backend, the Landlock domain, built with privilege
//     and enforced by the unprivileged child.
//
// The launcher is a re-exec of the running binary (every binary that links
// this package serves it from init), in two stages:
//
//	BINARY __mcpguard-launch SPEC PROGRAM ARGV0 ARGS...   (stage 1)
//	BINARY __mcpguard-exec   SPEC PROGRAM ARGV0 ARGS...   (stage 2)
//
// Stage 1 is started by the proxy into the new namespaces as their pid 1.
// As root it sets up the mounts and the network, builds the Landlock
// ruleset, drops the capability bounding set and sets no_new_privs on its
// locked thread, and starts stage 2 from that thread as the server's user.
// It then only forwards signals, reaps orphans (as a pid 1 must) and exits
// with the server's status; when it exits, the kernel kills whatever is
// left in the pid namespace. Stage 2 joins a fresh keyring, enforces the
// Landlock ruleset and the seccomp filter and execve()s the server, which
// keeps its pid.
//
// When the proxy is not root there is nothing to drop and no namespaces
// to make: Prepare starts stage 2 directly, as today's Landlock wrapper did.
package launch

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/mcpguard/mcpguard/guard/landlock/ruleset"
)

// Hidden first arguments that turn a binary linking this package into the
// launcher's stages.
const (
	StageArg = "__mcpguard-launch"
	ExecArg  = "__mcpguard-exec"
)

// ExitCode is the launcher's exit status when it refused to start the
// server (126, as a shell's "found but cannot execute").
const ExitCode = 126

// Errors callers branch on.
var (
	// ErrBadSpec is wrapped for a spec that cannot be applied.
	ErrBadSpec = errors.New("bad launch spec")
)

// Spec is what the launcher applies. It travels as JSON on the command line.
type Spec struct {
	// UID and GID the server runs as (Namespaces only). 0:0 keeps the
	// proxy's root uid without any capability (securebits NOROOT).
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
	// Namespaces is set when the proxy is root: stage 1 runs, the server
	// gets its own mount and pid namespaces and the user above.
	Namespaces bool `json:"namespaces,omitempty"`
	// SharedNetwork keeps the host's network namespace: only for a
	// helper (Helper) that fetches packages, by Landlock's port rules.
	// A server always gets a namespace of its own.
	SharedNetwork bool `json:"shared_network,omitempty"`
	// Supervise are write roots (directories) served to the server
	// through a supervised file system (package namefs) that refuses
	// protected names: the Landlock backend, which cannot refuse a name.
	Supervise []string `json:"supervise,omitempty"`
	// ExecConfig also refuses, in the supervised write roots, what the
	// session change report watches (filesystem.protect_exec_config).
	ExecConfig bool `json:"exec_config,omitempty"`
	// EventsFD, when not 0, is where stage 1 writes what the supervised
	// write roots refused, one JSON Event per line (AttachEvents).
	EventsFD int `json:"events_fd,omitempty"`
	// EgressFD, when not 0, is the descriptor on which stage 1 waits
	// until the guard's egress filter has set up the network namespace
	// (AttachEgress): the server starts only once its one way out exists.
	EgressFD int `json:"egress_fd,omitempty"`
	// Writable are the paths the backend grants write to: every other
	// mount of the server's namespace is read-only.
	Writable []string `json:"writable,omitempty"`
	// Readable are the data the backend grants read access to (the
	// policy's filesystem.read roots) and Reach the runtime trees and
	// programs (the resolver's, exec.allow): with Writable, what the
	// server's user must be able to reach (View; view.go).
	Readable []string `json:"readable,omitempty"`
	Reach    []string `json:"reach,omitempty"`
	// View is how the server's user reaches them, made by Prepare.
	View *View `json:"view,omitempty"`
	// JoinCgroups are cgroup v1 cgroup.procs files stage 1 writes itself
	// into before anything else (Limiter; a v2 cgroup is joined by clone3
	// instead).
	JoinCgroups []string `json:"join_cgroups,omitempty"`
	// ReadOnly paths are bind-mounted read-only onto themselves in the
	// server's mount namespace, whatever write grant covers them: the
	// protected entries of a workspace (.git, .envrc), kept by identity,
	// since the bind holds the inode whatever the path is renamed to.
	ReadOnly []string `json:"read_only,omitempty"`
	// Mask paths are hidden behind an empty read-only file (the null
	// device bound over them): regular files with several hard links
	// under a root of a backend that judges names (see HardLinks).
	Mask []string `json:"mask,omitempty"`
	// Pin paths are bound onto themselves (writable): a mount point
	// cannot be renamed, removed or replaced.
	Pin []string `json:"pin,omitempty"`
	// ProtectIncomplete says that Protect's walk of the write roots
	// stopped at MaxWalk (for the caller to log; not sent to the launcher).
	ProtectIncomplete bool `json:"-"`
	// Landlock, when set, is the ruleset to enforce (the Landlock backend).
	Landlock *ruleset.Rules `json:"landlock,omitempty"`
	// Seccomp chooses the socket rules when Landlock is nil (the BPF
	// backend); with Landlock they follow from its rules and ABI.
	Seccomp SeccompSpec `json:"seccomp"`
}

// SeccompSpec mirrors seccomp.Options for the BPF backend.
type SeccompSpec struct {
	DenyUnix bool `json:"deny_unix,omitempty"`
}

// Options configure Prepare.
type Options struct {
	// Self is the binary to re-exec (os.Executable() if empty). It must
	// link this package.
	Self string
	// StateDir holds the journals of what sessions changed on disk
	// (DefaultStateDir if empty; a root proxy only).
	StateDir string
}

// Launch is what Prepare set up outside the server that the session's
// end must undo (ACL entries, the view's stub trees). Close is safe on nil.
type Launch struct {
	files []*os.File
	stub  string
	undo  []func() error
	// done ends the journal of the changes (clean: all were undone).
	done func(clean bool)
}

// Close undoes what Prepare did outside the server; call it after the
// server exited.
func (l *Launch) Close() error {
	if l == nil {
		return nil
	}
	var errs []error
	// Last done, first undone, as the journal's replay does: a grant
	// made over another's recorded the other's changes as its original
	// state (red team 4: read and write grants of one tree left the
	// server's user an ACL entry on the owner's 0600 file).
	for _, u := range slices.Backward(l.undo) {
		errs = append(errs, u())
	}
	for _, f := range l.files {
		f.Close()
	}
	if l.stub != "" {
		errs = append(errs, os.RemoveAll(l.stub))
	}
	err := errors.Join(errs...)
	if l.done != nil {
		l.done(err == nil)
	}
	l.undo, l.files, l.stub, l.done = nil, nil, "", nil
	return err
}

// Prepare rewrites cmd to start the server through the launcher under
// spec: its path and arguments become the launcher's, and when spec asks
// for namespaces its SysProcAttr gains the clone flags (the caller's
// other attributes, such as a cgroup fd, stay) and the server's view is
// prepared (view.go). The caller closes the Launch when the session ends.
func Prepare(cmd *exec.Cmd, spec Spec, o Options) (*Launch, error) {
	if cmd.Err != nil {
		return nil, fmt.Errorf("launch: %w", cmd.Err)
	}
	if err := launcherAvailable(); err != nil {
		return nil, err
	}
	self := o.Self
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("launch: find own binary: %w", err)
		}
	}
	l := &Launch{}
	if spec.Namespaces {
		if err := prepareView(&spec, cmd, l, o.StateDir); err != nil {
			l.Close()
			return nil, fmt.Errorf("launch: %w", err)
		}
	}
	enc, err := json.Marshal(spec)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("launch: encode spec: %w", err)
	}
	// Stage 2 started by the proxy itself gets no handoff from a stage 1
	// ("-"): it builds its Landlock ruleset itself.
	args := []string{self, ExecArg, string(enc), "-"}
	if spec.Namespaces {
		args = []string{self, StageArg, string(enc)}
		addNamespaces(cmd, !spec.SharedNetwork)
	}
	args = append(append(args, cmd.Path), cmd.Args...)
	cmd.Path = self
	cmd.Args = args
	return l, nil
}

// DecodeSpec parses a launcher spec argument.
func DecodeSpec(s string) (*Spec, error) {
	var sp Spec
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sp); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSpec, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data", ErrBadSpec)
	}
	if sp.Landlock != nil {
		enc, err := json.Marshal(sp.Landlock)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadSpec, err)
		}
		if sp.Landlock, err = ruleset.Decode(string(enc)); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadSpec, err)
		}
	}
	return &sp, nil
}

// init serves the stages before anything else runs.
func init() {
	if len(os.Args) < 2 {
		return
	}
	var err error
	switch os.Args[1] {
	case StageArg:
		err = stage1(os.Args[2:])
	case ExecArg:
		err = stage2(os.Args[2:])
	case IdleArg:
		serveIdle()
	default:
		return
	}
	fmt.Fprintf(os.Stderr, "mcpguard launch: %v\n", err)
	os.Exit(ExitCode)
}
