//go:build linux

package landlock_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/landlock"
	"github.com/mcpguard/mcpguard/guard/policy"
	"github.com/mcpguard/mcpguard/internal/testenv"
)

// BenchmarkLandlock measures what Landlock costs a guarded server:
//
//   - start: starting /usr/bin/true through the wrapper (runtime start-up
//     of this binary, ruleset build, restrict, execve) against starting it
//     directly, alternating in one loop; reports both and their ratio.
//   - open: open+close of a file in a policy root from a thread under the
//     ruleset, against an unrestricted thread, interleaved.
//   - connect: TCP connect+close to an allowed loopback port, likewise.
func BenchmarkLandlock(b *testing.B) {
	b.Run("start", benchStart)
	// Made here: a sub-benchmark's own clean-up would run on its
	// restricted thread, which may not remove it.
	dir := b.TempDir()
	b.Run("open", func(b *testing.B) {
		f := filepath.Join(dir, "f")
		require.NoError(b, os.WriteFile(f, []byte("x"), 0o644))
		benchRestricted(b, &policy.Policy{Filesystem: policy.Filesystem{Read: []string{dir}}}, func() error {
			fh, err := os.Open(f)
			if err != nil {
				return err
			}
			return fh.Close()
		})
	})
	b.Run("connect", func(b *testing.B) {
		l := testenv.Listener(b)
		addr := l.Addr().String()
		benchRestricted(b, &policy.Policy{Network: policy.Network{Allow: []policy.NetRule{{Host: "127.0.0.1", Ports: []int{port(l)}}}}}, func() error {
			c, err := net.Dial("tcp4", addr)
			if err != nil {
				return err
			}
			return c.Close()
		})
	})
}

func benchStart(b *testing.B) {
	sb := newSandbox(b, &policy.Policy{})
	var direct, guarded []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := exec.Command("/usr/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		cmd := exec.Command("/usr/bin/true")
		if err := sb.Prepare(cmd); err != nil {
			b.Fatal(err)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
		direct = append(direct, t1.Sub(t0))
		guarded = append(guarded, time.Since(t1))
	}
	md, mg := median(direct), median(guarded)
	b.ReportMetric(float64(md.Nanoseconds()), "direct-ns")
	b.ReportMetric(float64(mg.Nanoseconds()), "landlock-ns")
	b.ReportMetric(float64(p95(guarded).Nanoseconds()), "landlock-p95-ns")
	b.ReportMetric(float64(mg)/float64(md), "ratio")
}

// benchRestricted compares op on a thread under the ruleset compiled
// from p with op on an unrestricted thread, interleaved in blocks so that
// load from elsewhere on the machine hits both alike. Each b.Loop
// iteration is one block of each; only the ops are timed, not the hand-off.
// This goroutine's thread is the restricted one and stays locked: the
// runtime discards it when the benchmark returns.
func benchRestricted(b *testing.B, p *policy.Policy, op func() error) {
	sb := newSandbox(b, p)
	const block = 100
	type result struct {
		d   time.Duration
		err error
	}
	req, res := make(chan struct{}), make(chan result)
	defer close(req)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for range req {
			start := time.Now()
			var err error
			for range block {
				if err = op(); err != nil {
					break
				}
			}
			res <- result{time.Since(start), err}
		}
	}()
	runtime.LockOSThread()
	if err := landlock.RestrictThread(sb.Rules(), landlock.KernelABI); err != nil {
		b.Fatal(err)
	}
	var guarded, unguarded time.Duration
	for b.Loop() {
		req <- struct{}{}
		r := <-res
		if r.err != nil {
			b.Fatal(r.err)
		}
		unguarded += r.d
		start := time.Now()
		for range block {
			if err := op(); err != nil {
				b.Fatal(err)
			}
		}
		guarded += time.Since(start)
	}
	n := float64(b.N * block)
	b.ReportMetric(float64(guarded.Nanoseconds())/n, "landlock-ns")
	b.ReportMetric(float64(unguarded.Nanoseconds())/n, "unguarded-ns")
	b.ReportMetric(float64(guarded)/float64(unguarded), "ratio")
}

func median(d []time.Duration) time.Duration { return quantile(d, 0.5) }
func p95(d []time.Duration) time.Duration    { return quantile(d, 0.95) }

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}
