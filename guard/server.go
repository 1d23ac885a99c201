package guard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
	"github.com/mcpguard/mcpguard/guard/mcpspec"
)

// readServer relays messages from the server until its stdout closes.
func (s *session) readServer(stdout io.Reader) {
	r := jsonrpc.NewReader(stdout)
	r.Max = s.maxMessage()
	s.sr = r
	sc := jsonrpc.Scanner{Strict: s.canon}
	for {
		if !r.More() {
			if err := s.toClient.Flush(); err != nil {
				s.writeFailed(err)
			}
		}
		line, err := r.Next()
		if err != nil {
			if errors.Is(err, jsonrpc.ErrTooLarge) {
				s.logf("server message: %v", err)
				s.failPending(jsonrpc.PeekID(line), jsonrpc.CodeTooLarge, fmt.Sprintf("mcpguard: server's response %v", err))
				continue
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				s.logf("read server: %v", err)
			}
			return
		}
		env, err := sc.Scan(line)
		if err == nil && s.canon && !env.Canonical {
			line, env, err = sc.Canonical(line, env)
		}
		if err != nil {
			// Not forwarded: the client would fail on it, or read it
			// otherwise than the guard. A response we can attribute still
			// gets an answer, so the request is not lost.
			s.logf("server sent an invalid message (%v): %.200q", err, line)
			id := env.ID.In(line)
			if id == nil {
				id = jsonrpc.PeekID(line)
			}
			s.failPending(id, jsonrpc.CodeInternalError, "mcpguard: server sent an invalid response: "+err.Error())
			continue
		}
		switch env.Kind {
		case jsonrpc.KindResponse:
			s.serverResponse(&env, line)
		default:
			s.serverMessage(&env, line)
		}
	}
}

// relayServer sends a message from the client's read loop: queued while
// more of the client's messages are buffered, so that a burst leaves in
// one write, at once otherwise.
func (s *session) relayServer(line []byte) {
	if !s.cr.More() {
		s.sendServer(line)
		return
	}
	if err := s.toServer.Queue(line); err != nil {
		s.logf("write server: %v", err)
	}
}

func (s *session) flushServer() {
	if err := s.toServer.Flush(); err != nil {
		s.logf("write server: %v", err)
	}
}

// serverMessage relays what the server sends on its own, through the
// hooks. A list_changed is counted first, so that a layer sees it by the
// time the client can have acted on it.
func (s *session) serverMessage(env *jsonrpc.Envelope, line []byte) {
	if env.Kind == jsonrpc.KindNotification {
		s.notices.Add(env.MethodName)
	}
	if env.Kind == jsonrpc.KindRequest && s.canon {
		// The client's answer is judged as an answer to this method.
		key, ok := jsonrpc.AppendIDKey(nil, env.ID.In(line))
		if !ok || !s.addServerRequest(key, env.MethodName) {
			msg := jsonrpc.NewError(env.ID.In(line), jsonrpc.CodeDenied, deniedPrefix+"the proxy: too many requests of the server are waiting for the client", nil)
			if err := s.toServer.WriteMessage(msg); err != nil {
				s.logf("write server: %v", err)
			}
			return
		}
	}
	if len(s.p.ServerHooks) == 0 {
		s.relayClient(line)
		return
	}
	orig := &ServerMessage{Kind: env.Kind, Method: env.MethodName, ID: env.ID.In(line), Params: env.Params.In(line)}
	params := orig.Params
	m := orig
	for _, h := range s.p.ServerHooks {
		if m = s.hook(h, m); m == nil {
			break
		}
	}
	switch {
	case m == nil:
		if env.Kind == jsonrpc.KindRequest {
			if key, ok := jsonrpc.AppendIDKey(nil, env.ID.In(line)); ok {
				s.takeServerRequest(key)
			}
			// The server waits for an answer: it gets a denial.
			msg := jsonrpc.NewError(env.ID.In(line), jsonrpc.CodeDenied, deniedPrefix+"a server hook: "+env.MethodName+" dropped", nil)
			if err := s.toServer.WriteMessage(msg); err != nil {
				s.logf("write server: %v", err)
			}
		}
	case m == orig && bytes.Equal(m.Params, params):
		s.relayClient(line)
	default:
		out := jsonrpc.Message{JSONRPC: jsonrpc.Version, Method: m.Method, Params: m.Params}
		if env.Kind == jsonrpc.KindRequest {
			out.ID = env.ID.In(line)
		}
		if err := s.toClient.WriteMessage(&out); err != nil {
			s.writeFailed(err)
		}
	}
}

func (s *session) hook(h ServerHook, m *ServerMessage) (out *ServerMessage) {
	defer func() {
		if r := recover(); r != nil {
			s.logf("server hook panicked on %s: %v", m.Method, r)
			out = nil
		}
	}()
	return h(s.ctx, m)
}

// serverResponse finishes the request the response answers: relays it
// (raw), runs the stages' response phases (fast path), or hands it to the
// goroutine waiting for it (slow path).
func (s *session) serverResponse(env *jsonrpc.Envelope, line []byte) {
	id := env.ID.In(line)
	var ok bool
	s.serverKey, ok = jsonrpc.AppendIDKey(s.serverKey[:0], id)
	var w *inflight
	if ok {
		w, ok = s.takePending(s.serverKey)
	}
	if !ok {
		// Late answer to a cancelled request, or an id never asked:
		// relaying it would answer a request twice.
		s.logf("dropped a server response to id %s that no request is waiting for", id)
		return
	}
	if w.ch == nil && w.req == nil {
		s.relayClient(withID(line, env.ID, w.origID))
		return
	}
	if w.ch != nil {
		line = bytes.Clone(line) // for the goroutine waiting for it
	}
	resp := &Response{Result: env.Result.In(line), raw: withID(line, env.ID, w.origID)}
	if env.Error.Present() {
		var e jsonrpc.Error
		if s.canon {
			// encoding/json reads "Message" as message; the layers and
			// the client must read one error.
			if err := mcpspec.CheckError(env.Error.In(line)); err != nil {
				s.fail(w, jsonrpc.CodeInternalError, "mcpguard: server sent an invalid error: "+err.Error())
				return
			}
		}
		if err := json.Unmarshal(env.Error.In(line), &e); err != nil {
			s.fail(w, jsonrpc.CodeInternalError, "mcpguard: server sent an invalid error: "+err.Error())
			return
		}
		resp.Error = &e
	}
	resp.origResult, resp.origError = resp.Result, resp.Error
	if w.ch != nil {
		w.ch <- resp
		return
	}
	out := s.responsePhases(w.req, len(s.p.Stages), resp)
	if out == resp && resp.Error == resp.origError && bytes.Equal(resp.Result, resp.origResult) {
		s.relayClient(resp.raw)
		return
	}
	s.answer(w.req, out)
}

// withID returns line with the id at span replaced by the client's id,
// when the server wrote it otherwise (1.0 for 1, an escaped string): the
// client gets its own id back, byte for byte.
func withID(line []byte, span jsonrpc.Span, orig []byte) []byte {
	if orig == nil || bytes.Equal(span.In(line), orig) {
		return line
	}
	out := make([]byte, 0, len(line)-(span.End-span.Off)+len(orig))
	out = append(out, line[:span.Off]...)
	out = append(out, orig...)
	return append(out, line[span.End:]...)
}
