package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Sentinel errors of the LLM client; callers branch on them.
var (
	// ErrEndpoint: the endpoint could not be reached or refused the request
	// (connection refused, HTTP error status, unknown model).
	ErrEndpoint = errors.New("llm endpoint failed")
	// ErrStreamCut: the stream ended before the model finished (no
	// finish_reason, no [DONE]): the server died or the connection dropped.
	ErrStreamCut = errors.New("llm stream cut before the end")
	// ErrStreamStalled: no chunk arrived within the stall timeout.
	ErrStreamStalled = errors.New("llm stream stalled")
	// ErrBadStream: a chunk was not valid JSON of the chat-completion shape.
	ErrBadStream = errors.New("llm stream malformed")
)

// LLM is a thin wrapper over go-openai's streaming chat completion that
// timestamps the stream the way serving benchmarks do.
type LLM struct {
	client  *openai.Client
	model   string
	baseURL string
	request time.Duration
	stall   time.Duration
}

// LLMOptions configures NewLLM; zero timeouts mean the defaults.
type LLMOptions struct {
	BaseURL, APIKey, Model string
	RequestTimeout         time.Duration
	StallTimeout           time.Duration
	// HTTPClient replaces the default client (whose dialer gives up after 10 s).
	HTTPClient *http.Client
	// ExtraBody holds fields added to every chat request's JSON body that
	// go-openai's request type has no field for, such as llama.cpp's
	// {"cache_prompt": false}. Fields the request already has are kept.
	ExtraBody map[string]any
}

// NewLLM returns a client for an OpenAI-compatible endpoint.
func NewLLM(o LLMOptions) *LLM {
	cfg := openai.DefaultConfig(o.APIKey)
	cfg.BaseURL = strings.TrimRight(o.BaseURL, "/")
	hc := &http.Client{Transport: &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		ResponseHeaderTimeout: 0, // a long prefill may precede the headers; RequestTimeout bounds it
		MaxIdleConnsPerHost:   8,
	}}
	if o.HTTPClient != nil {
		hc = o.HTTPClient
	}
	if len(o.ExtraBody) > 0 {
		c := *hc
		if c.Transport == nil {
			c.Transport = http.DefaultTransport
		}
		c.Transport = &extraBody{base: c.Transport, fields: o.ExtraBody}
		hc = &c
	}
	cfg.HTTPClient = hc
	l := &LLM{client: openai.NewClientWithConfig(cfg), model: o.Model, baseURL: cfg.BaseURL,
		request: o.RequestTimeout, stall: o.StallTimeout}
	if l.request <= 0 {
		l.request = DefaultRequestTimeout
	}
	if l.stall <= 0 {
		l.stall = DefaultStallTimeout
	}
	return l
}

// Model returns the model name requests use.
func (l *LLM) Model() string { return l.model }

// BaseURL returns the endpoint.
func (l *LLM) BaseURL() string { return l.baseURL }

// Client returns the underlying go-openai client (the alignment judge uses it).
func (l *LLM) Client() *openai.Client { return l.client }

// ResolveModel sets the model to the first one the endpoint lists when none
// was configured, and checks that the endpoint answers at all.
func (l *LLM) ResolveModel(ctx context.Context) error {
	if l.model != "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ms, err := l.client.ListModels(ctx)
	if err != nil {
		return fmt.Errorf("%w: list models at %s: %v", ErrEndpoint, l.baseURL, err)
	}
	if len(ms.Models) == 0 {
		return fmt.Errorf("%w: %s lists no models; set VLLM_MODEL", ErrEndpoint, l.baseURL)
	}
	l.model = ms.Models[0].ID
	return nil
}

// extraBody adds fields to the JSON body of chat-completion requests.
type extraBody struct {
	base   http.RoundTripper
	fields map[string]any
}

func (e *extraBody) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/chat/completions") || req.Body == nil {
		return e.base.RoundTrip(req)
	}
	raw, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, fmt.Errorf("extra body fields: %w", err)
	}
	for k, v := range e.fields {
		if _, ok := body[k]; ok {
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("extra body field %s: %w", k, err)
		}
		body[k] = b
	}
	if raw, err = json.Marshal(body); err != nil {
		return nil, fmt.Errorf("extra body fields: %w", err)
	}
	r := req.Clone(req.Context())
	r.Body = io.NopCloser(bytes.NewReader(raw))
	r.ContentLength = int64(len(raw))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil }
	return e.base.RoundTrip(r)
}

// Timings is llama.cpp's per-request `timings` object, when the server sends it.
type Timings struct {
	CacheN              int     `json:"cache_n"`
	PromptN             int     `json:"prompt_n"`
	PromptMS            float64 `json:"prompt_ms"`
	PromptPerTokenMS    float64 `json:"prompt_per_token_ms"`
	PromptPerSecond     float64 `json:"prompt_per_second"`
	PredictedN          int     `json:"predicted_n"`
	PredictedMS         float64 `json:"predicted_ms"`
	PredictedPerTokenMS float64 `json:"predicted_per_token_ms"`
	PredictedPerSecond  float64 `json:"predicted_per_second"`
}

// chunk is one SSE event: the OpenAI shape plus llama.cpp's extension.
type chunk struct {
	openai.ChatCompletionStreamResponse
	Timings *Timings `json:"timings,omitempty"`
}

// Stream is one streamed completion with its timestamps. Sent is taken just
// before the request is written, First at the first chunk carrying output
// (content or a tool-call fragment), Last at the last such chunk, Finished
// at the chunk carrying the finish reason (the tool call is complete), End
// when the stream ended ([DONE], after the usage chunk).
type Stream struct {
	Content      string
	ToolCalls    []openai.ToolCall
	FinishReason openai.FinishReason
	Usage        *openai.Usage
	Timings      *Timings
	// Chunks counts the chunks that carried output.
	Chunks int
	// Gaps are the times between consecutive output chunks: the
	// inter-token latencies when the server streams a token per chunk (as
	// vLLM, llama.cpp and the reference server do).
	Gaps []time.Duration

	Sent, First, Last, Finished, End time.Time
}

// TTFT is the time to first output token.
func (s *Stream) TTFT() time.Duration { return s.First.Sub(s.Sent) }

// Decode is the time from the first to the last output token.
func (s *Stream) Decode() time.Duration { return s.Last.Sub(s.First) }

// CompletionTokens is the server's count, or the output chunks when the
// server reported no usage.
func (s *Stream) CompletionTokens() int {
	if s.Usage != nil {
		return s.Usage.CompletionTokens
	}
	return s.Chunks
}

// PromptTokens is the server's count (0 when it reported none).
func (s *Stream) PromptTokens() int {
	if s.Usage != nil {
		return s.Usage.PromptTokens
	}
	return 0
}

// CachedTokens is the number of prompt tokens the server took from its
// prefix cache instead of prefilling, and whether the server said:
// usage.prompt_tokens_details.cached_tokens (vLLM, OpenAI) or llama.cpp's
// timings.cache_n.
func (s *Stream) CachedTokens() (int, bool) {
	if s.Usage != nil && s.Usage.PromptTokensDetails != nil {
		return s.Usage.PromptTokensDetails.CachedTokens, true
	}
	if s.Timings != nil {
		return s.Timings.CacheN, true
	}
	return 0, false
}

// stamp is the per-chunk bookkeeping of the stream loop, kept in one small
// function so that its own cost can be measured (see StampCost).
func (s *Stream) stamp(now time.Time) {
	if s.Chunks == 0 {
		s.First = now
	} else {
		s.Gaps = append(s.Gaps, now.Sub(s.Last))
	}
	s.Last = now
	s.Chunks++
}

// ChatStream sends req with streaming and usage on, and reads the stream to
// its end, collecting content and tool calls. It never waits longer than the
// request timeout in all, nor the stall timeout between chunks.
func (l *LLM) ChatStream(ctx context.Context, req openai.ChatCompletionRequest) (*Stream, error) {
	req = l.streamRequest(req)
	ctx, cancel := context.WithTimeoutCause(ctx, l.request, fmt.Errorf("%w: no end within %v", ErrStreamStalled, l.request))
	defer cancel()
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	stallErr := fmt.Errorf("%w: no chunk for %v", ErrStreamStalled, l.stall)
	// The first chunk may wait for the whole prefill: only the request
	// timeout bounds it. After that the stall watchdog runs.
	var watchdog *time.Timer
	defer func() {
		if watchdog != nil {
			watchdog.Stop()
		}
	}()

	s := &Stream{Gaps: make([]time.Duration, 0, 256)}
	s.Sent = time.Now()
	stream, err := l.client.CreateChatCompletionStream(ctx, req)
	if err != nil {
		if c := context.Cause(ctx); c != nil && ctx.Err() != nil {
			return nil, c
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrEndpoint, l.baseURL, err)
	}
	defer stream.Close()

	acc := &accumulator{s: s, calls: map[int]*openai.ToolCall{}}
	for {
		raw, err := stream.RecvRaw()
		now := time.Now()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, recvError(ctx, err)
		}
		if watchdog == nil {
			watchdog = time.AfterFunc(l.stall, func() { stop(stallErr) })
		} else {
			watchdog.Reset(l.stall)
		}
		if err := acc.add(raw, now); err != nil {
			return nil, err
		}
	}
	s.End = time.Now()
	return acc.finish()
}

// streamRequest is req as ChatStream sends it: this LLM's model, streamed
// with usage.
func (l *LLM) streamRequest(req openai.ChatCompletionRequest) openai.ChatCompletionRequest {
	req.Model = l.model
	if req.MaxTokens > 0 && reasoningModel(l.model) {
		// go-openai refuses max_tokens for OpenAI's reasoning models, which
		// read max_completion_tokens anyway.
		req.MaxTokens = 0
	}
	req.Stream = true
	req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	return req
}

// recvError says why reading the stream failed: the request's own time
// bounds (the cause), the endpoint's error, a malformed or a cut stream.
func recvError(ctx context.Context, err error) error {
	if c := context.Cause(ctx); c != nil && ctx.Err() != nil {
		return c
	}
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) {
		return fmt.Errorf("%w: error in stream: %v", ErrEndpoint, err)
	}
	if errors.Is(err, openai.ErrTooManyEmptyStreamMessages) {
		return fmt.Errorf("%w: %v", ErrBadStream, err)
	}
	return fmt.Errorf("%w: %v", ErrStreamCut, err)
}

// accumulator collects a stream's chunks into its Stream: content, tool
// calls by index (their fragments joined), usage, timings, the finish
// reason and the output chunks' times.
type accumulator struct {
	s       *Stream
	calls   map[int]*openai.ToolCall
	content strings.Builder
}

// add takes one chunk, received at now.
func (a *accumulator) add(raw []byte, now time.Time) error {
	var c chunk
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("%w: %v: %.80q", ErrBadStream, err, raw)
	}
	s := a.s
	if c.Usage != nil {
		s.Usage = c.Usage
	}
	if c.Timings != nil {
		s.Timings = c.Timings
	}
	out := false
	for _, ch := range c.Choices {
		if ch.Delta.Content != "" {
			a.content.WriteString(ch.Delta.Content)
			out = true
		}
		for _, tc := range ch.Delta.ToolCalls {
			a.addToolCall(tc)
			out = true
		}
		if ch.FinishReason != "" && s.FinishReason == "" {
			s.FinishReason = ch.FinishReason
			s.Finished = now
		}
	}
	if out {
		s.stamp(now)
	}
	return nil
}

// addToolCall joins a tool-call fragment to the call of its index.
func (a *accumulator) addToolCall(tc openai.ToolCall) {
	idx := 0
	if tc.Index != nil {
		idx = *tc.Index
	}
	acc, ok := a.calls[idx]
	if !ok {
		acc = &openai.ToolCall{Type: openai.ToolTypeFunction}
		a.calls[idx] = acc
	}
	if tc.ID != "" {
		acc.ID = tc.ID
	}
	if tc.Function.Name != "" {
		acc.Function.Name += tc.Function.Name
	}
	acc.Function.Arguments += tc.Function.Arguments
}

// finish completes the Stream once it ended: a stream without a finish
// reason was cut (go-openai reports a connection closed without [DONE]
// as a plain EOF, like [DONE] itself).
func (a *accumulator) finish() (*Stream, error) {
	s := a.s
	if s.FinishReason == "" {
		return nil, fmt.Errorf("%w: no finish_reason after %d chunks", ErrStreamCut, s.Chunks)
	}
	s.Content = a.content.String()
	idx := make([]int, 0, len(a.calls))
	for i := range a.calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		s.ToolCalls = append(s.ToolCalls, *a.calls[i])
	}
	if s.Chunks == 0 {
		s.First, s.Last = s.End, s.End
	}
	return s, nil
}

// reasoningModel reports whether go-openai refuses max_tokens for model
// (its reasoning-model families).
func reasoningModel(model string) bool {
	for _, p := range []string{"o1", "o3", "o4", "gpt-5", "gpt-6"} {
		if strings.HasPrefix(model, p) {
			return true
		}
	}
	return false
}

// StampCost measures what the per-chunk bookkeeping of ChatStream costs (the
// clock read, the stall watchdog's reset and the stamp), by running the same
// code n times. The benchmarks report it against the phases it
// measures.
func StampCost(n int) time.Duration {
	s := Stream{Gaps: make([]time.Duration, 0, n)}
	t := time.AfterFunc(time.Hour, func() {})
	defer t.Stop()
	start := time.Now()
	for range n {
		now := time.Now()
		t.Reset(time.Hour) // the stall watchdog's reset, as in ChatStream
		s.stamp(now)
	}
	return time.Since(start) / time.Duration(max(n, 1))
}
