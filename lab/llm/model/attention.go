package model

import "math"

// attnBlock is the tile size of the blocked (flash-style) attention: a block
// of up to attnBlock queries of one head meets a block of attnBlock keys as
// two small matrix products (scores = Q·Kᵀ, then acc += P·V) with an online
// softmax between them, so no buffer grows with the context and the inner
// loops run in the matmul kernel.
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
	scratch           []float32 // attnScratch(hd) floats per part
}

// attnScratch is how many floats one part of an attnJob needs for heads
// sharing a kv head in groups of group: gathered queries, scores, the
// transposed value block, the output accumulator, row maxima and sums.
func attnScratch(hd, group int) int {
	rows := group * attnBlock
	return rows*hd + rows*attnBlock + hd*attnBlock + rows*hd + 2*rows
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

// countFlops returns the floating-point operations of the attention proper:
// 2·hd for each score q·k and 2·hd for each p·v, over the keys each query
// sees (masked work in partial tiles is not counted).
func (a *attnJob) countFlops() int64 {
	var keys int64
	for t := 0; t < a.T; t++ {
		lo, hi := a.keyRange(t)
		keys += int64(hi - lo)
	}
	return 4 * keys * int64(a.hd) * int64(a.heads)
}

// run does the (kv head, query block) items of its share. The heads that
// share a kv head are stacked into one block of rows, so each key block's
// scores and weighted values are one matrix product for the whole group
// and each value block is transposed once.
func (a *attnJob) run(part, parts int) {
	qblocks := (a.T + attnBlock - 1) / attnBlock
	kvHeads := a.heads / a.group
	lo, hi := span(kvHeads*qblocks, part, parts, 1)
	hd := a.hd
	maxRows := a.group * attnBlock
	buf := a.scratch[part*attnScratch(hd, a.group) : (part+1)*attnScratch(hd, a.group)]
	take := func(n int) []float32 {
		v := buf[:n]
		buf = buf[n:]
		return v
	}
	qs, S, vt, acc := take(maxRows*hd), take(maxRows*attnBlock), take(hd*attnBlock), take(maxRows*hd)
	ms, ls := take(maxRows), take(maxRows)
	negInf := float32(math.Inf(-1))
	for it := lo; it < hi; it++ {
		g, qb := it%kvHeads, it/kvHeads
		t0 := qb * attnBlock
		t1 := min(t0+attnBlock, a.T)
		rows := t1 - t0
		R := rows * a.group // stacked row i*rows+r is head g*group+i, query t0+r
		for i := 0; i < a.group; i++ {
			h := g*a.group + i
			for r := 0; r < rows; r++ {
				copy(qs[(i*rows+r)*hd:(i*rows+r+1)*hd], a.q[(t0+r)*a.ldq+h*hd:(t0+r)*a.ldq+h*hd+hd])
			}
		}
		for i := range acc[:R*hd] {
			acc[i] = 0
		}
		for r := 0; r < R; r++ {
			ms[r], ls[r] = negInf, 0
		}
		klo, _ := a.keyRange(t0)
		_, khi := a.keyRange(t1 - 1)
		for b := klo; b < khi; b += attnBlock {
			e := min(b+attnBlock, khi)
			kb := e - b
			kbPad := (kb + 7) &^ 7
			// S[i][j] = q_i · k_{b+j}
			gemmNT(S, qs, a.k[b*a.ldk+g*hd:], nil, R, hd, 0, kb, attnBlock, hd, a.ldk, false)
			// Vᵀ for this block, zero-padded to a multiple of 8 keys.
			for j := 0; j < kbPad; j++ {
				if j < kb {
					vr := a.v[(b+j)*a.ldk+g*hd : (b+j)*a.ldk+g*hd+hd]
					for d, x := range vr {
						vt[d*attnBlock+j] = x
					}
				} else {
					for d := 0; d < hd; d++ {
						vt[d*attnBlock+j] = 0
					}
				}
			}
			for ri := 0; ri < R; ri++ {
				s := S[ri*attnBlock : ri*attnBlock+kbPad]
				qlo, qhi := a.keyRange(t0 + ri%rows)
				jlo, jhi := max(qlo-b, 0), min(qhi-b, kb)
				if jlo >= jhi {
					for j := range s {
						s[j] = 0
					}
					continue
				}
				m := ms[ri]
				for j := jlo; j < jhi; j++ {
					s[j] *= a.scale
					m = max(m, s[j])
				}
				if m > ms[ri] {
					c := expNeg(ms[ri] - m)
					ls[ri] *= c
					ar := acc[ri*hd : ri*hd+hd]
					for d := range ar {
						ar[d] *= c
					}
					ms[ri] = m
				}
				ls[ri] += expRow(s, jlo, jhi, m)
			}
			// acc[i][d] += sum_j P[i][j] · V[j][d]
			gemmNT(acc, S, vt, nil, R, kbPad, 0, hd, hd, attnBlock, attnBlock, true)
		}
		for i := 0; i < a.group; i++ {
			h := g*a.group + i
			for r := 0; r < rows; r++ {
				ri := i*rows + r
				out := a.out[(t0+r)*a.ldo+h*hd : (t0+r)*a.ldo+h*hd+hd]
				inv := 1 / ls[ri]
				for d, x := range acc[ri*hd : ri*hd+hd] {
					out[d] = x * inv
				}
			}
		}
	}
}

// expRow sets s[j] = e^(s[j]-m) for jlo <= j < jhi and 0 elsewhere, and
// returns the sum: the softmax's hot path, 8 lanes at a time in assembly
// where it can, expNeg otherwise.
func expRow(s []float32, jlo, jhi int, m float32) float32 {
	for j := range s {
		if j < jlo || j >= jhi {
			s[j] = 0
		}
	}
	var sum float32
	j := jlo
	if n := (jhi - jlo) &^ 7; simd && n > 0 {
		sum = expSub8(&s[jlo], n, m)
		j += n
	}
	for ; j < jhi; j++ {
		p := expNeg(s[j] - m)
		s[j] = p
		sum += p
	}
	return sum
}
