package guard

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// session is the state of one Serve call.
type session struct {
	p       *Proxy
	ctx     context.Context // carries the notices to the layers
	layered bool            // stages: requests are judged
	// canon: layers judge messages, so what is forwarded is the canonical
	// encoding of what they judged (jsonrpc.AppendCanonical), never the
	// peer's own bytes, and a CR inside a message is refused.
	canon  bool
	stderr io.Writer
	grace  time.Duration // Proxy.Grace, or DefaultGrace

	toClient *jsonrpc.Writer
	toServer *jsonrpc.Writer

	mu      sync.Mutex
	pending map[string][]*inflight // by canonical id (jsonrpc.AppendIDKey); ids may repeat
	waiting map[string][]*inflight // client requests in a Waiter's wait, not yet with the server
	dead    bool                   // server gone: new requests are answered at once
	exitErr error
	drain   chan struct{} // closed when pending and waiting empty (see drained)
	// serverReqs: the server's requests the client has yet to answer, by
	// canonical id, with their methods (canon sessions only).
	serverReqs map[string]string

	wg sync.WaitGroup // requests that waited, until answered

	notices Notices // the server's list_changed notifications, for the layers

	// The client's stream is read on pooled workers once a request waits
	// (see slow): a fresh goroutine would grow its stack through the
	// layers' deep calls every time.
	idle       chan func()   // a worker waiting for its next request receives here
	quit       chan struct{} // closed when Serve returns
	clientDone chan struct{} // closed when the client's stream ends
	clientLost chan struct{} // closed when writing to the client failed
	lostOnce   sync.Once

	serverKey []byte // the server loop's buffer for id keys

	// The client's stream, and what reading it needs. One goroutine at a
	// time reads it: a reader that meets a request that must wait keeps
	// that request and hands the reading to another goroutine (see slow).
	cr        *jsonrpc.Reader
	csc       jsonrpc.Scanner
	clientKey []byte
	sr        *jsonrpc.Reader // the server's stream, read by readServer
}

// inflight is one request the server has not answered yet. A request on
// the fast path is finished by the server's read loop from what is kept
// here: the client's id (to answer with its exact bytes) and, when stages
// judged it, the Request for their response phases. A request on the slow
// path has a goroutine waiting on ch instead.
type inflight struct {
	origID []byte   // the client's id; nil for a layer's own request
	req    *Request // stages' response phases run for it; nil when raw
	ch     chan *Response
	cancel context.CancelFunc
}

// logf writes one diagnostic line to stderr.
func (s *session) logf(format string, args ...any) {
	fmt.Fprintf(s.stderr, "mcpguard: "+format+"\n", args...)
}

// spawn runs job on an idle worker, or on a new one when none is idle.
func (s *session) spawn(job func()) {
	select {
	case s.idle <- job:
	default:
		go s.worker(job)
	}
}

// worker runs job, then waits for the next one until Serve returns.
func (s *session) worker(job func()) {
	for {
		job()
		select {
		case job = <-s.idle:
		case <-s.quit:
			return
		}
	}
}

func (s *session) sendClient(line []byte) {
	if err := s.toClient.Write(line); err != nil {
		s.writeFailed(err)
	}
}

// writeFailed: the client is gone (EPIPE, a closed pipe). Nothing more can
// reach it, so the session ends, and the server's group with it.
func (s *session) writeFailed(err error) {
	s.lostOnce.Do(func() {
		s.logf("write client: %v", err)
		close(s.clientLost)
	})
}

func (s *session) sendServer(line []byte) {
	if err := s.toServer.Write(line); err != nil {
		// The server is going away; readServer will see EOF and answer
		// whatever is pending.
		s.logf("write server: %v", err)
	}
}

func (s *session) replyError(id []byte, code int, msg string) {
	if err := s.toClient.WriteMessage(jsonrpc.NewError(id, code, msg, nil)); err != nil {
		s.writeFailed(err)
	}
}
