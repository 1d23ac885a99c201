package guard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
	"github.com/mcpguard/mcpguard/guard/mcpspec"
)

// readClient relays messages from the client until EOF, or until it hands
// the reading to another goroutine (see slow).
func (s *session) readClient() {
	r := s.cr
	for {
		if !r.More() {
			s.flushServer() // before blocking: what was queued goes now
		}
		line, err := r.Next()
		if err != nil {
			if errors.Is(err, jsonrpc.ErrTooLarge) {
				id := jsonrpc.PeekID(line)
				s.logf("client message: %v", err)
				s.replyError(id, jsonrpc.CodeTooLarge, fmt.Sprintf("mcpguard: message %v", err))
				continue
			}
			if !errors.Is(err, io.EOF) {
				s.logf("read client: %v", err)
			}
			close(s.clientDone)
			return
		}
		env, err := s.csc.Scan(line)
		if err == nil && s.canon && !env.Canonical {
			// What the layers judge, and the server gets, is the
			// canonical encoding of what was read.
			line, env, err = s.csc.Canonical(line, env)
		}
		if err != nil {
			s.logf("client message: %v", err)
			if env.Kind != jsonrpc.KindNotification {
				s.replyError(env.ID.In(line), jsonrpc.ErrorCode(err), "mcpguard: invalid message: "+err.Error())
			}
			continue
		}
		switch env.Kind {
		case jsonrpc.KindRequest:
			s.clientKey, _ = jsonrpc.AppendIDKey(s.clientKey[:0], env.ID.In(line))
			if !s.layered {
				s.forwardRaw(string(s.clientKey), env.ID.In(line), line)
				continue
			}
			if s.clientRequest(&env, line, string(s.clientKey)) {
				return // another goroutine reads on
			}
		default:
			// A notification, or the client answering a server-to-client
			// request (sampling, roots, elicitation, ...).
			s.clientMessage(&env, line)
		}
	}
}

// clientMessage relays a notification or an answer from the client,
// judged by the stages that are ClientJudges (canon sessions).
func (s *session) clientMessage(env *jsonrpc.Envelope, line []byte) {
	if !s.canon {
		s.relayClientMessage(env, line)
		return
	}
	m := &ClientMessage{Kind: env.Kind, Method: env.MethodName, Params: env.Params.In(line)}
	if env.Kind == jsonrpc.KindResponse {
		id := env.ID.In(line)
		key, ok := jsonrpc.AppendIDKey(nil, id)
		method := ""
		if ok {
			method, ok = s.takeServerRequest(key)
		}
		if !ok {
			s.logf("dropped the client's answer to id %s: no request of the server waits for it", id)
			return
		}
		m.ID, m.Method, m.Result = id, method, env.Result.In(line)
		if env.Error.Present() {
			var e jsonrpc.Error
			if err := mcpspec.CheckError(env.Error.In(line)); err != nil {
				s.denyServer(id, "the client's error answer to "+method+" is not read one way: "+err.Error())
				return
			}
			if err := json.Unmarshal(env.Error.In(line), &e); err != nil {
				s.denyServer(id, "the client's error answer to "+method+" is not an error object")
				return
			}
			m.Error = &e
		}
	}
	orig := *m
	out := m
	for _, st := range s.p.Stages {
		if j, ok := st.(ClientJudge); ok {
			if out = s.judgeClient(j, out); out == nil {
				break
			}
		}
	}
	switch {
	case out == nil && m.Kind == jsonrpc.KindResponse:
		s.denyServer(m.ID, "the client's answer to "+m.Method+" was refused")
	case out == nil:
		// A refused notification is dropped; the judge said why.
	case out == m && out.Error == orig.Error && bytes.Equal(out.Params, orig.Params) && bytes.Equal(out.Result, orig.Result):
		s.relayClientMessage(env, line)
	default:
		msg := &jsonrpc.Message{JSONRPC: jsonrpc.Version, Params: out.Params, Result: out.Result, Error: out.Error}
		if m.Kind == jsonrpc.KindResponse {
			msg.ID = m.ID
			if msg.Result == nil && msg.Error == nil {
				msg.Result = json.RawMessage("{}")
			}
		} else {
			msg.Method = m.Method
		}
		if err := s.toServer.WriteMessage(msg); err != nil {
			s.logf("write server: %v", err)
		}
	}
}

// relayClientMessage forwards a notification or an answer as it was read
// (a cancellation first forgets its request).
func (s *session) relayClientMessage(env *jsonrpc.Envelope, line []byte) {
	if env.Kind == jsonrpc.KindNotification && env.MethodName == "notifications/cancelled" {
		s.cancelled(line)
	}
	s.relayServer(line)
}

func (s *session) judgeClient(j ClientJudge, m *ClientMessage) (out *ClientMessage) {
	defer func() {
		if r := recover(); r != nil {
			s.logf("layer panicked on the client's %s: %v", m.Method, r)
			out = nil
		}
	}()
	return j.Client(s.ctx, m)
}

// denyServer answers the server's request id with a denial in the client's
// stead.
func (s *session) denyServer(id []byte, reason string) {
	msg := jsonrpc.NewError(id, jsonrpc.CodeDenied, deniedPrefix+"a layer: "+reason, nil)
	if err := s.toServer.WriteMessage(msg); err != nil {
		s.logf("write server: %v", err)
	}
}

// maxServerRequests bounds the server's requests the client has yet to
// answer; past it, the server's new requests are refused.
const maxServerRequests = 4096

// addServerRequest records a request of the server that goes to the client;
// false when too many are outstanding.
func (s *session) addServerRequest(key []byte, method string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.serverReqs) >= maxServerRequests {
		return false
	}
	s.serverReqs[string(key)] = method
	return true
}

func (s *session) takeServerRequest(key []byte) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.serverReqs[string(key)]
	if ok {
		delete(s.serverReqs, string(key))
	}
	return m, ok
}

func (s *session) maxMessage() int {
	switch {
	case s.p.MaxMessage < 0:
		return 0
	case s.p.MaxMessage == 0:
		return DefaultMaxMessage
	}
	return s.p.MaxMessage
}

// forwardRaw sends a request no layer judges, remembering its id.
func (s *session) forwardRaw(key string, id, line []byte) {
	if s.addPending(key, &inflight{origID: bytes.Clone(id)}) {
		s.relayServer(line)
	}
}

// relayClient is relayServer's counterpart on the server's read loop.
func (s *session) relayClient(line []byte) {
	if !s.sr.More() {
		s.sendClient(line)
		return
	}
	if err := s.toClient.Queue(line); err != nil {
		s.writeFailed(err)
	}
}

// clientRequest judges a request: the stages' request phases inline, and
// then either forwards it (the fast path: its response phases run on the
// server's read loop) or runs the rest on the slow path (a stage that
// waits). It reports whether the reading of the client's stream went on
// on another goroutine meanwhile.
func (s *session) clientRequest(env *jsonrpc.Envelope, line []byte, key string) bool {
	buf := bytes.Clone(line) // the Request aliases it until it is answered
	c := &judged{req: Request{Method: env.MethodName, ID: env.ID.In(buf), Params: env.Params.In(buf),
		Server: s.p.Server, Config: s.p.Config}}
	req := &c.req
	if req.Method == "tools/call" {
		name := env.Name.In(buf)
		if len(name) < 3 || name[0] != '"' {
			s.replyError(req.ID, jsonrpc.CodeInvalidParams, "mcpguard: tools/call needs params.name, a string")
			return false
		}
		req.Tool, req.Arguments = jsonrpc.Unquote(name), env.Arguments.In(buf)
	}
	orig := &c.orig
	*orig = original{line: buf, id: req.ID, tool: req.Tool, params: req.Params, args: req.Arguments}
	for i, st := range s.p.Stages {
		if w, ok := st.(Waiter); ok {
			if wait := s.waitFor(w, req); wait != nil {
				return s.slow(req, orig, i, wait)
			}
		}
		if resp := s.stageRequest(st, req); resp != nil {
			s.answer(req, s.responsePhases(req, i, resp))
			return false
		}
	}
	out := orig.line
	if orig.rewritten(req) {
		var err error
		if out, err = encodeRequest(req); err != nil {
			s.replyError(req.ID, jsonrpc.CodeInternalError, "mcpguard: "+err.Error())
			return false
		}
	}
	c.w = inflight{origID: req.ID, req: req}
	if s.addPending(key, &c.w) {
		s.relayServer(out)
	}
	return false
}

// cancelled handles notifications/cancelled from the client: the request
// is forgotten (the client expects no answer): one with the server is dropped
// from the pending table, one still in a wait (see slow) stops waiting.
func (s *session) cancelled(line []byte) {
	var n struct {
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &n) != nil || len(n.Params.RequestID) == 0 {
		return
	}
	key, ok := jsonrpc.AppendIDKey(nil, n.Params.RequestID)
	if !ok {
		return
	}
	if w, ok := s.takePending(key); ok {
		if w.cancel != nil {
			w.cancel()
		}
		return
	}
	// Not with the server yet: still in a Waiter's wait.
	var cancel context.CancelFunc
	s.mu.Lock()
	if ws := s.waiting[string(key)]; len(ws) > 0 {
		cancel = ws[0].cancel
	}
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}
