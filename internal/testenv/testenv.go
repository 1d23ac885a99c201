// Package testenv holds the test flags every package of this module shares,
// so that `go test -bpf ./...` and `go test ./... -update` work in every
// package. Each package with tests imports it (blank if it uses nothing).
package testenv

import (
	"errors"
	"flag"
	"net"
	"os"
	"testing"

	"github.com/mcpguard/mcpguard/internal/feature"
)

var (
	bpf    = flag.Bool("bpf", false, "run tests that load BPF LSM programs (root and an enforcing kernel; see `mcpguard vm`)")
	update = flag.Bool("update", false, "rewrite golden files with the current output")
)

// BPF reports whether -bpf was given.
func BPF() bool { return *bpf }

// Update reports whether -update was given.
func Update() bool { return *update }

// RequireBPF skips tb unless -bpf was given. With -bpf the caller asked for
// the kernel tests to run, so a missing privilege fails tb instead of
// skipping it: a run that was meant to test enforcement must not pass by
// testing nothing.
func RequireBPF(tb testing.TB) {
	tb.Helper()
	if !*bpf {
		tb.Skip("needs -bpf (run as: mcpguard vm -- go test -bpf ./...)")
	}
	if os.Geteuid() != 0 {
		tb.Fatal("-bpf was given but the test does not run as root (BPF programs need root)")
	}
}

// SkipIfNotSupported skips tb when err says the kernel lacks or refuses a
// feature, with the kernel's reason in the skip message, and fails it on any
// other error. With -bpf a refusal fails tb too (see RequireBPF).
func SkipIfNotSupported(tb testing.TB, err error) {
	tb.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, feature.ErrKernelRefused) {
		if *bpf {
			tb.Fatalf("-bpf was given but the kernel refused: %v", err)
		}
		tb.Skipf("kernel does not support this here: %v", err)
	}
	tb.Fatal(err)
}

// Listener listens on a free TCP port of 127.0.0.1 and accepts and closes
// every connection (a connect target that only has to be reachable); it is
// closed at cleanup.
func Listener(tb testing.TB) net.Listener {
	tb.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return l
}

// Evictor returns a function that evicts the calling core's private caches
// and TLB by touching a buffer twice the size of these machines' per-core
// L2 (2 MiB), a cache line at a time; a shared L3 is left warm. Cold
// benchmarks call it before each timed call: in the proxy the layers run
// after the server and the client had the core, and cost several times
// what a warm loop shows.
func Evictor() func() {
	sweep := make([]byte, 8<<20)
	return func() {
		for i := 0; i < len(sweep); i += 64 {
			sweep[i]++
		}
	}
}
