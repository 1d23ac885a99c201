package launch

import (
	"fmt"
	"strconv"
	"strings"
)

// UserEnv configures the server's user as "UID:GID" (numbers). It wins over
// the defaults below; root (0) is refused.
const UserEnv = "MCPGUARD_SERVER_USER"

// Nobody is the overflow uid and gid, which own nothing: the server's
// user when neither UserEnv nor a sudo caller names one.
const Nobody = 65534

// ErrRootServer is returned when the configuration asks for the server to
// run as root.
var ErrRootServer = fmt.Errorf("%w: the server may not run as root", ErrBadSpec)

// ServerUser resolves the server's uid and gid from the environment
// (getenv is os.Getenv outside tests): UserEnv, else the user who ran
// sudo (SUDO_UID, SUDO_GID; root's own sudo counts as no caller), else
// Nobody:Nobody. Never uid or gid 0: with no sudo caller (CI, containers,
// a root shell) the server still runs as an unprivileged user, and the
// data it is granted is made reachable to that user in its mount
// namespace (view.go), while root's other files stay protected by DAC as
// well as by L3. Malformed values are errors, never a silent fall back.
// See docs/l3.md, "The server's user".
func ServerUser(getenv func(string) string) (uid, gid uint32, err error) {
	if v := getenv(UserEnv); v != "" {
		u, g, ok := strings.Cut(v, ":")
		if !ok {
			return 0, 0, fmt.Errorf("%w: %s=%q, want UID:GID", ErrBadSpec, UserEnv, v)
		}
		if uid, err = parseID(u); err == nil {
			gid, err = parseID(g)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("%w: %s=%q: %v", ErrBadSpec, UserEnv, v, err)
		}
		if uid == 0 || gid == 0 {
			return 0, 0, ErrRootServer
		}
		return uid, gid, nil
	}
	if u, g := getenv("SUDO_UID"), getenv("SUDO_GID"); u != "" || g != "" {
		uid, uerr := parseID(u)
		gid, gerr := parseID(g)
		if uerr != nil || gerr != nil {
			return 0, 0, fmt.Errorf("%w: SUDO_UID=%q SUDO_GID=%q: set %s=UID:GID", ErrBadSpec, u, g, UserEnv)
		}
		if uid != 0 {
			if gid == 0 {
				return 0, 0, fmt.Errorf("%w: SUDO_GID=0 for SUDO_UID=%d: set %s=UID:GID", ErrRootServer, uid, UserEnv)
			}
			return uid, gid, nil
		}
	}
	return Nobody, Nobody, nil
}

func parseID(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n == 1<<32-1 {
		return 0, fmt.Errorf("bad id %q", s)
	}
	return uint32(n), nil
}
