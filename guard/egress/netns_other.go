//go:build !linux

package egress

import (
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
)

// Network namespaces are Linux's: off Linux the filter cannot start, and
// the launcher, which needs them too, has refused the session before.
type nsThread struct{}

var errNoNetns = fmt.Errorf("egress: %w: network namespaces need Linux, not %s", errors.ErrUnsupported, runtime.GOOS)

func joinNetns(string) (*nsThread, error) { return nil, errNoNetns }

func (*nsThread) do(func() error) error { return errNoNetns }

func (*nsThread) close() {}

func setupLoopback() error { return errNoNetns }

func (*nsThread) steer([]InsideRule, *net.TCPListener, *net.TCPListener) (io.Closer, error) {
	return nil, errNoNetns
}

func nsPath(pid int) string { return fmt.Sprint(pid) }
