package gateway

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// session is one client's MCP session: its outbox, and the route to its
// server (one backend) or, on the aggregate endpoint, to several.
type session struct {
	id       string
	server   string // "" on the aggregate endpoint
	identity string
	caller   *callerState // guarded by Gateway.mu until added
	g        *Gateway
	out      *outbox

	// handle passes one client message on; an error means the server side
	// is gone.
	handle func(h jsonrpc.Header, line []byte) error
	// stop ends the server side; the session's done follows once it is gone.
	stop func()

	done    chan struct{} // closed by end
	endOnce sync.Once

	mu       sync.Mutex
	backends []*backend // for the memory the session's servers use

	protocol atomic.Pointer[string] // the version initialize agreed on
	last     atomic.Int64           // unix nanoseconds of the last request
	busy     atomic.Int32           // HTTP requests being served
}

func (g *Gateway) newSession(server, identity string) *session {
	s := &session{server: server, identity: identity, g: g, done: make(chan struct{})}
	s.out = newOutbox(func(format string, args ...any) {
		g.logf("session %.8s: "+format, append([]any{s.id}, args...)...)
	})
	s.touch()
	if g.testSession != nil {
		g.testSession(s)
	}
	return s
}

func (s *session) touch() { s.last.Store(time.Now().UnixNano()) }

// version is the protocol version initialize agreed on ("" before).
func (s *session) version() string {
	if p := s.protocol.Load(); p != nil {
		return *p
	}
	return ""
}

// idleSince is how long the session has been idle at now; a session with a
// request or stream open is never idle.
func (s *session) idleSince(now time.Time) time.Duration {
	if s.busy.Load() > 0 || s.out.inFlight() > 0 {
		return 0
	}
	return now.Sub(time.Unix(0, s.last.Load()))
}

// end closes the session: the client's waiting requests get a JSON-RPC
// error, the id is forgotten (404 from now on) and the servers stop.
func (s *session) end(reason string) {
	s.endOnce.Do(func() {
		s.out.end(jsonrpc.CodeServerExited, "mcpguard: "+reason)
		s.g.removeSession(s)
		close(s.done)
		if s.stop != nil {
			s.stop()
		}
	})
}

func (s *session) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// addBackend records b as one of the session's servers.
func (s *session) addBackend(b *backend) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.backends = append(s.backends, b)
}

// pids lists the session's server processes that run.
func (s *session) pids() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for _, b := range s.backends {
		if pid := b.pid.Load(); pid > 0 && !b.ended() {
			out = append(out, int(pid))
		}
	}
	return out
}

// startDirect connects s to a new session of its server.
func (s *session) startDirect() error {
	b, err := s.g.backend(s.server, s.identity)
	if err != nil {
		return err
	}
	s.addBackend(b)
	b.attach(s.fromServer)
	s.handle = func(h jsonrpc.Header, line []byte) error { return b.send(line) }
	s.stop = b.close
	go func() {
		<-b.done
		reason := "server session ended"
		if b.err != nil {
			reason = b.err.Error()
		}
		s.end(reason)
		s.g.wg.Done()
	}()
	return nil
}

// fromServer routes one message from a direct session's server.
func (s *session) fromServer(line []byte) {
	h, err := jsonrpc.Peek(line)
	if err != nil {
		return // the proxy forwards only valid messages
	}
	switch h.Kind {
	case jsonrpc.KindResponse:
		if !s.out.respond(canonID(h.ID), line) {
			s.g.logf("session %.8s: dropped a response to id %s: its client left", s.id, h.ID)
		}
	case jsonrpc.KindNotification:
		tok := ""
		if h.Method == "notifications/progress" {
			tok = progressToken(line, true)
		}
		s.out.send(line, tok)
	default:
		s.out.send(line, "")
	}
}

func (s *session) String() string { return fmt.Sprintf("%.8s", s.id) }
