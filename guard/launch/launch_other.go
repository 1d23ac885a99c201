//go:build !linux

package launch

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"

	"github.com/mcpguard/mcpguard/guard"
)

// launcherAvailable fails closed off Linux: the launcher confines the
// server with namespaces, Landlock and seccomp, which only Linux has.
func launcherAvailable() error {
	return fmt.Errorf("launch: %w: the launcher needs Linux (namespaces, Landlock, seccomp), not %s", guard.ErrKernelRefused, runtime.GOOS)
}

// addNamespaces is never reached off Linux: Prepare has failed before.
func addNamespaces(*exec.Cmd, bool) {}

// stage1 and stage2 refuse to run a server unconfined off Linux.
func stage1([]string) error { return launcherAvailable() }

func stage2([]string) error { return launcherAvailable() }

// IdleArg is served on Linux only (view_linux.go).
const IdleArg = "__mcpguard-idle"

func serveIdle() { os.Exit(ExitCode) }

// prepareView is never reached off Linux: Prepare has failed before.
func prepareView(*Spec, *exec.Cmd, *Launch, string) error { return launcherAvailable() }

// Limiter needs cgroups, which only Linux has.
type Limiter struct{}

// NewLimiter fails off Linux.
func NewLimiter(Limits) (*Limiter, error) { return nil, launcherAvailable() }

// Attach, Watch, Breach and Close do nothing off Linux.
func (*Limiter) Attach(*exec.Cmd, *Spec)         {}
func (*Limiter) Watch(func(rule, reason string)) {}
func (*Limiter) Breach() string                  { return "" }
func (*Limiter) Close() error                    { return nil }
