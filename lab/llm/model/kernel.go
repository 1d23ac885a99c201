package model

import (
	"math"
	"runtime"
	"sync"
)

// Pool runs the parts of a job on a fixed set of worker goroutines, so that
// matrix work uses every core without starting goroutines (or allocating)
// per token. One Pool serves every concurrent request of a model: parts of
// different requests interleave on the same workers.
type Pool struct {
	tasks   chan task
	workers int
	wg      sync.WaitGroup

	// mu makes Close wait for jobs in flight; after it, jobs run on the
	// caller alone instead of sending on a closed channel.
	mu     sync.RWMutex
	closed bool
}

type job interface {
	// run does part `part` of `parts` equal shares of the job.
	run(part, parts int)
}

type task struct {
	j           job
	part, parts int
	done        *sync.WaitGroup
}

// NewPool starts n workers (GOMAXPROCS when n <= 0).
func NewPool(n int) *Pool {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	p := &Pool{tasks: make(chan task, 64*n), workers: n}
	// The caller of Run does one share itself, so n-1 helpers fill n cores.
	for i := 0; i < n-1; i++ {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for t := range p.tasks {
				t.j.run(t.part, t.parts)
				t.done.Done()
			}
		}()
	}
	return p
}

// Workers returns how many goroutines share a job.
func (p *Pool) Workers() int { return p.workers }

// Close waits for jobs in flight and stops the workers. Jobs started
// afterwards still run, on their caller's goroutine.
func (p *Pool) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.tasks)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// run splits j into parts shares; flops is the job's size, used to keep small
// jobs on the calling goroutine where a hand-off would cost more than it saves.
func (p *Pool) run(j job, flops int, wg *sync.WaitGroup) {
	parts := p.workers
	if flops < 1<<17 || parts == 1 {
		j.run(0, 1)
		return
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		j.run(0, 1)
		return
	}
	wg.Add(parts - 1)
	for i := 1; i < parts; i++ {
		p.tasks <- task{j: j, part: i, parts: parts, done: wg}
	}
	j.run(0, parts)
	wg.Wait()
}

// span returns the [lo, hi) share `part` of `parts` of n items, rounded to
// multiples of align so that register tiles stay whole.
func span(n, part, parts, align int) (int, int) {
	blocks := (n + align - 1) / align
	lo := blocks * part / parts * align
	hi := blocks * (part + 1) / parts * align
	return min(lo, n), min(hi, n)
}

// matmulJob computes dst[t][n] = bias[n] + sum_k x[t][k]*w[n][k] for t < T,
// n < N: activations times the transpose of a row-major [out][in] weight.
// Shares split the output columns, so each worker streams its own rows of w.
type matmulJob struct {
	dst, x, w, bias []float32
	T, K, N         int
	ldd             int // row stride of dst
	accumulate      bool
}

func (m *matmulJob) run(part, parts int) {
	lo, hi := span(m.N, part, parts, 4)
	if lo < hi {
		gemmNT(m.dst, m.x, m.w, m.bias, m.T, m.K, lo, hi, m.ldd, m.K, m.K, m.accumulate)
	}
}

// gemmNT is the inner kernel. With AVX2 and FMA (and K a multiple of 8) it
// runs 2x4 tiles of (t, n) in assembly, eight 8-wide accumulators over k;
// otherwise gemmNTGo.
// Rows of x are ldx apart and rows of w ldw apart.
func gemmNT(dst, x, w, bias []float32, T, K, nlo, nhi, ldd, ldx, ldw int, acc bool) {
	if !simd || K%8 != 0 || K == 0 {
		gemmNTGo(dst, x, w, bias, T, K, nlo, nhi, ldd, ldx, ldw, acc)
		return
	}
	var out [8]float32
	n := nlo
	for ; n+4 <= nhi; n += 4 {
		w0 := w[n*ldw : n*ldw+K]
		w1 := w[(n+1)*ldw : (n+1)*ldw+K]
		w2 := w[(n+2)*ldw : (n+2)*ldw+K]
		w3 := w[(n+3)*ldw : (n+3)*ldw+K]
		for t := 0; t < T; t += 2 {
			x0 := x[t*ldx : t*ldx+K]
			x1 := x0
			if t+1 < T {
				x1 = x[(t+1)*ldx : (t+1)*ldx+K]
			}
			tile2x4(&x0[0], &x1[0], &w0[0], &w1[0], &w2[0], &w3[0], K, &out[0])
			store4(dst[t*ldd+n:t*ldd+n+4], bias, n, acc, out[0], out[1], out[2], out[3])
			if t+1 < T {
				store4(dst[(t+1)*ldd+n:(t+1)*ldd+n+4], bias, n, acc, out[4], out[5], out[6], out[7])
			}
		}
	}
	if n < nhi {
		gemmNTGo(dst, x, w, bias, T, K, n, nhi, ldd, ldx, ldw, acc)
	}
}

// gemmNTGo is the portable kernel: 4x4 register tiles over (t, n), the k
// loop innermost with 16 independent accumulators.
func gemmNTGo(dst, x, w, bias []float32, T, K, nlo, nhi, ldd, ldx, ldw int, acc bool) {
	n := nlo
	for ; n+4 <= nhi; n += 4 {
		w0 := w[n*ldw : n*ldw+K]
		w1 := w[(n+1)*ldw : (n+1)*ldw+K]
		w2 := w[(n+2)*ldw : (n+2)*ldw+K]
		w3 := w[(n+3)*ldw : (n+3)*ldw+K]
		t := 0
		for ; t+4 <= T; t += 4 {
			x0 := x[t*ldx : t*ldx+K]
			x1 := x[(t+1)*ldx : (t+1)*ldx+K]
			x2 := x[(t+2)*ldx : (t+2)*ldx+K]
			x3 := x[(t+3)*ldx : (t+3)*ldx+K]
			var c00, c01, c02, c03, c10, c11, c12, c13 float32
			var c20, c21, c22, c23, c30, c31, c32, c33 float32
			for k := range x0 {
				a0, a1, a2, a3 := x0[k], x1[k], x2[k], x3[k]
				b0, b1, b2, b3 := w0[k], w1[k], w2[k], w3[k]
				c00 += a0 * b0
				c01 += a0 * b1
				c02 += a0 * b2
				c03 += a0 * b3
				c10 += a1 * b0
				c11 += a1 * b1
				c12 += a1 * b2
				c13 += a1 * b3
				c20 += a2 * b0
				c21 += a2 * b1
				c22 += a2 * b2
				c23 += a2 * b3
				c30 += a3 * b0
				c31 += a3 * b1
				c32 += a3 * b2
				c33 += a3 * b3
			}
			store4(dst[t*ldd+n:t*ldd+n+4], bias, n, acc, c00, c01, c02, c03)
			store4(dst[(t+1)*ldd+n:(t+1)*ldd+n+4], bias, n, acc, c10, c11, c12, c13)
			store4(dst[(t+2)*ldd+n:(t+2)*ldd+n+4], bias, n, acc, c20, c21, c22, c23)
			store4(dst[(t+3)*ldd+n:(t+3)*ldd+n+4], bias, n, acc, c30, c31, c32, c33)
		}
		for ; t < T; t++ {
			x0 := x[t*ldx : t*ldx+K]
			var c0, c1, c2, c3 float32
			for k := range x0 {
				a := x0[k]
				c0 += a * w0[k]
				c1 += a * w1[k]
				c2 += a * w2[k]
				c3 += a * w3[k]
			}
			store4(dst[t*ldd+n:t*ldd+n+4], bias, n, acc, c0, c1, c2, c3)
		}
	}
	for ; n < nhi; n++ {
		wn := w[n*ldw : n*ldw+K]
		for t := 0; t < T; t++ {
			v := dot(x[t*ldx:t*ldx+K], wn)
			if bias != nil {
				v += bias[n]
			}
			if acc {
				dst[t*ldd+n] += v
			} else {
				dst[t*ldd+n] = v
			}
		}
	}
}

func store4(d, bias []float32, n int, acc bool, c0, c1, c2, c3 float32) {
	d = d[:4]
	if bias != nil {
		b := bias[n : n+4]
		c0 += b[0]
		c1 += b[1]
		c2 += b[2]
		c3 += b[3]
	}
	if acc {
		d[0] += c0
		d[1] += c1
		d[2] += c2
		d[3] += c3
		return
	}
	d[0], d[1], d[2], d[3] = c0, c1, c2, c3
}

// dot returns the inner product of a and b (len(b) >= len(a)).
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	if simd && len(a)%8 == 0 && len(a) > 0 {
		return dot8(&a[0], &b[0], len(a))
	}
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy adds a*x to y.
func axpy(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	if simd && len(y)%8 == 0 && len(y) > 0 {
		axpy8(&y[0], a, &x[0], len(y))
		return
	}
	for i := range y {
		y[i] += a * x[i]
	}
}

func rmsnorm(dst, x, g []float32, eps float32) {
	var ss float32
	for _, v := range x {
		ss += v * v
	}
	inv := float32(1 / math.Sqrt(float64(ss/float32(len(x))+eps)))
	g = g[:len(x)]
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = v * inv * g[i]
	}
}

func layernorm(x, g, b []float32, eps float32) {
	var mean float32
	for _, v := range x {
		mean += v
	}
	mean /= float32(len(x))
	var vr float32
	for _, v := range x {
		d := v - mean
		vr += d * d
	}
	inv := float32(1 / math.Sqrt(float64(vr/float32(len(x))+eps)))
	g, b = g[:len(x)], b[:len(x)]
	for i, v := range x {
		x[i] = (v-mean)*inv*g[i] + b[i]
	}
}

func silu(v float32) float32 { return v / (1 + float32(math.Exp(float64(-v)))) }

func gelu(v float32) float32 {
	return 0.5 * v * (1 + float32(math.Tanh(0.7978845608*float64(v+0.044715*v*v*v))))
}

func expf(v float32) float32 { return float32(math.Exp(float64(v))) }

// expNeg returns e^x for x <= 0 in float32 arithmetic, to about 2e-7
// relative error: the softmax's exponentials, where math.Exp's float64
// path costs more than the dot products around it. x = k*ln2 + r with
// 0 <= r < ln2; e^r by its Taylor series to degree 8; 2^k by the exponent bits.
func expNeg(x float32) float32 {
	if x < -87 {
		return 0
	}
	// ln2 split in two (Cody-Waite) so that x - k*ln2 loses no precision.
	const log2e, ln2hi, ln2lo = 1.4426950408889634, 0.693145751953125, 1.428606765330187e-06
	kf := x * log2e
	k := int32(kf)
	if float32(k) > kf {
		k--
	}
	r := (x - float32(k)*ln2hi) - float32(k)*ln2lo
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040+r*(1.0/40320))))))))
	return p * math.Float32frombits(uint32(k+127)<<23)
}
