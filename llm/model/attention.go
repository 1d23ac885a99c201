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

// attnScratch is how many floats one part of an attnJob needs: scores, the
// transposed value block, the output accumulator, row maxima and sums.
func attnScratch(hd int) int {
	return attnBlock*attnBlock + hd*attnBlock + attnBlock*hd + 2*attnBlock
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

func (a *attnJob) run(part, parts int) {
	qblocks := (a.T + attnBlock - 1) / attnBlock
	lo, hi := span(a.heads*qblocks, part, parts, 1)
	hd := a.hd
	per := attnScratch(hd)
	buf := a.scratch[part*per : (part+1)*per]
	S := buf[:attnBlock*attnBlock]
	vt := buf[len(S) : len(S)+hd*attnBlock]
	acc := buf[len(S)+len(vt) : len(S)+len(vt)+attnBlock*hd]
	ms := buf[len(S)+len(vt)+len(acc) : len(S)+len(vt)+len(acc)+attnBlock]
	ls := buf[len(S)+len(vt)+len(acc)+attnBlock : per]
	negInf := float32(math.Inf(-1))
	for it := lo; it < hi; it++ {
		h, qb := it%a.heads, it/a.heads
		g := h / a.group
		t0 := qb * attnBlock
		t1 := min(t0+attnBlock, a.T)
		rows := t1 - t0
		klo, _ := a.keyRange(t0)
		_, khi := a.keyRange(t1 - 1)
		for i := range acc[:rows*hd] {
			acc[i] = 0
		}
		for r := 0; r < rows; r++ {
			ms[r], ls[r] = negInf, 0
		}
		q := a.q[t0*a.ldq+h*hd:]
		for b := klo; b < khi; b += attnBlock {
			e := min(b+attnBlock, khi)
			kb := e - b
			kbPad := (kb + 7) &^ 7
			// S[r][j] = q_r · k_{b+j}
			gemmNT(S, q, a.k[b*a.ldk+g*hd:], nil, rows, hd, 0, kb, attnBlock, a.ldq, a.ldk, false)
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
			for r := 0; r < rows; r++ {
				s := S[r*attnBlock : r*attnBlock+kbPad]
				qlo, qhi := a.keyRange(t0 + r)
				jlo, jhi := max(qlo-b, 0), min(qhi-b, kb)
				if jlo >= jhi {
					for j := range s {
						s[j] = 0
					}
					continue
				}
				m := ms[r]
				for j := jlo; j < jhi; j++ {
					s[j] *= a.scale
					m = max(m, s[j])
				}
				if m > ms[r] {
					c := expNeg(ms[r] - m)
					ls[r] *= c
					ar := acc[r*hd : r*hd+hd]
					for d := range ar {
						ar[d] *= c
					}
					ms[r] = m
				}
				ls[r] += expRow(s, jlo, jhi, m)
			}
			// acc[r][d] += sum_j P[r][j] · V[j][d]
			gemmNT(acc, S, vt, nil, rows, kbPad, 0, hd, hd, attnBlock, attnBlock, true)
		}
		for r := 0; r < rows; r++ {
			out := a.out[(t0+r)*a.ldo+h*hd : (t0+r)*a.ldo+h*hd+hd]
			inv := 1 / ls[r]
			for d, x := range acc[r*hd : r*hd+hd] {
				out[d] = x * inv
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
