package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
)

// ErrContextFull is returned when a sequence would outgrow its capacity.
var ErrContextFull = errors.New("context full")

// PrefillChunk is how many prompt tokens one forward pass of the prefill
// covers. Between chunks the session checks its context, so a cancelled
// request stops within one chunk's work.
const PrefillChunk = 64

// Decoder is a Qwen2-style decoder-only transformer: token embedding tied to
// the output head, per layer RMSNorm, grouped-query attention with rotary
// position embeddings and q/k/v biases, RMSNorm, SwiGLU MLP; a final RMSNorm.
// Its weights come from a seeded generator and are created on first use.
// A Decoder is safe for concurrent use; each sequence has its own Session.
type Decoder struct {
	shape DecoderShape
	seed  uint64
	tok   *Tokenizer
	pool  *Pool

	once sync.Once
	w    *decoderWeights
}

type decoderWeights struct {
	embed  []float32 // [vocab][hidden], also the output head
	layers []decoderLayer
	norm   []float32
	// ropeFreq[i] = theta^(-2i/hd)
	ropeFreq []float64
}

type decoderLayer struct {
	attnNorm []float32
	qkv      []float32 // [hidden+2*kvdim][hidden]
	qkvBias  []float32
	o        []float32 // [hidden][hidden]
	mlpNorm  []float32
	gateUp   []float32 // [2*intermediate][hidden]: gate rows, then up rows
	down     []float32 // [hidden][intermediate]
}

// NewDecoder returns a decoder of the given shape whose weights derive from
// seed. The pool runs its matrix work.
func NewDecoder(shape DecoderShape, seed int64, pool *Pool) (*Decoder, error) {
	if err := shape.validate(); err != nil {
		return nil, err
	}
	return &Decoder{shape: shape, seed: uint64(seed), tok: NewTokenizer(shape.Vocab), pool: pool}, nil
}

// Shape returns the decoder's geometry.
func (d *Decoder) Shape() DecoderShape { return d.shape }

// Tokenizer returns the tokenizer whose ids the decoder embeds.
func (d *Decoder) Tokenizer() *Tokenizer { return d.tok }

// Load creates the weights now rather than on the first request.
func (d *Decoder) Load() { d.weights() }

func (d *Decoder) weights() *decoderWeights {
	d.once.Do(func() {
		s := d.shape
		h, kv, in := s.Hidden, s.KVDim(), s.Intermediate
		t := &tensors{seed: d.seed ^ 0xdec0de}
		w := &decoderWeights{embed: t.uniform(s.Vocab*h, h), norm: t.around(h, 1)}
		for range s.Layers {
			w.layers = append(w.layers, decoderLayer{
				attnNorm: t.around(h, 1),
				qkv:      t.uniform((h+2*kv)*h, h),
				qkvBias:  t.around(h+2*kv, 0),
				o:        t.uniform(h*h, h),
				mlpNorm:  t.around(h, 1),
				gateUp:   t.uniform(2*in*h, h),
				down:     t.uniform(h*in, in),
			})
		}
		hd := s.HeadDim()
		for i := 0; i < hd/2; i++ {
			w.ropeFreq = append(w.ropeFreq, math.Pow(s.RopeTheta, -2*float64(i)/float64(hd)))
		}
		d.w = w
	})
	return d.w
}

// Session is one sequence's state: its KV cache and the buffers a forward
// pass needs, all allocated once when the session starts, so the decode loop
// does not allocate. A Session is not safe for concurrent use.
type Session struct {
	d   *Decoder
	w   *decoderWeights
	cap int
	pos int

	k, v [][]float32 // per layer [cap][kvdim]

	x, h, qkv, att, gu []float32 // [chunk][...]
	cos, sin           []float32 // [chunk][hd/2]
	logits             []float32

	mm matmulJob
	at attnJob
	wg sync.WaitGroup

	stats Stats
}

// Stats counts a session's work.
type Stats struct {
	PromptTokens int   // tokens run through prefill
	DecodeSteps  int   // single-token forward passes over the KV cache
	FLOPs        int64 // floating-point operations of matmuls and attention
}

// NewSession starts a sequence that can hold capacity positions.
func (d *Decoder) NewSession(capacity int) (*Session, error) {
	s := d.shape
	if capacity <= 0 || capacity > s.MaxContext {
		return nil, fmt.Errorf("session of %d positions (max %d): %w", capacity, s.MaxContext, ErrContextFull)
	}
	w := d.weights()
	h, kv, in, hd := s.Hidden, s.KVDim(), s.Intermediate, s.HeadDim()
	c := min(PrefillChunk, capacity)
	ss := &Session{
		d: d, w: w, cap: capacity,
		x: make([]float32, c*h), h: make([]float32, c*h),
		qkv: make([]float32, c*(h+2*kv)), att: make([]float32, c*h),
		gu:  make([]float32, c*2*in),
		cos: make([]float32, c*hd/2), sin: make([]float32, c*hd/2),
		logits: make([]float32, s.Vocab),
	}
	for range s.Layers {
		ss.k = append(ss.k, make([]float32, capacity*kv))
		ss.v = append(ss.v, make([]float32, capacity*kv))
	}
	ss.at.scratch = make([]float32, d.pool.Workers()*attnScratch(hd, s.Heads/s.KVHeads))
	return ss, nil
}

// Pos returns how many positions the KV cache holds.
func (s *Session) Pos() int { return s.pos }

// Stats returns the work done so far.
func (s *Session) Stats() Stats { return s.stats }

// Logits returns the output distribution's logits after the last forward pass.
func (s *Session) Logits() []float32 { return s.logits }

// Prefill runs the prompt through the model in chunks of PrefillChunk tokens,
// filling the KV cache, and returns the most likely next token.
func (s *Session) Prefill(ctx context.Context, ids []int32) (int32, error) {
	if len(ids) == 0 {
		return 0, errors.New("prefill: empty prompt")
	}
	if s.pos+len(ids) > s.cap {
		return 0, fmt.Errorf("prefill %d tokens at %d of %d: %w", len(ids), s.pos, s.cap, ErrContextFull)
	}
	for i := 0; i < len(ids); i += PrefillChunk {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		e := min(i+PrefillChunk, len(ids))
		s.forward(ids[i:e], e == len(ids))
	}
	s.stats.PromptTokens += len(ids)
	return argmax(s.logits), nil
}

// Step runs one decode step: token id at the next position, attending over
// the KV cache, and returns the most likely next token.
func (s *Session) Step(id int32) (int32, error) {
	if s.pos+1 > s.cap {
		return 0, fmt.Errorf("decode at %d of %d: %w", s.pos, s.cap, ErrContextFull)
	}
	var one [1]int32
	one[0] = id
	s.forward(one[:], true)
	s.stats.DecodeSteps++
	return argmax(s.logits), nil
}

func argmax(v []float32) int32 {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return int32(best)
}

// matmul runs dst[T][N] (+)= x[T][K]·w[N][K]ᵀ + bias on the pool.
func (s *Session) matmul(dst, x, w, bias []float32, T, K, N, ldd int, acc bool) {
	s.mm = matmulJob{dst: dst, x: x, w: w, bias: bias, T: T, K: K, N: N, ldd: ldd, accumulate: acc}
	f := 2 * T * K * N
	s.stats.FLOPs += int64(f)
	s.d.pool.run(&s.mm, f, &s.wg)
}

// forward runs tokens ids at positions pos.. through every layer, appending
// their keys and values to the cache; with logits set it also computes the
// output head for the last token.
func (s *Session) forward(ids []int32, logits bool) {
	sh := s.d.shape
	w := s.w
	T := len(ids)
	H, kv, I, hd := sh.Hidden, sh.KVDim(), sh.Intermediate, sh.HeadDim()
	ldq := H + 2*kv
	x := s.x[:T*H]
	for t, id := range ids {
		id = max(0, min(id, int32(sh.Vocab-1)))
		copy(x[t*H:(t+1)*H], w.embed[int(id)*H:int(id+1)*H])
	}
	half := hd / 2
	for t := 0; t < T; t++ {
		p := float64(s.pos + t)
		for i, f := range w.ropeFreq {
			sn, cs := math.Sincos(p * f)
			s.cos[t*half+i], s.sin[t*half+i] = float32(cs), float32(sn)
		}
	}
	for li := range w.layers {
		L := &w.layers[li]
		for t := 0; t < T; t++ {
			rmsnorm(s.h[t*H:(t+1)*H], x[t*H:(t+1)*H], L.attnNorm, sh.RMSEps)
		}
		s.matmul(s.qkv, s.h, L.qkv, L.qkvBias, T, H, ldq, ldq, false)
		kc, vc := s.k[li], s.v[li]
		for t := 0; t < T; t++ {
			row := s.qkv[t*ldq : (t+1)*ldq]
			cs, sn := s.cos[t*half:(t+1)*half], s.sin[t*half:(t+1)*half]
			for h := 0; h < sh.Heads; h++ {
				rope(row[h*hd:(h+1)*hd], cs, sn)
			}
			for g := 0; g < sh.KVHeads; g++ {
				rope(row[H+g*hd:H+(g+1)*hd], cs, sn)
			}
			p := s.pos + t
			copy(kc[p*kv:(p+1)*kv], row[H:H+kv])
			copy(vc[p*kv:(p+1)*kv], row[H+kv:H+2*kv])
		}
		s.at.q, s.at.k, s.at.v, s.at.out = s.qkv, kc, vc, s.att
		s.at.ldq, s.at.ldk, s.at.ldo = ldq, kv, H
		s.at.T, s.at.heads, s.at.group, s.at.hd = T, sh.Heads, sh.Heads/sh.KVHeads, hd
		s.at.p0, s.at.window, s.at.causal = s.pos, sh.Window, true
		s.at.scale = float32(1 / math.Sqrt(float64(hd)))
		f := s.at.countFlops()
		s.stats.FLOPs += f
		s.d.pool.run(&s.at, int(min(f, math.MaxInt32)), &s.wg)
		s.matmul(x, s.att, L.o, nil, T, H, H, H, true)

		for t := 0; t < T; t++ {
			rmsnorm(s.h[t*H:(t+1)*H], x[t*H:(t+1)*H], L.mlpNorm, sh.RMSEps)
		}
		s.matmul(s.gu, s.h, L.gateUp, nil, T, H, 2*I, 2*I, false)
		for t := 0; t < T; t++ {
			g := s.gu[t*2*I : t*2*I+I]
			u := s.gu[t*2*I+I : (t+1)*2*I]
			for i := range g {
				g[i] = silu(g[i]) * u[i]
			}
		}
		// The activations sit in the gate half of each row: stride 2I.
		s.matmulStrided(x, s.gu, L.down, T, I, H, 2*I)
	}
	s.pos += T
	if logits {
		last := x[(T-1)*H : T*H]
		rmsnorm(s.h[:H], last, w.norm, sh.RMSEps)
		s.matmul(s.logits, s.h[:H], w.embed, nil, 1, H, sh.Vocab, sh.Vocab, false)
	}
}

// matmulStrided is matmul accumulating into dst[T][N] from rows of x that
// are ldx apart (only the first K of each used): it packs them first.
func (s *Session) matmulStrided(dst, x, w []float32, T, K, N, ldx int) {
	// Pack in place: row t's first K values move to t*K. Row 0 is already
	// there, and t*K <= t*ldx, so moving rows in order never clobbers a
	// row not yet moved.
	for t := 1; t < T; t++ {
		copy(x[t*K:(t+1)*K], x[t*ldx:t*ldx+K])
	}
	s.matmul(dst, x, w, nil, T, K, N, N, true)
}

// rope rotates pairs (x[i], x[i+hd/2]) by the position's angles, as Qwen2's
// rotate_half does.
func rope(x, cos, sin []float32) {
	half := len(x) / 2
	a, b := x[:half], x[half:half*2]
	cos, sin = cos[:half], sin[:half]
	for i := range a {
		x0, x1 := a[i], b[i]
		a[i] = x0*cos[i] - x1*sin[i]
		b[i] = x0*sin[i] + x1*cos[i]
	}
}
