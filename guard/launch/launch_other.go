//go:build !linux

package launch

import (
	"fmt"
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
