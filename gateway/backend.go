package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// backend is one guarded server session: a guard.Proxy serving over pipes,
// as it would serve a stdio client.
type backend struct {
	name    string
	toProxy *jsonrpc.Writer
	in      *inPipe
	pid     atomic.Int64 // the server's, once it runs
	ident   *identity    // who the layers' audit events name

	mu       sync.Mutex
	deliver  func(line []byte) // nil until attached
	backlog  [][]byte          // what came before
	backlogN int               // its bytes

	done    chan struct{} // closed once Serve returned and its output was delivered
	err     error         // what Serve returned; read after done
	once    sync.Once
	stopped atomic.Bool // close was called: the session is going
}

// identity is the caller a session's layers name in their audit events; a
// warm session gets its caller when it is taken.
type identity struct{ v atomic.Pointer[string] }

func (i *identity) get() string {
	if p := i.v.Load(); p != nil {
		return *p
	}
	return ""
}

func (i *identity) set(s string) { i.v.Store(&s) }

// startBackend runs p. What the proxy writes to its client side reaches the
// function given to attach, in order, on the proxy's own goroutine: a
// message is split from the stream and handed on in the same call that
// wrote it, with no goroutine between.
func startBackend(name string, p *guard.Proxy, ident *identity) *backend {
	in := newInPipe() // gateway -> proxy
	b := &backend{name: name, toProxy: jsonrpc.NewWriter(in), in: in, ident: ident, done: make(chan struct{})}
	start := p.OnStart
	p.OnStart = func(pid int) {
		b.pid.Store(int64(pid))
		if start != nil {
			start(pid)
		}
	}
	go func() {
		// The session ends by closing the proxy's input, as a stdio client
		// would: the proxy then stops the server with its grace periods.
		b.err = p.Serve(context.Background(), in, &lineSink{deliver: b.handOn})
		in.CloseRead() // writes from the gateway fail from now on, not block
		close(b.done)
	}()
	return b
}

// attach sets where the server's messages go and hands it what came before.
func (b *backend) attach(deliver func(line []byte)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.backlog {
		deliver(m)
	}
	b.backlog, b.backlogN = nil, 0
	b.deliver = deliver
}

func (b *backend) handOn(line []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.deliver == nil {
		// Bounded as a session's waiting messages are (outbox.go).
		if len(b.backlog) < maxQueued && b.backlogN+len(line) <= queuedBytes {
			b.backlog = append(b.backlog, line)
			b.backlogN += len(line)
		}
		return
	}
	b.deliver(line)
}

// send writes one message to the proxy; it fails once the proxy is gone.
func (b *backend) send(line []byte) error {
	select {
	case <-b.done:
		return errBackendGone
	default:
	}
	return b.toProxy.Write(line)
}

// close ends the session the way a stdio client does: EOF on the proxy's
// input. It does not wait; done closes when the server is gone.
func (b *backend) close() {
	b.stopped.Store(true)
	b.once.Do(func() { b.in.Close() })
}

func (b *backend) ended() bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

var errBackendGone = errors.New("server session ended")

// lineSink is the proxy's client side: it splits what the proxy writes
// into messages (the proxy writes whole lines, sometimes several at once,
// a large one in two writes) and hands each on, copied.
type lineSink struct {
	partial []byte
	deliver func(line []byte)
}

func (l *lineSink) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.partial = append(l.partial, p...)
			break
		}
		var line []byte
		if len(l.partial) > 0 {
			line = append(l.partial, p[:i]...)
			l.partial = nil
		} else {
			line = bytes.Clone(p[:i])
		}
		p = p[i+1:]
		if line = bytes.TrimRight(line, "\r"); len(line) > 0 {
			l.deliver(line)
		}
	}
	return n, nil
}

// maxInPipe bounds what waits in an inPipe for the proxy to read: past it
// a writer waits.
const maxInPipe = 8 << 20

// errPipeClosed is a write to an inPipe whose reader is gone.
var errPipeClosed = errors.New("the proxy stopped reading")

// inPipe carries the client's messages to the proxy. Unlike io.Pipe, a
// write does not wait for the reader to take it (only for room past
// maxInPipe): the HTTP handler hands a message on with one wake-up of the
// proxy's reader instead of the two of a synchronous hand-over.
type inPipe struct {
	mu     sync.Mutex
	buf    []byte
	off    int           // buf[off:] is unread
	closed bool          // no more writes (EOF once read)
	gone   bool          // the reader left
	data   chan struct{} // capacity 1: something to read
	room   chan struct{} // capacity 1: room to write
}

func newInPipe() *inPipe {
	return &inPipe{data: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (p *inPipe) Write(b []byte) (int, error) {
	for {
		p.mu.Lock()
		switch {
		case p.gone:
			p.mu.Unlock()
			return 0, errPipeClosed
		case p.closed:
			p.mu.Unlock()
			return 0, io.ErrClosedPipe
		case len(p.buf)-p.off < maxInPipe:
			p.buf = append(p.buf, b...)
			p.mu.Unlock()
			signal(p.data)
			return len(b), nil
		}
		p.mu.Unlock()
		<-p.room
	}
}

func (p *inPipe) Read(b []byte) (int, error) {
	for {
		p.mu.Lock()
		if p.off < len(p.buf) {
			n := copy(b, p.buf[p.off:])
			p.off += n
			if p.off == len(p.buf) {
				p.off = 0
				p.buf = p.buf[:0]
				if cap(p.buf) > 1<<20 {
					p.buf = nil // let a large one go
				}
			}
			p.mu.Unlock()
			signal(p.room)
			return n, nil
		}
		if p.closed || p.gone {
			p.mu.Unlock()
			return 0, io.EOF
		}
		p.mu.Unlock()
		<-p.data
	}
}

// Close ends the stream: the reader gets EOF after what was written.
func (p *inPipe) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	signal(p.data)
	return nil
}

// CloseRead says the reader is gone: writes fail from now on.
func (p *inPipe) CloseRead() {
	p.mu.Lock()
	p.gone = true
	p.buf, p.off = nil, 0
	p.mu.Unlock()
	signal(p.room)
	signal(p.data)
}
