package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// maxBody bounds a request body: far above a 128 KiB tool output, far below
// what would hurt the process.
const maxBody = 32 << 20

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if !decodeBody(w, r, &req) {
		return
	}
	texts, limit, bad := req.check()
	if bad != nil {
		bad.write(w)
		return
	}
	ids := renderPrompt(s.dec.Tokenizer(), &req, texts)
	if len(ids) > s.cfg.MaxPromptTokens {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "messages", "context_length_exceeded",
			fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.",
				s.cfg.MaxPromptTokens, len(ids)))
		return
	}
	g := s.prepare(&req, texts, ids, limit)
	if req.Stream {
		g.stream(r.Context(), w)
		return
	}
	resp, err := g.complete(r.Context())
	if err != nil {
		if r.Context().Err() == nil {
			writeError(w, http.StatusInternalServerError, "server_error", "", "", err.Error())
		}
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// badRequest is a request the API refuses, as writeError's arguments.
type badRequest struct {
	status               int
	param, code, message string
}

func invalid(param, code, message string) *badRequest {
	return &badRequest{http.StatusBadRequest, param, code, message}
}

func (b *badRequest) write(w http.ResponseWriter) {
	writeError(w, b.status, "invalid_request_error", b.param, b.code, b.message)
}

// check refuses what the API would, and returns each message's text and
// the completion's token limit (-1: none; the smaller of max_tokens and
// max_completion_tokens).
func (req *chatRequest) check() (texts []string, limit int, bad *badRequest) {
	switch {
	case req.Model == "":
		return nil, 0, invalid("model", "missing_required_parameter", "you must provide a model parameter")
	case req.Model != ModelName:
		return nil, 0, &badRequest{http.StatusNotFound, "model", "model_not_found",
			fmt.Sprintf("The model `%s` does not exist. This server serves %q.", req.Model, ModelName)}
	case len(req.Messages) == 0:
		return nil, 0, invalid("messages", "empty_array", "'messages' must contain at least one message")
	case req.N != nil && *req.N != 1:
		return nil, 0, invalid("n", "unsupported_value", "only n=1 is supported")
	}
	texts = make([]string, len(req.Messages))
	for i := range req.Messages {
		m := &req.Messages[i]
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool":
		default:
			return nil, 0, invalid(fmt.Sprintf("messages[%d].role", i), "invalid_value",
				fmt.Sprintf("invalid role %q: want system, developer, user, assistant or tool", m.Role))
		}
		t, ok := m.text()
		if !ok {
			return nil, 0, invalid(fmt.Sprintf("messages[%d].content", i), "invalid_type",
				"content must be a string or an array of content parts")
		}
		texts[i] = t
	}
	for i, t := range req.Tools {
		if t.Function.Name == "" {
			return nil, 0, invalid(fmt.Sprintf("tools[%d].function.name", i), "missing_required_parameter", "a tool needs a function name")
		}
	}
	limit = -1
	for _, p := range []*int{req.MaxTokens, req.MaxCompletionTokens} {
		if p == nil {
			continue
		}
		if *p < 1 {
			return nil, 0, invalid("max_tokens", "invalid_value", "max_tokens must be at least 1")
		}
		if limit < 0 || *p < limit {
			limit = *p
		}
	}
	return texts, limit, nil
}

// prepare plans the answer to the prompt ids: what decide chose (a
// tool call, an answer of a length, a text), as token pieces, cut to the
// token limit and the context's room, with the finish reason that says
// why it ended.
func (s *Server) prepare(req *chatRequest, texts []string, ids []int32, limit int) *generation {
	tok := s.dec.Tokenizer()
	p := decide(req, texts, s.cfg.AnswerTokens)
	var pieces []string
	nameN := 0
	switch {
	case p.tool != "":
		pieces = tok.Pieces(p.tool)
		nameN = len(pieces)
		pieces = append(pieces, tok.Pieces(p.args)...)
	case p.answer > 0:
		pieces = answerPieces(tok, p.answer, uint64(s.cfg.Seed)^uint64(len(ids)))
	default:
		pieces = tok.Pieces(p.text)
	}
	n := len(pieces)
	room := s.dec.Shape().MaxContext - len(ids)
	if limit >= 0 {
		n = min(n, limit)
	}
	n = min(n, room)
	finish := "stop"
	switch {
	case n < len(pieces):
		finish = "length"
	case p.tool != "":
		finish = "tool_calls"
	}
	return &generation{
		s: s, req: req, ids: ids, pieces: pieces[:n], nameN: nameN, plan: p, finish: finish,
		id: s.id("chatcmpl"),
	}
}

// generation is one chat completion's run of the model.
type generation struct {
	s      *Server
	req    *chatRequest
	ids    []int32
	pieces []string // what the script emits, already cut to the limit
	nameN  int      // leading pieces that spell the tool's name
	plan   plan
	finish string
	id     string
}

// run prefills the prompt and then makes one decode step per emitted token
// after the first (which comes from the prefill's logits, as in every
// serving engine), calling emit with each token's index. It stops early when
// ctx ends or emit fails.
func (g *generation) run(ctx context.Context, emit func(i int) error) error {
	s := g.s
	s.active.Add(1)
	s.requests.Add(1)
	defer s.active.Add(-1)
	sess, err := s.dec.NewSession(len(g.ids) + len(g.pieces))
	if err != nil {
		return err
	}
	var flops int64
	defer func() { s.flops.Add(sess.Stats().FLOPs - flops) }()
	if _, err := sess.Prefill(ctx, g.ids); err != nil {
		return err
	}
	s.promptTokens.Add(int64(len(g.ids)))
	tok := s.dec.Tokenizer()
	for i := range g.pieces {
		if i > 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			if _, err := sess.Step(tok.ID(g.pieces[i-1])); err != nil {
				return err
			}
			s.decodeSteps.Add(1)
		}
		if i%16 == 0 {
			f := sess.Stats().FLOPs
			s.flops.Add(f - flops)
			flops = f
		}
		s.genTokens.Add(1)
		if err := emit(i); err != nil {
			return err
		}
	}
	return nil
}

func (g *generation) usage() Usage {
	return Usage{PromptTokens: len(g.ids), CompletionTokens: len(g.pieces), TotalTokens: len(g.ids) + len(g.pieces), Synthetic: true}
}

func (g *generation) complete(ctx context.Context) (*chatResponse, error) {
	if err := g.run(ctx, func(int) error { return nil }); err != nil {
		return nil, err
	}
	msg := responseMessage{Role: "assistant"}
	if g.plan.tool != "" {
		msg.ToolCalls = []toolCall{{
			ID: "call_" + g.id[len("chatcmpl-"):], Type: "function",
			Function: functionCall{
				Name:      strings.Join(g.pieces[:min(g.nameN, len(g.pieces))], ""),
				Arguments: strings.Join(g.pieces[min(g.nameN, len(g.pieces)):], ""),
			},
		}}
	} else {
		c := strings.Join(g.pieces, "")
		msg.Content = &c
	}
	return &chatResponse{
		ID: g.id, Object: "chat.completion", Created: g.s.created, Model: ModelName,
		SystemFingerprint: g.s.fingerprint(),
		Choices:           []chatChoice{{Index: 0, Message: msg, FinishReason: g.finish}},
		Usage:             g.usage(),
	}, nil
}

// stream writes the completion as server-sent events, one chunk per token,
// the way the OpenAI API does: a first chunk with the role, content or
// tool-call argument deltas, a chunk with the finish reason, with
// include_usage a last chunk with usage and no choices, then [DONE].
func (g *generation) stream(ctx context.Context, w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	bw := bufio.NewWriterSize(w, 4096)
	includeUsage := g.req.StreamOptions != nil && g.req.StreamOptions.IncludeUsage
	enc := json.NewEncoder(bw)
	send := func(c chunk) error {
		c.ID, c.Object, c.Created, c.Model, c.SystemFingerprint = g.id, "chat.completion.chunk", g.s.created, ModelName, g.s.fingerprint()
		if _, err := bw.WriteString("data: "); err != nil {
			return err
		}
		var err error
		if includeUsage && c.Usage == nil {
			err = enc.Encode(chunkWithNullUsage{chunk: c})
		} else {
			err = enc.Encode(c)
		}
		if err != nil {
			return err
		}
		// Encode ended the line; an empty line ends the event.
		if err := bw.WriteByte('\n'); err != nil {
			return err
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	}
	one := func(d delta, finish *string) chunk {
		return chunk{Choices: []chunkChoice{{Index: 0, Delta: d, FinishReason: finish}}}
	}
	empty := ""
	if err := send(one(delta{Role: "assistant", Content: &empty}, nil)); err != nil {
		return
	}
	tool := g.plan.tool != ""
	callID := "call_" + g.id[len("chatcmpl-"):]
	zero := 0
	err := g.run(ctx, func(i int) error {
		piece := g.pieces[i]
		switch {
		case !tool:
			return send(one(delta{Content: &piece}, nil))
		case i < g.nameN-1 && i < len(g.pieces)-1:
			return nil // the name goes out whole, once its tokens are decoded
		case i < g.nameN:
			name := strings.Join(g.pieces[:i+1], "")
			return send(one(delta{ToolCalls: []toolCall{{Index: &zero, ID: callID, Type: "function",
				Function: functionCall{Name: name, Arguments: ""}}}}, nil))
		default:
			return send(one(delta{ToolCalls: []toolCall{{Index: &zero, Function: functionCall{Arguments: piece}}}}, nil))
		}
	})
	if err != nil {
		// A client that left gets nothing more. A model failure is sent as
		// an error event, as the OpenAI API does mid-stream; either way the
		// stream ends without [DONE].
		if ctx.Err() == nil {
			_, _ = bw.WriteString("data: ")
			_ = enc.Encode(apiError{Error: apiErrorBody{Message: err.Error(), Type: "server_error"}})
			_ = bw.WriteByte('\n')
			_ = bw.Flush()
			if flusher != nil {
				flusher.Flush()
			}
		}
		return
	}
	finish := g.finish
	if err := send(one(delta{}, &finish)); err != nil {
		return
	}
	if includeUsage {
		u := g.usage()
		if err := send(chunk{Choices: []chunkChoice{}, Usage: &u}); err != nil {
			return
		}
	}
	_, _ = bw.WriteString("data: [DONE]\n\n")
	_ = bw.Flush()
	if flusher != nil {
		flusher.Flush()
	}
}

// decodeBody reads a JSON body into v, answering bad ones with an error.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "", "request_too_large",
				fmt.Sprintf("request body larger than %d bytes", maxBody))
		} else {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "", "", "reading body: "+err.Error())
		}
		return false
	}
	if err := json.Unmarshal(body, v); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "invalid_json",
			"We could not parse the JSON body of your request: "+err.Error())
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, typ, param, code, msg string) {
	e := apiError{Error: apiErrorBody{Message: msg, Type: typ}}
	if param != "" {
		e.Error.Param = &param
	}
	if code != "" {
		e.Error.Code = &code
	}
	writeJSON(w, status, e)
}
