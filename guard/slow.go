package guard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// judged is what clientRequest keeps of a request, in one allocation: the
// Request the stages judge, the client's original, and its entry in the
// table of requests in flight.
type judged struct {
	req  Request
	orig original
	w    inflight
}

// waitFor asks a Waiter whether req must wait; a panic counts as no.
func (s *session) waitFor(w Waiter, req *Request) (fn func(context.Context, Handler)) {
	defer func() {
		if r := recover(); r != nil {
			s.logf("layer panicked on %s: %v", req.Method, r)
			fn = nil
		}
	}()
	return w.Wait(s.ctx, req)
}

// stageRequest runs one request phase; a stage that panics fails the
// request, not the proxy.
func (s *session) stageRequest(st Stage, req *Request) (resp *Response) {
	defer func() {
		if r := recover(); r != nil {
			resp = panicked(s, req, r)
		}
	}()
	return st.Request(s.ctx, req)
}

// responsePhases runs the response phases of the first n stages, innermost
// first.
func (s *session) responsePhases(req *Request, n int, resp *Response) *Response {
	for i := n - 1; i >= 0; i-- {
		resp = s.stageResponse(s.p.Stages[i], req, resp)
	}
	return resp
}

func (s *session) stageResponse(st Stage, req *Request, resp *Response) (out *Response) {
	defer func() {
		if r := recover(); r != nil {
			out = panicked(s, req, r)
		}
	}()
	return st.Response(s.ctx, req, resp)
}

func panicked(s *session, req *Request, r any) *Response {
	s.logf("layer panicked on %s: %v", req.Method, r)
	return &Response{Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("mcpguard: internal error in a layer: %v", r)}}
}

// answer writes the judged answer to req: the server's own bytes (with the
// client's id) when nothing changed them, or the re-serialised response.
func (s *session) answer(req *Request, resp *Response) {
	switch {
	case resp == nil: // cancelled by the client, which expects no answer
	case resp.raw != nil && resp.Error == resp.origError && bytes.Equal(resp.Result, resp.origResult):
		s.sendClient(resp.raw)
	default:
		out := jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: req.ID, Result: resp.Result, Error: resp.Error}
		if out.Result == nil && out.Error == nil {
			out.Result = json.RawMessage("{}")
		}
		if err := s.toClient.WriteMessage(&out); err != nil {
			s.writeFailed(err)
		}
	}
}

// slow runs the rest of req's judging: wait (a Waiter's function), the
// stages from `from` on, the server, and the response phases. A wait may
// block (L2 waits for its own tools/list, or for the one another call
// started), so the client's later messages must not queue behind it: the
// reading of the client's stream goes on on another goroutine (a pooled
// worker) at once, and this one keeps req. Until req is with the server, a
// notifications/cancelled finds it in s.waiting. It reports whether the
// reading went on elsewhere: always, unless the server is gone.
func (s *session) slow(req *Request, orig *original, from int, wait func(context.Context, Handler)) bool {
	// Counted under mu while the server is alive: serverGone marks it dead
	// under mu before Serve waits, so every Add comes before that Wait and
	// Serve returns only once this request is answered.
	s.mu.Lock()
	if s.dead {
		reason := s.exitReason()
		s.mu.Unlock()
		s.replyError(req.ID, jsonrpc.CodeServerExited, reason)
		return false
	}
	s.wg.Add(1)
	key, _ := jsonrpc.AppendIDKey(nil, req.ID)
	ctx, cancel := context.WithCancel(context.WithValue(s.ctx, originalKey{}, orig))
	w := &inflight{cancel: cancel}
	s.waiting[string(key)] = append(s.waiting[string(key)], w)
	s.mu.Unlock()
	s.spawn(s.readClient)

	defer s.wg.Done()
	defer cancel()
	defer s.dropFrom(s.waiting, string(key), w)
	ran := len(s.p.Stages)
	resp := func() (resp *Response) {
		defer func() {
			if r := recover(); r != nil {
				resp = panicked(s, req, r)
			}
		}()
		wait(ctx, s.forward)
		for i := from; i < len(s.p.Stages); i++ {
			if r := s.stageRequest(s.p.Stages[i], req); r != nil {
				ran = i
				return r
			}
		}
		return s.forward(ctx, req)
	}()
	if resp != nil {
		resp = s.responsePhases(req, ran, resp)
	}
	s.answer(req, resp)
	return true
}

// forward is the innermost Handler of the slow path: it sends the request
// to the server and waits for the response. It returns nil when the
// request was cancelled.
func (s *session) forward(ctx context.Context, req *Request) *Response {
	var line []byte
	o, _ := ctx.Value(originalKey{}).(*original)
	client := o != nil && bytes.Equal(req.ID, o.id)
	if client && !o.rewritten(req) {
		line = o.line
	} else {
		var err error
		if line, err = encodeRequest(req); err != nil {
			return &Response{Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcpguard: " + err.Error()}}
		}
	}
	key, ok := jsonrpc.AppendIDKey(nil, req.ID)
	if !ok {
		return &Response{Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("mcpguard: a layer sent a request with id %s", req.ID)}}
	}
	if ctx.Err() != nil {
		// Cancelled while it waited: the server never sees it.
		return nil
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &inflight{ch: make(chan *Response, 1), cancel: cancel}
	if client {
		w.origID = req.ID
	}
	if !s.addPending(string(key), w) {
		if !client {
			return &Response{Error: &jsonrpc.Error{Code: jsonrpc.CodeServerExited, Message: s.exitReasonLocked()}}
		}
		return nil // already answered with an error
	}
	s.sendServer(line)
	select {
	case resp := <-w.ch:
		return resp
	case <-wctx.Done():
		s.dropFrom(s.pending, string(key), w)
		return nil
	}
}

// original is the request as the client sent it, so that the client's
// exact bytes are forwarded when no layer changed the request.
type original struct {
	line         []byte
	tool         string
	params, args json.RawMessage
	id           json.RawMessage // the client's id
}

type originalKey struct{}

// rewritten reports whether a layer changed the request.
func (o *original) rewritten(req *Request) bool {
	return req.Tool != o.tool || !bytes.Equal(req.Params, o.params) || !bytes.Equal(req.Arguments, o.args)
}

// encodeRequest serialises a request a layer changed (or made): the
// judged values are what the server gets.
func encodeRequest(req *Request) ([]byte, error) {
	params := req.Params
	if req.Method == "tools/call" {
		var p map[string]json.RawMessage
		if len(req.Params) > 0 {
			if err := json.Unmarshal(req.Params, &p); err != nil {
				return nil, fmt.Errorf("re-encode tools/call: %w", err)
			}
		}
		if p == nil {
			p = map[string]json.RawMessage{}
		}
		if req.Arguments != nil {
			p["arguments"] = req.Arguments
		} else {
			delete(p, "arguments")
		}
		p["name"], _ = json.Marshal(req.Tool)
		var err error
		if params, err = json.Marshal(p); err != nil {
			return nil, fmt.Errorf("re-encode tools/call: %w", err)
		}
	}
	out, err := (&jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: req.ID, Method: req.Method, Params: params}).Marshal()
	if err != nil {
		return nil, err
	}
	// What a layer produced is held to the same reading as what a client
	// sends: no duplicate keys, valid UTF-8.
	sc := jsonrpc.Scanner{Strict: true}
	env, err := sc.Scan(out)
	if err != nil {
		return nil, fmt.Errorf("a layer's rewrite is not a valid message: %w", err)
	}
	out, _, err = sc.Canonical(out, env)
	return out, err
}
