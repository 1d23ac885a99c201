package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
)

// ErrTooLong is returned for an encoder input longer than its positions.
var ErrTooLong = errors.New("input too long")

// Encoder is a BERT-style encoder classifier of DeBERTa-v3-base's size, the
// architecture of Prompt-Guard: word and absolute position embeddings,
// LayerNorm, post-norm layers of multi-head self-attention and a GELU MLP, a
// tanh pooler over the first token and a linear head with softmax. It
// differs from DeBERTa in leaving out disentangled (relative-position)
// attention, which changes the attention arithmetic by a constant factor and
// not its shape. Weights come from a seeded generator, created on first use.
// An Encoder is safe for concurrent use.
type Encoder struct {
	shape EncoderShape
	seed  uint64
	tok   *Tokenizer
	pool  *Pool

	once sync.Once
	w    *encoderWeights
}

type encoderWeights struct {
	word, pos    []float32
	embG, embB   []float32
	layers       []encoderLayer
	poolW, poolB []float32
	headW, headB []float32
}

type encoderLayer struct {
	qkv, qkvB   []float32 // [3*hidden][hidden]
	o, oB       []float32
	ln1G, ln1B  []float32
	up, upB     []float32 // [intermediate][hidden]
	down, downB []float32 // [hidden][intermediate]
	ln2G, ln2B  []float32
}

// NewEncoder returns an encoder of the given shape whose weights derive from seed.
func NewEncoder(shape EncoderShape, seed int64, pool *Pool) (*Encoder, error) {
	if err := shape.validate(); err != nil {
		return nil, err
	}
	return &Encoder{shape: shape, seed: uint64(seed), tok: NewTokenizer(shape.Vocab), pool: pool}, nil
}

// Shape returns the encoder's geometry.
func (e *Encoder) Shape() EncoderShape { return e.shape }

// Tokenizer returns the tokenizer whose ids the encoder embeds.
func (e *Encoder) Tokenizer() *Tokenizer { return e.tok }

// Load creates the weights now rather than on the first request.
func (e *Encoder) Load() { e.weights() }

func (e *Encoder) weights() *encoderWeights {
	e.once.Do(func() {
		s := e.shape
		h, in, nl := s.Hidden, s.Intermediate, len(s.Labels)
		t := &tensors{seed: e.seed ^ 0xe4c0de}
		w := &encoderWeights{
			word: t.uniform(s.Vocab*h, h), pos: t.uniform(s.MaxPositions*h, h),
			embG: t.around(h, 1), embB: t.around(h, 0),
		}
		for range s.Layers {
			w.layers = append(w.layers, encoderLayer{
				qkv: t.uniform(3*h*h, h), qkvB: t.around(3*h, 0),
				o: t.uniform(h*h, h), oB: t.around(h, 0),
				ln1G: t.around(h, 1), ln1B: t.around(h, 0),
				up: t.uniform(in*h, h), upB: t.around(in, 0),
				down: t.uniform(h*in, in), downB: t.around(h, 0),
				ln2G: t.around(h, 1), ln2B: t.around(h, 0),
			})
		}
		w.poolW, w.poolB = t.uniform(h*h, h), t.around(h, 0)
		w.headW, w.headB = t.uniform(nl*h, h), t.around(nl, 0)
		e.w = w
	})
	return e.w
}

// Encode returns the ids the classifier sees for text: [CLS] text [SEP].
func (e *Encoder) Encode(text string) []int32 {
	ids := []int32{TokCLS}
	ids = e.tok.Encode(ids, text)
	return append(ids, TokSEP)
}

// Classify runs ids (at most MaxPositions of them) through the encoder and
// returns the label logits (see Softmax) and the floating-point operations
// it took.
// It checks ctx between layers.
func (e *Encoder) Classify(ctx context.Context, ids []int32) ([]float32, int64, error) {
	s := e.shape
	T := len(ids)
	if T == 0 {
		return nil, 0, errors.New("classify: no tokens")
	}
	if T > s.MaxPositions {
		return nil, 0, fmt.Errorf("classify %d tokens (max %d): %w", T, s.MaxPositions, ErrTooLong)
	}
	w := e.weights()
	H, I, hd := s.Hidden, s.Intermediate, s.HeadDim()
	x := make([]float32, T*H)
	qkv := make([]float32, T*3*H)
	att := make([]float32, T*H)
	up := make([]float32, T*I)
	var (
		mm    matmulJob
		at    attnJob
		wg    sync.WaitGroup
		flops int64
	)
	matmul := func(dst, x, w, bias []float32, T, K, N int) {
		mm = matmulJob{dst: dst, x: x, w: w, bias: bias, T: T, K: K, N: N, ldd: N}
		f := 2 * T * K * N
		flops += int64(f)
		e.pool.run(&mm, f, &wg)
	}
	scratch := make([]float32, e.pool.Workers()*attnScratch(hd, 1))

	for t, id := range ids {
		id = max(0, min(id, int32(s.Vocab-1)))
		row := x[t*H : (t+1)*H]
		wr, pr := w.word[int(id)*H:int(id+1)*H], w.pos[t*H:(t+1)*H]
		for i := range row {
			row[i] = wr[i] + pr[i]
		}
		layernorm(row, w.embG, w.embB, s.LNEps)
	}
	for li := range w.layers {
		if err := ctx.Err(); err != nil {
			return nil, flops, err
		}
		L := &w.layers[li]
		matmul(qkv, x, L.qkv, L.qkvB, T, H, 3*H)
		at = attnJob{
			q: qkv, k: qkv[H:], v: qkv[2*H:], out: att,
			ldq: 3 * H, ldk: 3 * H, ldo: H,
			T: T, heads: s.Heads, group: 1, hd: hd, nkeys: T,
			scale: float32(1 / math.Sqrt(float64(hd))), scratch: scratch,
		}
		f := at.countFlops()
		flops += f
		e.pool.run(&at, int(f), &wg)
		// x = LN(x + att·Oᵀ + b)
		mm = matmulJob{dst: x, x: att, w: L.o, bias: L.oB, T: T, K: H, N: H, ldd: H, accumulate: true}
		flops += int64(2 * T * H * H)
		e.pool.run(&mm, 2*T*H*H, &wg)
		for t := 0; t < T; t++ {
			layernorm(x[t*H:(t+1)*H], L.ln1G, L.ln1B, s.LNEps)
		}
		matmul(up, x, L.up, L.upB, T, H, I)
		for i, v := range up {
			up[i] = gelu(v)
		}
		mm = matmulJob{dst: x, x: up, w: L.down, bias: L.downB, T: T, K: I, N: H, ldd: H, accumulate: true}
		flops += int64(2 * T * I * H)
		e.pool.run(&mm, 2*T*I*H, &wg)
		for t := 0; t < T; t++ {
			layernorm(x[t*H:(t+1)*H], L.ln2G, L.ln2B, s.LNEps)
		}
	}
	// Pooler over the first ([CLS]) token, then the classification head.
	pooled := att[:H]
	matmul(pooled, x[:H], w.poolW, w.poolB, 1, H, H)
	for i, v := range pooled {
		pooled[i] = float32(math.Tanh(float64(v)))
	}
	nl := len(s.Labels)
	logits := make([]float32, nl)
	matmul(logits, pooled, w.headW, w.headB, 1, H, nl)
	return logits, flops, nil
}

// Softmax turns logits into probabilities in place and returns them.
func Softmax(v []float32) []float32 {
	m := v[0]
	for _, x := range v {
		m = max(m, x)
	}
	var sum float32
	for i, x := range v {
		v[i] = expf(x - m)
		sum += v[i]
	}
	for i := range v {
		v[i] /= sum
	}
	return v
}
