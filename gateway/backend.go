package gateway

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// backend is one guarded server session: a guard.Proxy serving over pipes,
// as it would serve a stdio client.
type backend struct {
	name    string
	toProxy *jsonrpc.Writer
	in      *io.PipeWriter

	done chan struct{} // closed once Serve returned and its output was delivered
	err  error         // what Serve returned; read after done
	once sync.Once
}

// startBackend runs p; deliver gets every line the proxy writes to its
// client side, in order, on one goroutine. Messages are copied for it.
func startBackend(name string, p *guard.Proxy, deliver func(line []byte)) *backend {
	cr, cw := io.Pipe() // gateway -> proxy
	pr, pw := io.Pipe() // proxy -> gateway
	b := &backend{name: name, toProxy: jsonrpc.NewWriter(cw), in: cw, done: make(chan struct{})}
	served := make(chan error, 1)
	go func() {
		// The session ends by closing the proxy's input, as a stdio client
		// would: the proxy then stops the server with its grace periods.
		err := p.Serve(context.Background(), cr, pw)
		pw.Close()
		cr.Close() // writes from the gateway fail from now on, not block
		served <- err
	}()
	go func() {
		r := jsonrpc.NewReader(pr)
		for {
			line, err := r.Next()
			if err != nil {
				if errors.Is(err, jsonrpc.ErrTooLarge) {
					continue
				}
				break
			}
			deliver(append([]byte(nil), line...))
		}
		pr.Close()
		b.err = <-served
		close(b.done)
	}()
	return b
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
func (b *backend) close() { b.once.Do(func() { b.in.Close() }) }

var errBackendGone = errors.New("server session ended")
