//go:build linux

package namefs_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkNamefs pairs file operations in a supervised write root with
// the same operations in a plain directory, in the same rounds: what the
// Landlock backend's protection by name costs a server per operation.
func BenchmarkNamefs(b *testing.B) {
	plain, super := b.TempDir(), b.TempDir()
	if os.Geteuid() != 0 {
		b.Skip("mounting FUSE needs root")
	}
	s, _ := mountB(b, super)
	defer s.Close()
	data := make([]byte, 4096)
	for _, dir := range []string{plain, super} {
		if err := os.WriteFile(filepath.Join(dir, "read.txt"), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	ops := map[string]func(dir string) error{
		"read": func(dir string) error { _, err := os.ReadFile(filepath.Join(dir, "read.txt")); return err },
		"write": func(dir string) error {
			p := filepath.Join(dir, "w.txt")
			if err := os.WriteFile(p, data, 0o644); err != nil {
				return err
			}
			return os.Remove(p)
		},
		"stat": func(dir string) error { _, err := os.Stat(filepath.Join(dir, "read.txt")); return err },
	}
	for _, name := range []string{"read", "write", "stat"} {
		op := ops[name]
		b.Run(name, func(b *testing.B) {
			var tp, ts []time.Duration
			for b.Loop() {
				for _, c := range []struct {
					dir string
					out *[]time.Duration
				}{{plain, &tp}, {super, &ts}} {
					t0 := time.Now()
					if err := op(c.dir); err != nil {
						b.Fatal(err)
					}
					*c.out = append(*c.out, time.Since(t0))
				}
			}
			mp, ms := med(tp), med(ts)
			b.ReportMetric(float64(mp.Nanoseconds()), "plain-ns")
			b.ReportMetric(float64(ms.Nanoseconds()), "namefs-ns")
			b.ReportMetric(float64((ms - mp).Nanoseconds()), "added-ns")
		})
	}
}

func med(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
