//go:build unix

package guard

import (
	"os"
	"os/signal"
	"syscall"
)

// catchSIGPIPE makes a write to a client that went away fail with EPIPE
// instead of killing the process: Go's runtime kills a program that writes
// to a broken pipe on stdout unless SIGPIPE is being notified. The proxy
// then stops the server's group like on any other way out. It returns the
// function that undoes it.
func catchSIGPIPE() func() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGPIPE)
	return func() { signal.Stop(ch) }
}
