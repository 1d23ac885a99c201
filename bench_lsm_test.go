package mcpguard_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/mcpguard/mcpguard/guard/policy"
	"github.com/mcpguard/mcpguard/guard/sandbox"
	"github.com/mcpguard/mcpguard/internal/testenv"
)

// BenchmarkLSM is what the BPF LSM programs cost the operations they check:
// open+close of a workspace file, a loopback TCP connect, and fork+exec of
// /usr/bin/true, each from an unguarded process and then from a guarded
// one (this benchmark process joins a session for the guarded half; the
// programs are attached throughout, so "unguarded" is any process on a
// machine running mcpguard). The guarded sub-benchmark reports its time
// over the unguarded one measured just before in the same process as
// x-unguarded (target: at most 1.05).
//
//	mcpguard vm -- go test -bpf -run '^$' -bench LSM .
func BenchmarkLSM(b *testing.B) {
	testenv.RequireBPF(b)
	ws := filepath.Join(b.TempDir(), "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		b.Fatal(err)
	}
	file := filepath.Join(ws, "notes.txt")
	if err := os.WriteFile(file, []byte("hello\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	p := &policy.Policy{
		Server:     "bench",
		Filesystem: policy.Filesystem{Write: []string{ws}},
		Network:    policy.Network{Allow: []policy.NetRule{{Host: "127.0.0.1", Ports: []int{port}}}},
		Exec:       policy.Exec{Allow: []string{"/usr/bin/true"}},
	}
	s, err := sandbox.New(context.Background(), p, sandbox.Options{Server: "bench"})
	testenv.SkipIfNotSupported(b, err)
	defer s.Close()
	// Prepare compiles the policy into the maps; the command is never run:
	// this process joins the session itself for the guarded half.
	self, _ := os.Executable()
	if err := s.Prepare(exec.Command(self)); err != nil {
		b.Fatal(err)
	}

	ops := []struct {
		name string
		op   func() error
	}{
		{"open", func() error {
			f, err := os.Open(file)
			if err != nil {
				return err
			}
			return f.Close()
		}},
		{"connect", func() error {
			c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
			if err != nil {
				return err
			}
			return c.Close()
		}},
		{"exec", func() error { return exec.Command("/usr/bin/true").Run() }},
	}
	for _, o := range ops {
		var base float64
		b.Run(o.name+"/unguarded", func(b *testing.B) {
			for b.Loop() {
				if err := o.op(); err != nil {
					b.Fatal(err)
				}
			}
			base = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
		b.Run(o.name+"/guarded", func(b *testing.B) {
			if err := s.Started(os.Getpid()); err != nil {
				b.Fatal(err)
			}
			defer s.Release(os.Getpid())
			// Fail loudly if the guard is not really on: a denied open
			// proves this process is confined while it is timed.
			if _, err := os.ReadFile("/etc/shadow"); err == nil {
				b.Fatal("guarded process read /etc/shadow: not confined")
			}
			for b.Loop() {
				if err := o.op(); err != nil {
					b.Fatal(err)
				}
			}
			if base > 0 {
				ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				b.ReportMetric(ns/base, "x-unguarded")
			}
		})
	}
}
