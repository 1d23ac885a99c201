package model

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"
)

var realShapes = flag.Bool("real-shapes", false, "also benchmark the qwen2.5-0.5b and prompt-guard-86m shapes (GBs of weights, slow)")

// peak measures what the matmul kernel reaches on every core on a shape
// large enough to amortize the hand-off to the pool: the ceiling the
// model's own rate is compared with. It returns GFLOP per wall second and
// per CPU second, each the best of three 100 ms windows. Each benchmark
// measures it just before it runs, so both see the same machine load;
// the CPU-second ratio (cpu-peak-frac) is the one that holds up on a
// machine shared with other jobs.
func peak() (wall, cpu float64) {
	pool := NewPool(0)
	defer pool.Close()
	const T, K, N = 64, 64, 4096
	j, flops := kernelJob(T, K, N)
	var wg sync.WaitGroup
	for range 3 {
		n := 0
		start, c0 := time.Now(), cpuTime()
		for time.Since(start) < 100*time.Millisecond {
			pool.run(j, flops, &wg)
			n++
		}
		f := float64(n * flops)
		wall = max(wall, f/time.Since(start).Seconds()/1e9)
		if c := (cpuTime() - c0).Seconds(); c > 0 {
			cpu = max(cpu, f/c/1e9)
		}
	}
	return wall, cpu
}

// reportRate reports the rate flops of work reached in wall and CPU time,
// and both as fractions of the kernel's peak.
func reportRate(b *testing.B, flops int64, cpu time.Duration, peakWall, peakCPU float64) {
	g := float64(flops) / b.Elapsed().Seconds() / 1e9
	b.ReportMetric(g, "gflops")
	b.ReportMetric(g/peakWall, "peak-frac")
	if cpu > 0 && peakCPU > 0 {
		b.ReportMetric(float64(flops)/cpu.Seconds()/1e9/peakCPU, "cpu-peak-frac")
	}
}

func kernelJob(T, K, N int) (*matmulJob, int) {
	x, w := make([]float32, T*K), make([]float32, N*K)
	for i := range x {
		x[i] = float32(i%7) * 0.1
	}
	for i := range w {
		w[i] = float32(i%5) * 0.1
	}
	return &matmulJob{dst: make([]float32, T*N), x: x, w: w, T: T, K: K, N: N, ldd: N}, 2 * T * K * N
}

// BenchmarkKernel is the bare matmul kernel: the prefill's shape (64 tokens,
// hidden 64) against a wide weight, on one goroutine and on the pool.
func BenchmarkKernel(b *testing.B) {
	for _, par := range []bool{false, true} {
		b.Run(fmt.Sprintf("parallel=%v", par), func(b *testing.B) {
			pool := NewPool(0)
			defer pool.Close()
			j, flops := kernelJob(64, 64, 4096)
			var wg sync.WaitGroup
			c0 := cpuTime()
			for b.Loop() {
				if par {
					pool.run(j, flops, &wg)
				} else {
					j.run(0, 1)
				}
			}
			b.ReportMetric(float64(flops)*float64(b.N)/b.Elapsed().Seconds()/1e9, "gflops")
			if c := (cpuTime() - c0).Seconds(); c > 0 {
				b.ReportMetric(float64(flops)*float64(b.N)/c/1e9, "gflops-per-cpu-s")
			}
			b.ReportMetric(float64(pool.Workers()), "workers")
		})
	}
}

func benchShapes() []string {
	if *realShapes {
		return []string{"small", "medium", "qwen2.5-0.5b"}
	}
	return []string{"small", "medium"}
}

// BenchmarkPrefill times a forward pass over a prompt of each length into a
// fresh KV cache.
func BenchmarkPrefill(b *testing.B) {
	for _, shape := range benchShapes() {
		lengths := []int{512, 4096, 32768}
		switch shape {
		case "small":
		case "medium": // full attention: 32k tokens would take minutes
			lengths = []int{512, 2048, 8192}
		default:
			lengths = []int{64, 512}
		}
		for _, n := range lengths {
			b.Run(fmt.Sprintf("shape=%s/tokens=%d", shape, n), func(b *testing.B) {
				d, ids := benchDecoder(b, shape, n)
				var flops int64
				pw, pc := peak()
				b.ResetTimer()
				c0 := cpuTime()
				for b.Loop() {
					s, err := d.NewSession(n + 1)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := s.Prefill(context.Background(), ids); err != nil {
						b.Fatal(err)
					}
					flops += s.Stats().FLOPs
				}
				cpu := cpuTime() - c0
				reportPerToken(b, n, cpu)
				reportRate(b, flops, cpu, pw, pc)
			})
		}
	}
}

// BenchmarkDecode times tokens decode steps after a prompt of ctx tokens
// (the prefill is not timed): with full attention each step reads the
// whole KV cache, so steps slow as the context grows.
func BenchmarkDecode(b *testing.B) {
	for _, shape := range benchShapes() {
		ctxs := []int{512}
		if shape == "medium" {
			ctxs = []int{512, 8192}
		}
		for _, ctxLen := range ctxs {
			for _, n := range []int{16, 64, 256} {
				if ctxLen > 512 && n != 64 {
					continue // each run prefills the context first
				}
				benchDecode(b, shape, ctxLen, n)
			}
		}
	}
}

func benchDecode(b *testing.B, shape string, ctxLen, n int) {
	b.Run(fmt.Sprintf("shape=%s/ctx=%d/tokens=%d", shape, ctxLen, n), func(b *testing.B) {
		d, ids := benchDecoder(b, shape, ctxLen)
		var flops int64
		var cpu time.Duration
		pw, pc := peak()
		b.ResetTimer()
		for b.Loop() {
			b.StopTimer()
			s, err := d.NewSession(len(ids) + n)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Prefill(context.Background(), ids); err != nil {
				b.Fatal(err)
			}
			f0 := s.Stats().FLOPs
			c0 := cpuTime()
			b.StartTimer()
			next := ids[len(ids)-1]
			for range n {
				if next, err = s.Step(next); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			cpu += cpuTime() - c0
			flops += s.Stats().FLOPs - f0
			b.StartTimer()
		}
		reportPerToken(b, n, cpu)
		reportRate(b, flops, cpu, pw, pc)
	})
}

// benchDecoder loads decoder shape on a pool of its own, closed when b
// ends, and returns it with n token ids to feed it.
func benchDecoder(b *testing.B, shape string, n int) (*Decoder, []int32) {
	b.Helper()
	pool := NewPool(0)
	b.Cleanup(pool.Close)
	sh, err := LookupDecoder(shape)
	if err != nil {
		b.Fatal(err)
	}
	d, err := NewDecoder(sh, 1, pool)
	if err != nil {
		b.Fatal(err)
	}
	d.Load()
	return d, benchIDs(n, sh.Vocab)
}

// reportPerToken reports the wall and CPU time per token, for n tokens an
// iteration and cpu spent in all of them.
func reportPerToken(b *testing.B, n int, cpu time.Duration) {
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)/float64(n)*1e9, "ns/token")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(n), "cpu-ns/token")
}

// BenchmarkClassify times the encoder on inputs of each length.
func BenchmarkClassify(b *testing.B) {
	shapes := []string{"small"}
	if *realShapes {
		shapes = append(shapes, "prompt-guard-86m")
	}
	for _, shape := range shapes {
		for _, n := range []int{64, 512} {
			b.Run(fmt.Sprintf("shape=%s/tokens=%d", shape, n), func(b *testing.B) {
				pool := NewPool(0)
				defer pool.Close()
				sh, _ := LookupEncoder(shape)
				e, err := NewEncoder(sh, 1, pool)
				if err != nil {
					b.Fatal(err)
				}
				e.Load()
				ids := benchIDs(n, sh.Vocab)
				var flops int64
				pw, pc := peak()
				b.ResetTimer()
				c0 := cpuTime()
				for b.Loop() {
					_, f, err := e.Classify(context.Background(), ids)
					if err != nil {
						b.Fatal(err)
					}
					flops += f
				}
				reportRate(b, flops, cpuTime()-c0, pw, pc)
			})
		}
	}
}

func benchIDs(n, vocab int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(numSpecial + (i*7919)%(vocab-numSpecial))
	}
	return ids
}

// BenchmarkTokenize encodes 128 KiB of English text.
func BenchmarkTokenize(b *testing.B) {
	tok := NewTokenizer(32000)
	var text []byte
	for len(text) < 128<<10 {
		text = append(text, english...)
	}
	s := string(text[:128<<10])
	ids := make([]int32, 0, len(s))
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		ids = tok.Encode(ids[:0], s)
	}
	b.ReportMetric(float64(len(s))/float64(len(ids)), "chars/token")
}
