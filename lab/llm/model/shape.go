package model

import (
	"errors"
	"fmt"
	"sort"
)

// ErrUnknownShape is returned for a shape name that is not defined.
var ErrUnknownShape = errors.New("unknown shape")

// DecoderShape is the geometry of a Qwen2-style decoder.
type DecoderShape struct {
	Name         string
	Hidden       int
	Layers       int
	Heads        int
	KVHeads      int
	Intermediate int
	Vocab        int
	// MaxContext is the most positions (prompt plus generated) a sequence may hold.
	MaxContext int
	// Window, when positive, is the sliding attention window (Qwen2's
	// use_sliding_window / sliding_window, as in Mistral): each query attends to
	// the last Window keys. Zero means full causal attention.
	Window    int
	RopeTheta float64
	RMSEps    float32
}

// HeadDim is the size of one attention head.
func (s DecoderShape) HeadDim() int { return s.Hidden / s.Heads }

// KVDim is the width of the key (and value) projection.
func (s DecoderShape) KVDim() int { return s.KVHeads * s.HeadDim() }

// Params is the number of weights, counting the tied embedding once.
func (s DecoderShape) Params() int64 {
	h, kv, in := int64(s.Hidden), int64(s.KVDim()), int64(s.Intermediate)
	layer := h*(h+2*kv) + (h + 2*kv) + h*h + 3*h*in + 2*h
	return int64(s.Vocab)*h + int64(s.Layers)*layer + h
}

func (s DecoderShape) validate() error {
	switch {
	case s.Hidden <= 0 || s.Layers <= 0 || s.Heads <= 0 || s.KVHeads <= 0 || s.Intermediate <= 0:
		return fmt.Errorf("shape %q: sizes must be positive", s.Name)
	case s.Hidden%s.Heads != 0 || s.Heads%s.KVHeads != 0 || s.HeadDim()%2 != 0:
		return fmt.Errorf("shape %q: hidden %d, heads %d, kv heads %d do not divide", s.Name, s.Hidden, s.Heads, s.KVHeads)
	case s.Vocab < 1024 || s.MaxContext < 16:
		return fmt.Errorf("shape %q: vocab or context too small", s.Name)
	}
	return nil
}

// EncoderShape is the geometry of a BERT/DeBERTa-style encoder classifier.
type EncoderShape struct {
	Name         string
	Hidden       int
	Layers       int
	Heads        int
	Intermediate int
	Vocab        int
	MaxPositions int
	Labels       []string
	LNEps        float32
}

// HeadDim is the size of one attention head.
func (s EncoderShape) HeadDim() int { return s.Hidden / s.Heads }

// Params is the number of weights.
func (s EncoderShape) Params() int64 {
	h, in := int64(s.Hidden), int64(s.Intermediate)
	layer := 4*h*h + 4*h + 2*h*in + in + h + 4*h
	return (int64(s.Vocab)+int64(s.MaxPositions))*h + 2*h + int64(s.Layers)*layer + h*h + h + h*int64(len(s.Labels)) + int64(len(s.Labels))
}

func (s EncoderShape) validate() error {
	switch {
	case s.Hidden <= 0 || s.Layers <= 0 || s.Heads <= 0 || s.Intermediate <= 0 || s.MaxPositions <= 0:
		return fmt.Errorf("shape %q: sizes must be positive", s.Name)
	case s.Hidden%s.Heads != 0:
		return fmt.Errorf("shape %q: hidden %d not divisible by heads %d", s.Name, s.Hidden, s.Heads)
	case s.Vocab < 1024 || len(s.Labels) < 2:
		return fmt.Errorf("shape %q: vocab too small or fewer than two labels", s.Name)
	}
	return nil
}

// Decoder shapes by name.
var decoderShapes = map[string]DecoderShape{
	// small keeps one agent iteration (a ~500-token plan request and an
	// answer request carrying up to 128 KiB of tool output, ~32k tokens) near
	// a second on 2 cores. Its sliding window bounds attention cost on long
	// prompts; the KV cache still holds the whole context.
	"small": {
		Name: "small", Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, Intermediate: 128,
		Vocab: 32000, MaxContext: 65536, Window: 128, RopeTheta: 1e6, RMSEps: 1e-6,
	},
	// medium is the benchmarks' default: 20.7M parameters, 83 MB of
	// float32 weights (most of it the 64k-token embedding, which is also
	// the output head every decode step reads), so its working set is
	// larger than a server CPU's last-level cache (32 MiB here) and each
	// decode step streams the weights from DRAM, as a real model's does.
	// Full causal attention: prefill grows super-linearly with the prompt
	// and each decode step slows with the context.
	"medium": {
		Name: "medium", Hidden: 256, Layers: 4, Heads: 4, KVHeads: 2, Intermediate: 1024,
		Vocab: 65536, MaxContext: 40960, RopeTheta: 1e6, RMSEps: 1e-6,
	},
	// qwen2.5-0.5b is Qwen2.5-0.5B-Instruct's geometry (config.json):
	// full attention over a 32k context.
	"qwen2.5-0.5b": {
		Name: "qwen2.5-0.5b", Hidden: 896, Layers: 24, Heads: 14, KVHeads: 2, Intermediate: 4864,
		Vocab: 151936, MaxContext: 32768, RopeTheta: 1e6, RMSEps: 1e-6,
	},
}

// Encoder shapes by name.
var encoderShapes = map[string]EncoderShape{
	"small": {
		Name: "small", Hidden: 64, Layers: 2, Heads: 2, Intermediate: 256,
		Vocab: 32000, MaxPositions: 512, Labels: []string{"BENIGN", "MALICIOUS"}, LNEps: 1e-7,
	},
	// prompt-guard-86m is Llama-Prompt-Guard-2-86M's geometry (mDeBERTa-v3-base).
	"prompt-guard-86m": {
		Name: "prompt-guard-86m", Hidden: 768, Layers: 12, Heads: 12, Intermediate: 3072,
		Vocab: 251000, MaxPositions: 512, Labels: []string{"BENIGN", "MALICIOUS"}, LNEps: 1e-7,
	},
}

// LookupDecoder returns the decoder shape with the given name.
func LookupDecoder(name string) (DecoderShape, error) {
	s, ok := decoderShapes[name]
	if !ok {
		return DecoderShape{}, fmt.Errorf("decoder %q (have %v): %w", name, names(decoderShapes), ErrUnknownShape)
	}
	return s, nil
}

// LookupEncoder returns the encoder shape with the given name.
func LookupEncoder(name string) (EncoderShape, error) {
	s, ok := encoderShapes[name]
	if !ok {
		return EncoderShape{}, fmt.Errorf("classifier %q (have %v): %w", name, names(encoderShapes), ErrUnknownShape)
	}
	s.Labels = append([]string(nil), s.Labels...)
	return s, nil
}

func names[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
