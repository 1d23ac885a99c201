package gateway

import (
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
	}
}

// Listener bounds the connections accepted on ln to max_connections: one
// past the bound is closed at once, so that a flood of connections cannot
// queue behind the live ones.
func (g *Gateway) Listener(ln net.Listener) net.Listener {
	return &capListener{Listener: ln, max: int64(g.cfg.Limits.maxConnections()), g: g}
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

type capListener struct {
	net.Listener
	max int64
	g   *Gateway
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.g.conns.Add(1) > l.max {
			l.g.conns.Add(-1)
			c.Close()
			l.g.refusedConns.Add(1)
			continue
		}
		return &countedConn{Conn: c, n: &l.g.conns}, nil
	}
}

type countedConn struct {
	net.Conn
	n    *atomic.Int64
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.n.Add(-1) })
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
