package guard

import (
	"context"
	"fmt"
	"io"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// ProtocolVersion is what Open asks for: 2025-11-25, the newest version
// that still has server-to-client requests (sampling, roots), which most
// deployed servers speak.
const ProtocolVersion = mcp.ProtocolVersion20251125

// Session is an MCP client session with a server behind an in-process
// proxy. Close ends it the way a client closing stdio would, and waits for
// the server to be gone.
type Session struct {
	*client.Client
	// Init is the server's answer to initialize.
	Init *mcp.InitializeResult

	toProxy io.Closer
	served  chan error
}

// Open starts p in-process, connects an mcp-go client to it over pipes, and
// performs the initialize handshake.
func Open(ctx context.Context, p *Proxy, opts ...client.ClientOption) (*Session, error) {
	cr, cw := io.Pipe() // client -> proxy
	pr, pw := io.Pipe() // proxy -> client
	s := &Session{toProxy: cw, served: make(chan error, 1)}
	go func() {
		err := p.Serve(context.WithoutCancel(ctx), cr, pw)
		pw.Close()
		cr.Close()
		s.served <- err
	}()
	c := client.NewClient(transport.NewIO(pr, cw, nil), opts...)
	// The transport keeps Start's context for the server-to-client requests
	// it answers for the whole session, so it must outlive ctx.
	if err := c.Start(context.WithoutCancel(ctx)); err != nil {
		cw.Close()
		return nil, fmt.Errorf("start client: %w", err)
	}
	s.Client = c
	init, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: ProtocolVersion,
		ClientInfo:      mcp.Implementation{Name: "mcpguard", Version: "dev"},
	}})
	if err != nil {
		if serr := s.Close(); serr != nil {
			err = serr // the real reason: the server could not start, or died
		}
		return nil, fmt.Errorf("initialize: %w", err)
	}
	s.Init = init
	return s, nil
}

// Close closes the client's side and returns what Serve returned: nil after
// an orderly shutdown, an error wrapping ErrServerExited if the server had
// died on its own.
func (s *Session) Close() error {
	if s.Client != nil {
		s.Client.Close()
	}
	s.toProxy.Close()
	return <-s.served
}

// Connect is Open for callers that only need the client. Closing the client
// ends the session; the server is stopped in the background.
func Connect(ctx context.Context, p *Proxy, opts ...client.ClientOption) (*client.Client, error) {
	s, err := Open(ctx, p, opts...)
	if err != nil {
		return nil, err
	}
	return s.Client, nil
}
