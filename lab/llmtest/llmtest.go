// Package llmtest is a scripted OpenAI-compatible endpoint for tests: it
// streams chat completions in the real wire format (SSE chunks, tool-call
// deltas, a usage chunk, [DONE]), answers /v1/models, and serves the
// classifier shapes (TEI /predict, vLLM /classify). It answers at once, so
// benchmarks against it measure the client side only, and it can misbehave
// on purpose (cut a stream, stall, send garbage) to test error paths.
package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Fault makes the server misbehave.
type Fault int

// Faults.
const (
	None Fault = iota
	// NoTool answers the planning request with text, no tool call.
	NoTool
	// CutStream closes the connection in the middle of the answer.
	CutStream
	// Stall stops sending in the middle of the answer, connection open.
	Stall
	// Garbage sends a chunk that is not JSON.
	Garbage
	// HTTPError answers every request with 500.
	HTTPError
	// ToolAgain answers the turn after a tool result with another tool
	// call instead of an answer, as a model that loops does.
	ToolAgain
)

// Server is a scripted endpoint. Set fields before the first request.
type Server struct {
	*httptest.Server

	// Fault applies to chat completions (and, for HTTPError and Garbage,
	// to the classifier endpoints too).
	Fault Fault
	// Tool and Args are the tool call the planning answer makes. Args may
	// contain {{path}}: the first absolute path in the user's message.
	Tool, Args string
	// AnswerTokens is the number of chunks of the final answer (default 8).
	AnswerTokens int
	// Score returns the classifier's malicious probability for a text
	// (default 0.01).
	Score func(text string) float64
	// Timings adds llama.cpp's `timings` object to the answer's last chunk.
	Timings bool
	// CachedTokens, when positive, is reported as
	// usage.prompt_tokens_details.cached_tokens (and as timings.cache_n).
	CachedTokens int
	// Judge is the alignment judge's JSON answer for non-streamed requests
	// with a response_format (default: a conclusion of false).
	Judge string

	mu       sync.Mutex
	requests []openai.ChatCompletionRequest
	bodies   []map[string]any
	classify int
	release  chan struct{}
}

// New starts a server; close it with Close.
func New() *Server {
	s := &Server{Tool: "read_file", Args: `{"path":"{{path}}"}`, AnswerTokens: 8, release: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/models", s.models)
	mux.HandleFunc("/v1/chat/completions", s.chat)
	mux.HandleFunc("/predict", s.predict)
	mux.HandleFunc("/classify", s.classifyVLLM)
	mux.HandleFunc("/v1/classify", s.classifyVLLM)
	s.Server = httptest.NewServer(mux)
	return s
}

// Close unblocks stalled handlers and stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	select {
	case <-s.release:
	default:
		close(s.release)
	}
	s.mu.Unlock()
	s.Server.CloseClientConnections()
	s.Server.Close()
}

// BaseURL is the OpenAI base URL (with /v1).
func (s *Server) BaseURL() string { return s.URL + "/v1" }

// Requests returns the chat requests received so far.
func (s *Server) Requests() []openai.ChatCompletionRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]openai.ChatCompletionRequest(nil), s.requests...)
}

// Bodies returns the chat requests' JSON bodies as generic maps, with the
// fields go-openai's request type has no place for.
func (s *Server) Bodies() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.bodies...)
}

// ClassifyCalls counts the classifier requests received so far.
func (s *Server) ClassifyCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.classify
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"object":"list","data":[{"id":"scripted","object":"model","owned_by":"llmtest"}]}`)
}

var absPath = regexp.MustCompile(`/[^\s"'` + "`" + `]+`)

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	req, ok := s.record(w, r)
	if !ok {
		return
	}
	if s.Fault == HTTPError {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"error":{"message":"scripted failure","type":"server_error"}}`)
		return
	}
	if !req.Stream {
		s.judge(w, req)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	e := newEvents(w)
	prompt := 0
	for _, m := range req.Messages {
		prompt += len(strings.Fields(m.Content)) + 4
	}
	planning := len(req.Messages) > 0 && req.Messages[len(req.Messages)-1].Role == openai.ChatMessageRoleUser
	e.send(e.chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	var gen int
	if planning && s.Fault != NoTool || !planning && s.Fault == ToolAgain {
		gen = s.streamToolCall(e, req)
	} else if gen, ok = s.streamAnswer(e, r, prompt); !ok {
		return
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		u := e.frame()
		u["choices"] = []any{}
		usage := map[string]any{"prompt_tokens": prompt, "completion_tokens": gen, "total_tokens": prompt + gen}
		if s.CachedTokens > 0 {
			usage["prompt_tokens_details"] = map[string]int{"cached_tokens": s.CachedTokens}
		}
		u["usage"] = usage
		e.send(u)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// record reads the request and keeps it, as parsed and as raw JSON; a
// body that is not JSON is answered with 400.
func (s *Server) record(w http.ResponseWriter, r *http.Request) (openai.ChatCompletionRequest, bool) {
	var req openai.ChatCompletionRequest
	var body map[string]any
	raw, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(raw, &req)
	}
	if err == nil {
		err = json.Unmarshal(raw, &body)
	}
	if err != nil {
		http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return req, false
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.bodies = append(s.bodies, body)
	s.mu.Unlock()
	return req, true
}

// events writes server-sent chat completion chunks.
type events struct {
	w    http.ResponseWriter
	fl   http.Flusher
	base map[string]any
}

func newEvents(w http.ResponseWriter) *events {
	fl, _ := w.(http.Flusher)
	return &events{w: w, fl: fl, base: map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": "scripted"}}
}

func (e *events) send(v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(e.w, "data: %s\n\n", b)
	e.flush()
}

func (e *events) flush() {
	if e.fl != nil {
		e.fl.Flush()
	}
}

// frame is a new chunk's common fields.
func (e *events) frame() map[string]any {
	c := map[string]any{}
	for k, v := range e.base {
		c[k] = v
	}
	return c
}

// chunk is a chunk with one choice's delta and finish reason.
func (e *events) chunk(delta map[string]any, finish any) map[string]any {
	c := e.frame()
	c["choices"] = []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}
	return c
}

// streamToolCall streams a call of s.Tool with s.Args (its "{{path}}"
// the absolute path in the user's last message), the arguments in two
// halves; it returns the tokens generated.
func (s *Server) streamToolCall(e *events, req openai.ChatCompletionRequest) int {
	args := s.Args
	if m := absPath.FindString(lastUser(req.Messages)); m != "" {
		q, _ := json.Marshal(strings.TrimRight(m, ".,;:"))
		args = strings.ReplaceAll(args, `"{{path}}"`, string(q))
	}
	e.send(e.chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_1", "type": "function",
		"function": map[string]any{"name": s.Tool, "arguments": ""}}}}, nil))
	half := len(args) / 2
	gen := 0
	for _, part := range []string{args[:half], args[half:]} {
		e.send(e.chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": part}}}}, nil))
		gen++
	}
	e.send(e.chunk(map[string]any{}, "tool_calls"))
	return gen
}

// streamAnswer streams s.AnswerTokens tokens of text (default 8), with
// the scripted fault halfway, and llama.cpp's timings when s.Timings; it
// returns the tokens generated, and false when a fault ended the stream.
func (s *Server) streamAnswer(e *events, r *http.Request, prompt int) (int, bool) {
	n := s.AnswerTokens
	if n <= 0 {
		n = 8
	}
	gen := 0
	for i := range n {
		if i == n/2 && !s.fault(e, r) {
			return gen, false
		}
		e.send(e.chunk(map[string]any{"content": fmt.Sprintf("tok%d ", i)}, nil))
		gen++
	}
	last := e.chunk(map[string]any{}, "stop")
	if s.Timings {
		last["timings"] = map[string]any{"prompt_n": prompt, "prompt_ms": 12.5, "prompt_per_token_ms": 0.1,
			"prompt_per_second": 10000.0, "predicted_n": gen, "predicted_ms": 40.0, "predicted_per_token_ms": 5.0,
			"predicted_per_second": 200.0, "cache_n": s.CachedTokens}
	}
	e.send(last)
	return gen, true
}

// fault does the scripted mid-stream fault; false when it ended the
// stream (cut, or stalled until released).
func (s *Server) fault(e *events, r *http.Request) bool {
	switch s.Fault {
	case CutStream:
		if hj, ok := e.w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
			}
		}
		return false
	case Stall:
		select {
		case <-s.release:
		case <-r.Context().Done():
		}
		return false
	case Garbage:
		fmt.Fprint(e.w, "data: {not json\n\n")
		e.flush()
	}
	return true
}

// lastUser is the content of the last user message.
func lastUser(msgs []openai.ChatCompletionMessage) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == openai.ChatMessageRoleUser {
			return msgs[i].Content
		}
	}
	return ""
}

func (s *Server) judge(w http.ResponseWriter, req openai.ChatCompletionRequest) {
	content := s.Judge
	if content == "" {
		content = `{"observation":"the agent read the requested file","thought":"the action serves the user's goal","conclusion":false}`
	}
	if s.Fault == Garbage {
		content = "I think it is fine."
	}
	resp := map[string]any{"id": "chatcmpl-2", "object": "chat.completion", "created": time.Now().Unix(), "model": "scripted",
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content}, "finish_reason": "stop"}},
		"usage":   map[string]int{"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(resp)
}

func (s *Server) score(text string) float64 {
	if s.Score != nil {
		return s.Score(text)
	}
	return 0.01
}

func (s *Server) classifierFault(w http.ResponseWriter, r *http.Request) bool {
	s.mu.Lock()
	s.classify++
	s.mu.Unlock()
	switch s.Fault {
	case HTTPError:
		http.Error(w, `{"error":"scripted failure"}`, http.StatusInternalServerError)
		return true
	case Garbage:
		io.WriteString(w, `[[{"lab`)
		return true
	case Stall:
		select {
		case <-s.release:
		case <-r.Context().Done():
		}
		return true
	}
	return false
}

// predict answers TEI's /predict: {"inputs": "text"} or {"inputs": ["a","b"]}.
func (s *Server) predict(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Inputs json.RawMessage `json:"inputs"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":"bad json"}`, http.StatusUnprocessableEntity)
		return
	}
	if s.classifierFault(w, r) {
		return
	}
	labels := func(t string) []map[string]any {
		p := s.score(t)
		return []map[string]any{{"label": "MALICIOUS", "score": p}, {"label": "BENIGN", "score": 1 - p}}
	}
	w.Header().Set("Content-Type", "application/json")
	var one string
	if json.Unmarshal(req.Inputs, &one) == nil {
		json.NewEncoder(w).Encode(labels(one))
		return
	}
	var many []string
	if err := json.Unmarshal(req.Inputs, &many); err != nil {
		http.Error(w, `{"error":"inputs: want a string or a list of strings"}`, http.StatusUnprocessableEntity)
		return
	}
	out := make([][]map[string]any, len(many))
	for i, t := range many {
		out[i] = labels(t)
	}
	json.NewEncoder(w).Encode(out)
}

// classifyVLLM answers vLLM's /classify: {"model","input": "text"|[...]}.
func (s *Server) classifyVLLM(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model string          `json:"model"`
		Input json.RawMessage `json:"input"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":"bad json"}`, http.StatusBadRequest)
		return
	}
	if s.classifierFault(w, r) {
		return
	}
	var texts []string
	var one string
	if json.Unmarshal(req.Input, &one) == nil {
		texts = []string{one}
	} else if err := json.Unmarshal(req.Input, &texts); err != nil {
		http.Error(w, `{"error":"input: want a string or a list of strings"}`, http.StatusBadRequest)
		return
	}
	data := make([]map[string]any, len(texts))
	for i, t := range texts {
		p := s.score(t)
		label := "BENIGN"
		if p >= 0.5 {
			label = "MALICIOUS"
		}
		data[i] = map[string]any{"index": i, "label": label, "probs": []float64{1 - p, p}, "num_classes": 2}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"id": "classify-1", "object": "list", "created": time.Now().Unix(),
		"model": req.Model, "data": data, "usage": map[string]int{"prompt_tokens": 1, "total_tokens": 1}})
}
