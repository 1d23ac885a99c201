package model

import "math"

// attnBlock is how many keys one step of the blocked (flash-style) attention
// scores at a time: scores live in a small per-worker buffer and the softmax
// is kept online, so no buffer grows with the context.
const attnBlock = 64

// attnJob computes softmax(q·kᵀ·scale)·v for T queries and every head.
// Query t of head h reads q[t*ldq + h*hd:], its kv head g = h/group reads keys
// k[j*ldk + g*hd:] and values v[j*ldk + g*hd:], and writes out[t*ldo + h*hd:].
// With causal set, query t sits at position p0+t and sees keys up to it (the
// last window of them when window > 0); otherwise every query sees keys
// [0, nkeys).
type attnJob struct {
	q, k, v, out      []float32
	ldq, ldk, ldo     int
	T, heads, group   int
	hd                int
	p0, window, nkeys int
	causal            bool
	scale             float32
	scratch           []float32 // per part: attnBlock scores + hd accumulator
	scratchPerPart    int
	flops             int64
}

func (a *attnJob) keyRange(t int) (int, int) {
	if !a.causal {
		return 0, a.nkeys
	}
	p := a.p0 + t
	lo := 0
	if a.window > 0 && p-a.window+1 > 0 {
		lo = p - a.window + 1
	}
	return lo, p + 1
}

// countFlops returns the multiply-adds (times 2) the job does: q·k and p·v.
func (a *attnJob) countFlops() int64 {
	var keys int64
	for t := 0; t < a.T; t++ {
		lo, hi := a.keyRange(t)
		keys += int64(hi - lo)
	}
	return 4 * keys * int64(a.hd) * int64(a.heads)
}

func (a *attnJob) run(part, parts int) {
	items := a.T * a.heads
	lo, hi := span(items, part, parts, 1)
	buf := a.scratch[part*a.scratchPerPart : (part+1)*a.scratchPerPart]
	scores := buf[:attnBlock]
	acc := buf[attnBlock : attnBlock+a.hd]
	hd := a.hd
	for it := lo; it < hi; it++ {
		t, h := it/a.heads, it%a.heads
		g := h / a.group
		q := a.q[t*a.ldq+h*hd : t*a.ldq+h*hd+hd]
		klo, khi := a.keyRange(t)
		for i := range acc {
			acc[i] = 0
		}
		m := float32(math.Inf(-1))
		var l float32
		for b := klo; b < khi; b += attnBlock {
			e := min(b+attnBlock, khi)
			s := scores[:e-b]
			bm := m
			for j := range s {
				off := (b+j)*a.ldk + g*hd
				s[j] = dot(q, a.k[off:off+hd]) * a.scale
				bm = max(bm, s[j])
			}
			if bm > m {
				c := expf(m - bm)
				l *= c
				for i := range acc {
					acc[i] *= c
				}
				m = bm
			}
			for j, sj := range s {
				p := expf(sj - m)
				l += p
				off := (b+j)*a.ldk + g*hd
				axpy(acc, p, a.v[off:off+hd])
			}
		}
		out := a.out[t*a.ldo+h*hd : t*a.ldo+h*hd+hd]
		inv := 1 / l
		for i, v := range acc {
			out[i] = v * inv
		}
	}
}
