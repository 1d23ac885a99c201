package launch

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/guard/changes"
	"github.com/mcpguard/mcpguard/guard/namefs"
)

// supervise mounts the supervised file system over each Supervise root
// (in the server's mount namespace; stage 1 serves it until it exits) and
// sends what it refuses to EventsFD.
func supervise(spec *Spec) error {
	if len(spec.Supervise) == 0 {
		return nil
	}
	var (
		mu  sync.Mutex
		enc *json.Encoder
	)
	if spec.EventsFD > 0 {
		// Stage 1's own: not passed on to the server.
		unix.CloseOnExec(spec.EventsFD)
		enc = json.NewEncoder(os.NewFile(uintptr(spec.EventsFD), "events"))
	}
	denied := func(r namefs.Refusal, path, op string) {
		if enc == nil {
			return
		}
		rule := RuleProtectedName
		if r == namefs.Executable {
			rule = RuleExecutable
		}
		mu.Lock()
		defer mu.Unlock()
		enc.Encode(Event{Rule: rule, Target: path, Op: op})
	}
	protected := IsProtected
	if spec.ExecConfig {
		protected = func(p string) bool { return IsProtected(p) || changes.Listed(p) }
	}
	for _, dir := range spec.Supervise {
		if _, err := namefs.Mount(dir, namefs.Options{Protected: protected, Denied: denied}); err != nil {
			return fmt.Errorf("supervise write root: %w", err)
		}
		// noexec as the write root under it (view.go): what the server
		// writes never runs, nor is mapped executable.
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOEXEC | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
		if err := unix.MountSetattr(unix.AT_FDCWD, dir, 0, &attr); err != nil {
			return fmt.Errorf("supervise write root: noexec %s: %w", dir, err)
		}
	}
	return nil
}
