package launch

import (
	"fmt"
	"strconv"
	"strings"
)

// UserEnv configures the server's user as "UID:GID" (numbers). It wins over
// the defaults below; root (0) is refused.
const UserEnv = "MCPGUARD_SERVER_USER"

// Nobody is the overflow uid and gid, which own nothing: the user to name
// in UserEnv for the strongest setting ("65534:65534").
const Nobody = 65534

// ErrRootServer is returned when the configuration asks for the server to
// run as root.
var ErrRootServer = fmt.Errorf("%w: the server may not run as root", ErrBadSpec)

// ServerUser resolves the server's uid and gid from the environment
// (getenv is os.Getenv outside tests): UserEnv, else the user who ran
// sudo (SUDO_UID, SUDO_GID; root's own sudo counts as no caller), else
// 0:0, which the launcher turns into a root without any capability (empty
// bounding set, SECBIT_NOROOT locked): when root runs mcpguard itself, the
// data the server works on is root's, and another uid could not read it.
// DAC then protects nothing from the server; the read-only mount namespace
// and the L3 policy do. Malformed values are errors, never a silent fall
// back to root. See docs/l3.md, "The server's user".
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
	return 0, 0, nil
}

func parseID(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n == 1<<32-1 {
		return 0, fmt.Errorf("bad id %q", s)
	}
	return uint32(n), nil
}
