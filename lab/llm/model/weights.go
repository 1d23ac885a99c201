package model

import (
	"math"
	"runtime"
	"sync"
)

// Weights are drawn from a counter-based generator (SplitMix64 over the seed,
// the tensor's number and the element's chunk), so a tensor's values depend
// only on (seed, tensor, index) and filling can run on every core in any order.

const fillChunk = 1 << 16

func mix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// fillUniform fills dst with values uniform in [-scale, scale).
func fillUniform(dst []float32, seed uint64, tensor int, scale float32) {
	chunks := (len(dst) + fillChunk - 1) / fillChunk
	work := func(c int) {
		lo := c * fillChunk
		hi := min(lo+fillChunk, len(dst))
		s := mix64(seed ^ mix64(uint64(tensor)<<32|uint64(c)))
		for i := lo; i < hi; i++ {
			s += 0x9e3779b97f4a7c15
			z := s
			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
			z = (z ^ (z >> 27)) * 0x94d049bb133111eb
			z ^= z >> 31
			// 24 random bits to a float in [-1, 1).
			dst[i] = (float32(z>>40)*(1.0/(1<<23)) - 1) * scale
		}
	}
	if chunks < 4 {
		for c := 0; c < chunks; c++ {
			work(c)
		}
		return
	}
	var wg sync.WaitGroup
	n := runtime.GOMAXPROCS(0)
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for c := w; c < chunks; c += n {
				work(c)
			}
		}(w)
	}
	wg.Wait()
}

// tensors hands out seeded tensors, numbering them in creation order.
type tensors struct {
	seed uint64
	next int
}

// uniform returns n values uniform with the variance of a standard init for a
// layer with fanIn inputs (std 1/sqrt(fanIn)), so activations stay O(1).
func (t *tensors) uniform(n, fanIn int) []float32 {
	v := make([]float32, n)
	t.next++
	fillUniform(v, t.seed, t.next, float32(math.Sqrt(3/float64(fanIn))))
	return v
}

// around returns n values in [c-0.1, c+0.1): norm gains and biases.
func (t *tensors) around(n int, c float32) []float32 {
	v := make([]float32, n)
	t.next++
	fillUniform(v, t.seed, t.next, 0.1)
	for i := range v {
		v[i] += c
	}
	return v
}
