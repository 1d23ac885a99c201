package guard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// ErrServerExited is returned by Serve when the server process ended on its
// own while the client was still connected.
var ErrServerExited = errors.New("server exited")

// DefaultGrace is how long the server gets to exit after its stdin closes,
// and again after SIGTERM, before the next, harsher step.
const DefaultGrace = 2 * time.Second

// drainTime is how long the proxy keeps reading the server's stdout after
// the server exited, when something else still holds the pipe open.
const drainTime = 250 * time.Millisecond

// DefaultMaxMessage is the default limit on one message, in bytes. It
// bounds memory, not protocol: 100 MB messages pass.
const DefaultMaxMessage = 256 << 20

// Proxy runs an MCP server subprocess and relays JSON-RPC between it and a
// client, passing client requests through Layers. The zero Grace and
// MaxMessage mean DefaultGrace and DefaultMaxMessage; a negative MaxMessage
// means no limit. A Proxy serves one session.
type Proxy struct {
	// Command is the server's argv.
	Command []string
	// Dir is the server's working directory ("" for the proxy's).
	Dir string
	// Env is the server's environment (nil for the proxy's own).
	Env []string
	// Server and Config name the session for the layers' audit events.
	Server string
	Config string

	Layers  []Middleware
	Prepare []func(*exec.Cmd) error
	Sandbox Sandbox

	// Stderr receives the server's stderr and the proxy's own diagnostics
	// (nil: os.Stderr).
	Stderr io.Writer
	// Grace is the time between closing the server's stdin, SIGTERM and SIGKILL.
	Grace time.Duration
	// MaxMessage limits one message in either direction.
	MaxMessage int
	// OnStart, if set, is called with the server's pid once it runs.
	OnStart func(pid int)
}

// session is the state of one Serve call.
type session struct {
	p       *Proxy
	handler Handler // nil for an empty chain: raw forwarding only
	stderr  io.Writer

	toClient *jsonrpc.Writer
	toServer *jsonrpc.Writer

	mu      sync.Mutex
	pending map[string][]*waiter // by raw id; a slice because ids may repeat
	dead    bool                 // server gone: new requests are answered at once
	exitErr error

	wg sync.WaitGroup // layered requests until answered

	notices Notices // the server's list_changed notifications, for the layers

	// Layered requests run on pooled workers: a fresh goroutine would grow
	// its stack through the layers' deep calls (JSON decoding, schema
	// validation) on every request, which costs more than the layers do.
	idle       chan func()   // a worker waiting for its next request receives here
	quit       chan struct{} // closed when Serve returns
	clientDone chan struct{} // closed when the client's stream ends
}

// waiter is one request in flight. ch is nil for a request forwarded raw,
// whose response is relayed raw; otherwise the response is handed to the
// goroutine running the chain.
type waiter struct {
	ch     chan *Response
	cancel context.CancelFunc
}

// Serve starts the server and relays messages until the client closes its
// side (in reaches EOF), ctx is done, or the server exits. It returns nil
// after a client-initiated shutdown, an error wrapping ErrServerExited when
// the server ended first, or the error that kept the server from starting.
func (p *Proxy) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	if len(p.Command) == 0 {
		return errors.New("no server command")
	}
	s := &session{
		p:        p,
		stderr:   p.Stderr,
		toClient: jsonrpc.NewWriter(out),
		pending:  make(map[string][]*waiter),
		idle:     make(chan func()),
		quit:     make(chan struct{}),
	}
	defer close(s.quit) // idle workers exit
	if s.stderr == nil {
		s.stderr = os.Stderr
	}
	if len(p.Layers) > 0 {
		s.handler = Chain(s.forward, p.Layers...)
	}

	cmd := exec.Command(p.Command[0], p.Command[1:]...)
	cmd.Dir = p.Dir
	cmd.Env = p.Env
	cmd.Stderr = s.stderr
	// Its own process group, so shutdown reaches the server's children too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	for _, prep := range p.Prepare {
		if err := prep(cmd); err != nil {
			return fmt.Errorf("prepare server: %w", err)
		}
	}
	if p.Sandbox != nil {
		if err := p.Sandbox.Prepare(cmd); err != nil {
			return fmt.Errorf("sandbox %s: %w", p.Sandbox.Name(), err)
		}
		defer p.Sandbox.Close()
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("server stdin: %w", err)
	}
	// Our own pipe rather than StdoutPipe: Wait must not depend on stdout
	// closing, or a daemon that inherited it would keep the session alive
	// after the server itself exited.
	stdout, stdoutW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("server stdout: %w", err)
	}
	defer stdout.Close()
	cmd.Stdout = stdoutW
	grace := p.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	// Bounds Wait's copying of stderr when Stderr is not a file, for the
	// same reason.
	cmd.WaitDelay = grace
	err = cmd.Start()
	stdoutW.Close()
	if err != nil {
		return fmt.Errorf("start server: %w", err)
	}
	pid := cmd.Process.Pid
	if p.Sandbox != nil {
		if err := p.Sandbox.Started(pid); err != nil {
			killGroup(pid, syscall.SIGKILL)
			cmd.Wait()
			return fmt.Errorf("sandbox %s: %w", p.Sandbox.Name(), err)
		}
	}
	if p.OnStart != nil {
		p.OnStart(pid)
	}
	s.toServer = jsonrpc.NewWriter(stdin)

	serverDone := make(chan struct{})
	go func() {
		s.readServer(stdout)
		close(serverDone)
	}()
	waitDone := make(chan error, 1)
	go func() { waitDone <- cmd.Wait() }()

	clientDone := make(chan struct{})
	s.clientDone = clientDone
	go s.readClient(WithNotices(ctx, &s.notices), in)

	var (
		waitErr     error
		serverEnded bool
	)
	select {
	case waitErr = <-waitDone:
		serverEnded = true
	case <-clientDone:
	case <-ctx.Done():
	}
	if !serverEnded {
		// The client is gone (or we were told to stop): EOF, then SIGTERM,
		// then SIGKILL, each after the grace period.
		stdin.Close()
		select {
		case waitErr = <-waitDone:
		case <-time.After(grace):
			killGroup(pid, syscall.SIGTERM)
			select {
			case waitErr = <-waitDone:
			case <-time.After(grace):
				killGroup(pid, syscall.SIGKILL)
				waitErr = <-waitDone
			}
		}
	}
	// Whatever the server left in its group goes with it: no orphans.
	killGroup(pid, syscall.SIGKILL)
	stdin.Close()
	// Relay what the server wrote before it exited; a process outside the
	// group that still holds its stdout gets a short while, then the pipe
	// is closed under it.
	select {
	case <-serverDone:
	case <-time.After(drainTime):
		stdout.Close()
		<-serverDone
	}

	reason := "server exited"
	if waitErr != nil {
		reason = "server exited: " + waitErr.Error()
	}
	s.serverGone(reason)
	s.wg.Wait()
	if serverEnded {
		if waitErr == nil {
			waitErr = errors.New("exit status 0")
		}
		return fmt.Errorf("%w: %v", ErrServerExited, waitErr)
	}
	return nil
}

func killGroup(pid int, sig syscall.Signal) {
	// The negative pid addresses the whole process group.
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		syscall.Kill(pid, sig)
	}
}

// logf writes one diagnostic line to stderr.
func (s *session) logf(format string, args ...any) {
	fmt.Fprintf(s.stderr, "mcpguard: "+format+"\n", args...)
}

// readClient relays messages from the client until EOF.
func (s *session) readClient(ctx context.Context, in io.Reader) {
	r := jsonrpc.NewReader(in)
	r.Max = s.maxMessage()
	s.clientLoop(ctx, r)
}

// clientLoop reads and relays client messages until the client's stream ends.
func (s *session) clientLoop(ctx context.Context, r *jsonrpc.Reader) {
	for {
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
		h, msg, err := s.decode(line)
		if err != nil {
			s.logf("client message: %v", err)
			if h.Kind != jsonrpc.KindNotification {
				s.replyError(h.ID, jsonrpc.ErrorCode(err), "mcpguard: invalid message: "+err.Error())
			}
			continue
		}
		switch h.Kind {
		case jsonrpc.KindRequest:
			s.clientRequest(ctx, h, msg, line)
		case jsonrpc.KindNotification:
			if h.Method == "notifications/cancelled" {
				s.cancelled(line)
			}
			s.sendServer(line)
		case jsonrpc.KindResponse:
			// The client answering a server-to-client request (sampling, roots, ...).
			s.sendServer(line)
		}
	}
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

// clientRequest forwards a request raw, or runs it through the layers on a
// goroutine of its own, which waits for the server's answer.
func (s *session) clientRequest(ctx context.Context, h jsonrpc.Header, msg *jsonrpc.Message, line []byte) {
	if s.handler == nil {
		if s.addPending(h.ID, &waiter{}) {
			s.sendServer(line)
		}
		return
	}
	req := &Request{Method: msg.Method, ID: msg.ID, Params: msg.Params, Server: s.p.Server, Config: s.p.Config}
	if msg.Method == "tools/call" {
		var p struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal(msg.Params, &p); err != nil || p.Name == "" {
			s.replyError(msg.ID, jsonrpc.CodeInvalidParams, "mcpguard: tools/call needs params.name")
			return
		}
		req.Tool, req.Arguments = p.Name, p.Arguments
	}
	orig := &original{
		line:       append([]byte(nil), line...), // line is only valid until the next read
		tool:       req.Tool,
		params:     req.Params,
		args:       req.Arguments,
		dispatched: make(chan struct{}),
	}
	// Counted under mu while the server is alive: serverGone marks it dead
	// under mu before Serve waits, so every Add comes before that Wait and
	// Serve returns only once this request is answered.
	s.mu.Lock()
	if s.dead {
		reason := s.exitReason()
		s.mu.Unlock()
		s.replyError(msg.ID, jsonrpc.CodeServerExited, reason)
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	s.spawn(func() {
		defer s.wg.Done()
		defer orig.done()
		resp := s.run(context.WithValue(ctx, originalKey{}, orig), req)
		orig.done() // before the answer, so a layer's denial keeps order too
		switch {
		case resp == nil: // cancelled by the client, which expects no answer
		case resp.raw != nil && resp.Error == resp.origError && bytes.Equal(resp.Result, resp.origResult):
			// No layer changed the server's answer: relay its own bytes.
			s.sendClient(resp.raw)
		default:
			out := jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: req.ID, Result: resp.Result, Error: resp.Error}
			if out.Result == nil && out.Error == nil {
				out.Result = json.RawMessage("{}")
			}
			if err := s.toClient.WriteMessage(&out); err != nil {
				s.logf("write client: %v", err)
			}
		}
	})
	// Read on only once the request is with the server (or answered by a
	// layer), so that the client's order is kept.
	<-orig.dispatched
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

// run calls the chain; a layer that panics fails its request, not the proxy.
func (s *session) run(ctx context.Context, req *Request) (resp *Response) {
	defer func() {
		if r := recover(); r != nil {
			s.logf("layer panicked on %s: %v", req.Method, r)
			resp = &Response{Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("mcpguard: internal error in a layer: %v", r)}}
		}
	}()
	return s.handler(ctx, req)
}

// forward is the innermost Handler: it sends the request to the server and
// waits for the response. It returns nil when the request was cancelled.
func (s *session) forward(ctx context.Context, req *Request) *Response {
	var line []byte
	o, _ := ctx.Value(originalKey{}).(*original)
	if o != nil && !o.rewritten(req) {
		line = o.line
	} else {
		var err error
		if line, err = encodeRequest(req); err != nil {
			return &Response{Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcpguard: " + err.Error()}}
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &waiter{ch: make(chan *Response, 1), cancel: cancel}
	if !s.addPending(req.ID, w) {
		return nil // already answered with an error
	}
	s.sendServer(line)
	if o != nil {
		o.done()
	}
	select {
	case resp := <-w.ch:
		return resp
	case <-wctx.Done():
		s.dropPending(req.ID, w)
		return nil
	}
}

// original is the request as the client sent it, carried in the context
// so that forward can relay the client's exact bytes when no layer changed
// the request.
type original struct {
	line         []byte
	tool         string
	params, args json.RawMessage
	// dispatched is closed once the request went to the server or was
	// answered by a layer, so that the read loop keeps the client's order.
	dispatched chan struct{}
	once       sync.Once
}

func (o *original) done() { o.once.Do(func() { close(o.dispatched) }) }

type originalKey struct{}

// rewritten reports whether a layer changed the request.
func (o *original) rewritten(req *Request) bool {
	return req.Tool != o.tool || !bytes.Equal(req.Params, o.params) || !bytes.Equal(req.Arguments, o.args)
}

func encodeRequest(req *Request) ([]byte, error) {
	params := req.Params
	if req.Method == "tools/call" {
		var p map[string]json.RawMessage
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, fmt.Errorf("re-encode tools/call: %w", err)
		}
		if req.Arguments != nil {
			p["arguments"] = req.Arguments
		} else {
			delete(p, "arguments")
		}
		p["name"], _ = json.Marshal(req.Tool)
		var err error
		if params, err = json.Marshal(p); err != nil {
			return nil, fmt.Errorf("re-encode tools/call: %w", err)
		}
	}
	return (&jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: req.ID, Method: req.Method, Params: params}).Marshal()
}

// addPending records a request in flight. When the server is already gone
// it answers the request with an error instead and returns false.
func (s *session) addPending(id json.RawMessage, w *waiter) bool {
	s.mu.Lock()
	if s.dead {
		reason := s.exitReason()
		s.mu.Unlock()
		s.replyError(id, jsonrpc.CodeServerExited, reason)
		return false
	}
	s.pending[string(id)] = append(s.pending[string(id)], w)
	s.mu.Unlock()
	return true
}

func (s *session) exitReason() string {
	if s.exitErr != nil {
		return "mcpguard: " + s.exitErr.Error()
	}
	return "mcpguard: server is not running"
}

// takePending removes and returns the oldest waiter for id.
func (s *session) takePending(id json.RawMessage) (*waiter, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := s.pending[string(id)]
	if len(ws) == 0 {
		return nil, false
	}
	w := ws[0]
	if len(ws) == 1 {
		delete(s.pending, string(id))
	} else {
		s.pending[string(id)] = ws[1:]
	}
	return w, true
}

func (s *session) dropPending(id json.RawMessage, w *waiter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := s.pending[string(id)]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(s.pending, string(id))
	} else {
		s.pending[string(id)] = ws
	}
}

// cancelled handles notifications/cancelled from the client: the request
// is forgotten (the client expects no answer) and its chain is stopped.
func (s *session) cancelled(line []byte) {
	var n struct {
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &n) != nil || len(n.Params.RequestID) == 0 {
		return
	}
	if w, ok := s.takePending(n.Params.RequestID); ok && w.cancel != nil {
		w.cancel()
	}
}

// serverGone answers every request in flight with an error and makes new
// requests fail at once.
func (s *session) serverGone(reason string) {
	s.mu.Lock()
	s.dead = true
	s.exitErr = errors.New(reason)
	pending := s.pending
	s.pending = make(map[string][]*waiter)
	s.mu.Unlock()
	for id, ws := range pending {
		for _, w := range ws {
			resp := &Response{Error: &jsonrpc.Error{Code: jsonrpc.CodeServerExited, Message: "mcpguard: " + reason}}
			if w.ch != nil {
				w.ch <- resp
				continue
			}
			s.replyError(json.RawMessage(id), jsonrpc.CodeServerExited, "mcpguard: "+reason)
		}
	}
}

// readServer relays messages from the server until its stdout closes.
func (s *session) readServer(stdout io.Reader) {
	r := jsonrpc.NewReader(stdout)
	r.Max = s.maxMessage()
	for {
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
		h, msg, err := s.decode(line)
		if err != nil {
			// Not forwarded: the client would fail on it. A response we can
			// attribute still gets an answer, so the request is not lost.
			s.logf("server sent an invalid message (%v): %.200q", err, line)
			if h.ID == nil {
				h.ID = jsonrpc.PeekID(line)
			}
			s.failPending(h.ID, jsonrpc.CodeInternalError, "mcpguard: server sent an invalid response: "+err.Error())
			continue
		}
		switch h.Kind {
		case jsonrpc.KindResponse:
			s.serverResponse(h, msg, line)
		default:
			// Server-to-client requests and notifications pass unchanged.
			// A list_changed is counted first, so that a layer sees it by
			// the time the client can have acted on it.
			if h.Kind == jsonrpc.KindNotification {
				s.notices.Add(h.Method)
			}
			s.sendClient(line)
		}
	}
}

// serverResponse hands a response to the request waiting for it; msg is the
// decoded line when the session has layers, nil otherwise.
func (s *session) serverResponse(h jsonrpc.Header, msg *jsonrpc.Message, line []byte) {
	w, ok := s.takePending(h.ID)
	if !ok {
		// Late answer to a cancelled request, or an id never asked:
		// relaying it would answer a request twice.
		s.logf("dropped a server response to id %s that no request is waiting for", h.ID)
		return
	}
	if w.ch == nil {
		s.sendClient(line)
		return
	}
	if msg == nil {
		var err error
		if msg, err = jsonrpc.Parse(line); err != nil {
			w.ch <- &Response{Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcpguard: server sent an invalid response: " + err.Error()}}
			return
		}
	}
	w.ch <- &Response{Result: msg.Result, Error: msg.Error,
		raw: append([]byte(nil), line...), origResult: msg.Result, origError: msg.Error}
}

// decode reads a message's header; in a layered session it decodes the
// whole message once instead (msg is nil otherwise): the layers need the
// whole request, and a layered request waits for the whole response.
func (s *session) decode(line []byte) (jsonrpc.Header, *jsonrpc.Message, error) {
	if s.handler == nil {
		h, err := jsonrpc.Peek(line)
		return h, nil, err
	}
	msg, err := jsonrpc.Parse(line)
	return headerOf(msg, err), msg, err
}

// headerOf derives what Peek would have returned from Parse's results.
func headerOf(m *jsonrpc.Message, err error) jsonrpc.Header {
	if m == nil {
		return jsonrpc.Header{}
	}
	h := jsonrpc.Header{ID: m.ID, Method: m.Method}
	if errors.Is(err, jsonrpc.ErrBadID) {
		h.ID = nil
	}
	if err == nil {
		h.Kind = m.Kind()
	}
	return h
}

func (s *session) failPending(id json.RawMessage, code int, msg string) {
	if id == nil {
		return
	}
	w, ok := s.takePending(id)
	if !ok {
		return
	}
	if w.ch != nil {
		w.ch <- &Response{Error: &jsonrpc.Error{Code: code, Message: msg}}
		return
	}
	s.replyError(id, code, msg)
}

func (s *session) replyError(id json.RawMessage, code int, msg string) {
	if err := s.toClient.WriteMessage(jsonrpc.NewError(id, code, msg, nil)); err != nil {
		s.logf("write client: %v", err)
	}
}

func (s *session) sendClient(line []byte) {
	if err := s.toClient.Write(line); err != nil {
		s.logf("write client: %v", err)
	}
}

func (s *session) sendServer(line []byte) {
	if err := s.toServer.Write(line); err != nil {
		// The server is going away; readServer will see EOF and answer
		// whatever is pending.
		s.logf("write server: %v", err)
	}
}
