package guard

import (
	"errors"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// addPending records a request in flight. When the server is already gone
// it answers the request with an error instead and returns false.
func (s *session) addPending(key string, w *inflight) bool {
	s.mu.Lock()
	if s.dead {
		reason := s.exitReason()
		s.mu.Unlock()
		if w.origID != nil {
			s.replyError(w.origID, jsonrpc.CodeServerExited, reason)
		}
		return false
	}
	s.pending[key] = append(s.pending[key], w)
	s.mu.Unlock()
	return true
}

func (s *session) exitReason() string {
	if s.exitErr != nil {
		return "mcpguard: " + s.exitErr.Error()
	}
	return "mcpguard: server is not running"
}

func (s *session) exitReasonLocked() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exitReason()
}

// takePending removes and returns the oldest request in flight under key.
func (s *session) takePending(key []byte) (*inflight, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := s.pending[string(key)]
	if len(ws) == 0 {
		return nil, false
	}
	w := ws[0]
	if len(ws) == 1 {
		delete(s.pending, string(key))
		s.drainedLocked()
	} else {
		ws[0] = nil
		s.pending[string(key)] = ws[1:]
	}
	return w, true
}

// drained returns a channel closed once no request is in flight: none
// with the server (pending) and none in a Waiter's wait. A fast-path
// response leaves pending before it is relayed; readServer relays it
// before it can see the server's EOF, and Serve waits for readServer.
func (s *session) drained() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.drain == nil {
		s.drain = make(chan struct{})
	}
	ch := s.drain
	s.drainedLocked()
	return ch
}

// drainedLocked closes the drain channel when nothing is in flight; the
// caller holds mu and has just emptied a table.
func (s *session) drainedLocked() {
	if s.drain != nil && len(s.pending) == 0 && len(s.waiting) == 0 {
		select {
		case <-s.drain:
		default:
			close(s.drain)
		}
	}
}

// dropFrom removes w from m (s.pending or s.waiting) under key.
func (s *session) dropFrom(m map[string][]*inflight, key string, w *inflight) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := m[key]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(m, key)
		s.drainedLocked()
	} else {
		m[key] = ws
	}
}

// serverGone answers every request in flight with an error and makes new
// requests fail at once.
func (s *session) serverGone(reason string) {
	s.mu.Lock()
	s.dead = true
	s.exitErr = errors.New(reason)
	pending := s.pending
	s.pending = make(map[string][]*inflight)
	s.drainedLocked()
	s.mu.Unlock()
	for _, ws := range pending {
		for _, w := range ws {
			s.fail(w, jsonrpc.CodeServerExited, "mcpguard: "+reason)
		}
	}
}

// fail answers a request in flight with an error.
func (s *session) fail(w *inflight, code int, msg string) {
	if w.ch != nil {
		w.ch <- &Response{Error: &jsonrpc.Error{Code: code, Message: msg}}
		return
	}
	if w.origID != nil {
		s.replyError(w.origID, code, msg)
	}
}

func (s *session) failPending(id []byte, code int, msg string) {
	key, ok := jsonrpc.AppendIDKey(nil, id)
	if !ok {
		return
	}
	if w, ok := s.takePending(key); ok {
		s.fail(w, code, msg)
	}
}
