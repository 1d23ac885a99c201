package gateway

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Errors that refuse a new session (503) or a request (429).
var (
	errTooMany     = errors.New("too many sessions")
	errQuota       = errors.New("this caller has its share of the sessions")
	errMemory      = errors.New("memory budget")
	errClosing     = errors.New("gateway is shutting down")
	errBusySession = errors.New("too many requests open on this session")
	errBusyCaller  = errors.New("too many requests open for this caller")
)

// Server is the gateway's HTTP server: its handler, with the timeouts that
// keep one client from holding a connection: the headers must come within
// header_timeout, a kept-alive connection with no request is closed after
// conn_idle_timeout, and each request's body must come within body_timeout
// (set per request, so that it does not cut the SSE streams that follow).
func (g *Gateway) Server() *http.Server {
	return &http.Server{
		Handler:           g.Handler(),
		ReadHeaderTimeout: g.cfg.Limits.headerTimeout(),
		IdleTimeout:       g.cfg.Limits.connIdleTimeout(),
		MaxHeaderBytes:    64 << 10,
		// The connection rides along so that an authenticated request
		// can move it out of the unauthenticated share (Listener).
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if cc, ok := c.(*countedConn); ok {
				return context.WithValue(ctx, connKey{}, cc)
			}
			return ctx
		},
	}
}

// Listener bounds the connections accepted on ln to max_connections: one
// past the bound is closed at once, so that a flood of connections cannot
// queue behind the live ones. With authentication, a connection past the
// bound closes the oldest connection that has not yet carried a request
// with a valid token instead, when there is one: a caller with no token,
// holding idle sockets, cannot keep the token holders out (red team), since
// theirs authenticate at their first request and are never closed for a
// newcomer.
func (g *Gateway) Listener(ln net.Listener) net.Listener {
	return &capListener{Listener: ln, max: int64(g.cfg.Limits.maxConnections()), g: g, evict: g.cfg.Authenticated()}
}

// Serve serves the gateway on ln (through Listener and Server) until
// Shutdown.
func (g *Gateway) Serve(ln net.Listener) error {
	srv := g.Server()
	g.mu.Lock()
	if g.closing {
		g.mu.Unlock()
		return http.ErrServerClosed
	}
	g.servers = append(g.servers, srv)
	g.mu.Unlock()
	return srv.Serve(g.Listener(ln))
}

// Shutdown stops accepting connections, ends every session (their streams
// end with them) and waits for the connections and the servers to be gone
// until ctx is done.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.mu.Lock()
	servers := g.servers
	g.mu.Unlock()
	shut := make(chan error, len(servers))
	for _, srv := range servers {
		go func() { shut <- srv.Shutdown(ctx) }()
	}
	err := g.Close(ctx)
	for _, srv := range servers {
		if e := <-shut; e != nil {
			srv.Close()
		}
	}
	return err
}

// Connections reports the open connections.
func (g *Gateway) Connections() int { return int(g.conns.Load()) }

// UnauthenticatedConnections reports the open connections that have not
// yet carried a request with a valid token (0 without authentication).
func (g *Gateway) UnauthenticatedConnections() int { return g.unauth.len() }

type capListener struct {
	net.Listener
	max   int64
	g     *Gateway
	evict bool // close the oldest unauthenticated connection for a new one
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.g.conns.Add(1) > l.max && !(l.evict && l.g.unauth.evictOldest()) {
			l.g.conns.Add(-1)
			c.Close()
			l.g.refusedConns.Add(1)
			continue
		}
		cc := &countedConn{Conn: c, n: &l.g.conns}
		if l.evict {
			l.g.unauth.add(cc)
		}
		return cc, nil
	}
}

// unauthConns are the open connections that have not yet carried a
// request with a valid token, oldest first.
type unauthConns struct {
	mu   sync.Mutex
	list list.List // of *countedConn
}

func (u *unauthConns) add(c *countedConn) {
	u.mu.Lock()
	defer u.mu.Unlock()
	c.unauth = u
	c.elem = u.list.PushBack(c)
}

// remove takes c out (authenticated, or closed).
func (u *unauthConns) remove(c *countedConn) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if c.elem != nil {
		u.list.Remove(c.elem)
		c.elem = nil
	}
}

// evictOldest closes the oldest unauthenticated connection; false when
// there is none.
func (u *unauthConns) evictOldest() bool {
	u.mu.Lock()
	e := u.list.Front()
	if e == nil {
		u.mu.Unlock()
		return false
	}
	c := e.Value.(*countedConn)
	u.list.Remove(e)
	c.elem = nil
	u.mu.Unlock()
	c.Close()
	return true
}

func (u *unauthConns) len() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.list.Len()
}

// connKey is the context key of a request's *countedConn.
type connKey struct{}

type countedConn struct {
	net.Conn
	n      *atomic.Int64
	once   sync.Once
	unauth *unauthConns  // where it is listed until it authenticates
	elem   *list.Element // its entry there; guarded by unauth.mu
}

// authenticated takes c out of the unauthenticated connections.
func (c *countedConn) authenticated() {
	if c.unauth != nil {
		c.unauth.remove(c)
	}
}

func (c *countedConn) Close() error {
	c.once.Do(func() {
		c.n.Add(-1)
		c.authenticated()
	})
	return c.Conn.Close()
}

// callerState is what one identity holds.
type callerState struct {
	sessions int          // guarded by Gateway.mu
	open     atomic.Int32 // HTTP requests being served
}

// caller returns identity's state; called with g.mu held.
func (g *Gateway) caller(identity string) *callerState {
	c := g.callers[identity]
	if c == nil {
		c = &callerState{}
		g.callers[identity] = c
	}
	return c
}

// admit counts one open request of s's caller and session, to be undone
// by release. Past a bound the request gets 429.
func (g *Gateway) admit(s *session) error {
	if int(s.busy.Add(1)) > g.cfg.Limits.maxRequestsPerSession() {
		s.busy.Add(-1)
		return errBusySession
	}
	if g.cfg.Authenticated() && int(s.caller.open.Add(1)) > max(1, g.cfg.Limits.maxConnections()/4) {
		s.caller.open.Add(-1)
		s.busy.Add(-1)
		return errBusyCaller
	}
	return nil
}

// release undoes admit.
func (g *Gateway) release(s *session) {
	if g.cfg.Authenticated() {
		s.caller.open.Add(-1)
	}
	s.busy.Add(-1)
	s.touch()
}

// admitSession checks the bounds on sessions for a new one of identity:
// the total and the caller's share. Called with g.mu held.
func (g *Gateway) admitSession(identity string) error {
	l := g.cfg.Limits
	switch {
	case g.closing:
		return errClosing
	case len(g.sessions) >= l.maxSessions():
		return fmt.Errorf("%w (max_sessions %d)", errTooMany, l.maxSessions())
	case g.caller(identity).sessions >= l.maxPerIdentity(g.cfg.Authenticated()):
		return fmt.Errorf("%w (max_sessions_per_identity %d)", errQuota, l.maxPerIdentity(g.cfg.Authenticated()))
	}
	return nil
}

// memoryReport lists the server processes of the live sessions and of
// the warm pool, for the memory check.
func (g *Gateway) memoryReport() (time.Time, []memorySample) {
	g.mu.Lock()
	live := make([]*session, 0, len(g.sessions))
	for _, s := range g.sessions {
		live = append(live, s)
	}
	g.mu.Unlock()
	var out []memorySample
	for _, s := range live {
		s.mu.Lock()
		for _, b := range s.backends {
			if pid := b.pid.Load(); pid > 0 && !b.ended() {
				out = append(out, memorySample{server: b.name, pid: int(pid)})
			}
		}
		s.mu.Unlock()
	}
	for _, b := range g.warm.all() {
		if pid := b.pid.Load(); pid > 0 && !b.ended() {
			out = append(out, memorySample{server: b.name, pid: int(pid)})
		}
	}
	return time.Now(), out
}
