//go:build linux && !amd64 && !arm64

package ruleset

// No socket filter here: Wrap then runs with Landlock alone, and the
// limits documented for Landlock (UDP below ABI 10, MPTCP, raw sockets)
// apply in full.
const (
	nativeArch = 0
	x32Bit     = 0
)
