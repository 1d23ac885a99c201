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
	"time"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
	"github.com/mcpguard/mcpguard/internal/proctree"
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
// client, passing client requests through Stages. The zero Grace and
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

	// Stages are the defence layers (see Stage), run in order on the read
	// loops; a request that must wait (see Waiter) goes on a goroutine of
	// its own.
	Stages []Stage
	// ServerHooks see what the server sends on its own (see ServerHook).
	ServerHooks []ServerHook
	Prepare     []func(*exec.Cmd) error
	Sandbox     Sandbox

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
	ctx     context.Context // carries the notices to the layers
	layered bool            // stages: requests are judged
	stderr  io.Writer

	toClient *jsonrpc.Writer
	toServer *jsonrpc.Writer

	mu      sync.Mutex
	pending map[string][]*inflight // by canonical id (jsonrpc.AppendIDKey); ids may repeat
	waiting map[string][]*inflight // client requests in a Waiter's wait, not yet with the server
	dead    bool                   // server gone: new requests are answered at once
	exitErr error
	drain   chan struct{} // closed when pending and waiting empty (see drained)

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

// Serve starts the server and relays messages until the client closes its
// side (in reaches EOF) or goes away, ctx is done, or the server exits. It
// returns nil after a client-initiated shutdown, an error wrapping
// ErrServerExited when the server ended first, or the error that kept the
// server from starting. On every way out the server's whole process group
// is stopped.
func (p *Proxy) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	if len(p.Command) == 0 {
		return errors.New("no server command")
	}
	// A client that goes away while we write to it must not kill the
	// proxy (SIGPIPE on stdout) before the server's group is stopped.
	defer catchSIGPIPE()()
	s := &session{
		p:          p,
		stderr:     p.Stderr,
		toClient:   jsonrpc.NewWriter(out),
		pending:    make(map[string][]*inflight),
		waiting:    make(map[string][]*inflight),
		idle:       make(chan func()),
		quit:       make(chan struct{}),
		clientDone: make(chan struct{}),
		clientLost: make(chan struct{}),
		layered:    len(p.Stages) > 0,
	}
	s.ctx = WithNotices(ctx, &s.notices)
	defer close(s.quit) // idle workers exit
	if s.stderr == nil {
		s.stderr = os.Stderr
	}

	cmd := exec.Command(p.Command[0], p.Command[1:]...)
	cmd.Dir = p.Dir
	cmd.Env = p.Env
	cmd.Stderr = s.stderr
	// A group of its own, so that shutdown reaches the server's children.
	proctree.Prepare(cmd)
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
	group, err := proctree.Start(cmd)
	stdoutW.Close()
	if err != nil {
		return fmt.Errorf("start server: %w", err)
	}
	pid := group.Pid()
	if p.Sandbox != nil {
		if err := p.Sandbox.Started(pid); err != nil {
			group.Kill()
			<-group.Done()
			group.Close()
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
	s.cr = jsonrpc.NewReader(in)
	s.cr.Max = s.maxMessage()
	go s.worker(s.readClient)

	var (
		waitErr     error
		serverEnded bool
	)
	select {
	case <-group.Done():
	case <-s.clientDone:
		// The client sent all it will but may still read (a half-closed
		// pipe: `printf REQUESTS | mcpguard run`). Its requests are
		// answered before the server sees EOF, for up to the grace
		// period: many servers exit on EOF with calls still running.
		select {
		case <-s.drained():
		case <-time.After(grace):
		case <-group.Done():
		case <-s.clientLost:
		case <-ctx.Done():
		}
	case <-s.clientLost:
	case <-ctx.Done():
	}
	select {
	case <-group.Done(): // the server exited on its own
		serverEnded = true
		waitErr = group.Err()
		group.Close() // whatever the server left in its group goes with it
	default:
	}
	if !serverEnded {
		// The client is gone (or we were told to stop): EOF, then SIGTERM,
		// then SIGKILL, each after the grace period.
		waitErr = group.Stop(grace, func() { stdin.Close() })
	}
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

// logf writes one diagnostic line to stderr.
func (s *session) logf(format string, args ...any) {
	fmt.Fprintf(s.stderr, "mcpguard: "+format+"\n", args...)
}

// readClient relays messages from the client until EOF, or until it hands
// the reading to another goroutine (see slow).
func (s *session) readClient() {
	r := s.cr
	for {
		if !r.More() {
			s.flushServer() // before blocking: what was queued goes now
		}
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
		env, err := s.csc.Scan(line)
		if err != nil {
			s.logf("client message: %v", err)
			if env.Kind != jsonrpc.KindNotification {
				s.replyError(env.ID.In(line), jsonrpc.ErrorCode(err), "mcpguard: invalid message: "+err.Error())
			}
			continue
		}
		switch env.Kind {
		case jsonrpc.KindRequest:
			s.clientKey, _ = jsonrpc.AppendIDKey(s.clientKey[:0], env.ID.In(line))
			if !s.layered {
				s.forwardRaw(string(s.clientKey), env.ID.In(line), line)
				continue
			}
			if s.clientRequest(&env, line, string(s.clientKey)) {
				return // another goroutine reads on
			}
		case jsonrpc.KindNotification:
			if env.MethodName == "notifications/cancelled" {
				s.cancelled(line)
			}
			s.relayServer(line)
		case jsonrpc.KindResponse:
			// The client answering a server-to-client request (sampling, roots, ...).
			s.relayServer(line)
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

// forwardRaw sends a request no layer judges, remembering its id.
func (s *session) forwardRaw(key string, id, line []byte) {
	if s.addPending(key, &inflight{origID: bytes.Clone(id)}) {
		s.relayServer(line)
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

// relayClient is relayServer's counterpart on the server's read loop.
func (s *session) relayClient(line []byte) {
	if !s.sr.More() {
		s.sendClient(line)
		return
	}
	if err := s.toClient.Queue(line); err != nil {
		s.writeFailed(err)
	}
}

// clientRequest judges a request: the stages' request phases inline, and
// then either forwards it (the fast path: its response phases run on the
// server's read loop) or runs the rest on the slow path (a stage that
// waits). It reports whether the reading of the client's stream went on
// on another goroutine meanwhile.
func (s *session) clientRequest(env *jsonrpc.Envelope, line []byte, key string) bool {
	buf := bytes.Clone(line) // the Request aliases it until it is answered
	c := &judged{req: Request{Method: env.MethodName, ID: env.ID.In(buf), Params: env.Params.In(buf),
		Server: s.p.Server, Config: s.p.Config}}
	req := &c.req
	if req.Method == "tools/call" {
		name := env.Name.In(buf)
		if len(name) < 3 || name[0] != '"' {
			s.replyError(req.ID, jsonrpc.CodeInvalidParams, "mcpguard: tools/call needs params.name, a string")
			return false
		}
		req.Tool, req.Arguments = jsonrpc.Unquote(name), env.Arguments.In(buf)
	}
	orig := &c.orig
	*orig = original{line: buf, id: req.ID, tool: req.Tool, params: req.Params, args: req.Arguments}
	for i, st := range s.p.Stages {
		if w, ok := st.(Waiter); ok {
			if wait := s.waitFor(w, req); wait != nil {
				return s.slow(req, orig, i, wait)
			}
		}
		if resp := s.stageRequest(st, req); resp != nil {
			s.answer(req, s.responsePhases(req, i, resp))
			return false
		}
	}
	out := orig.line
	if orig.rewritten(req) {
		var err error
		if out, err = encodeRequest(req); err != nil {
			s.replyError(req.ID, jsonrpc.CodeInternalError, "mcpguard: "+err.Error())
			return false
		}
	}
	c.w = inflight{origID: req.ID, req: req}
	if s.addPending(key, &c.w) {
		s.relayServer(out)
	}
	return false
}

// judged is what clientRequest keeps of a request, in one allocation: the
// Request the stages judge, the client's original, and its entry in the
// table of requests in flight.
type judged struct {
	req  Request
	orig original
	w    inflight
}

// waitFor asks a Waiter whether req must wait; a panic counts as no.
func (s *session) waitFor(w Waiter, req *Request) (fn func(context.Context, Handler)) {
	defer func() {
		if r := recover(); r != nil {
			s.logf("layer panicked on %s: %v", req.Method, r)
			fn = nil
		}
	}()
	return w.Wait(s.ctx, req)
}

// stageRequest runs one request phase; a stage that panics fails the
// request, not the proxy.
func (s *session) stageRequest(st Stage, req *Request) (resp *Response) {
	defer func() {
		if r := recover(); r != nil {
			resp = panicked(s, req, r)
		}
	}()
	return st.Request(s.ctx, req)
}

// responsePhases runs the response phases of the first n stages, innermost
// first.
func (s *session) responsePhases(req *Request, n int, resp *Response) *Response {
	for i := n - 1; i >= 0; i-- {
		resp = s.stageResponse(s.p.Stages[i], req, resp)
	}
	return resp
}

func (s *session) stageResponse(st Stage, req *Request, resp *Response) (out *Response) {
	defer func() {
		if r := recover(); r != nil {
			out = panicked(s, req, r)
		}
	}()
	return st.Response(s.ctx, req, resp)
}

func panicked(s *session, req *Request, r any) *Response {
	s.logf("layer panicked on %s: %v", req.Method, r)
	return &Response{Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("mcpguard: internal error in a layer: %v", r)}}
}

// answer writes the judged answer to req: the server's own bytes (with the
// client's id) when nothing changed them, or the re-serialised response.
func (s *session) answer(req *Request, resp *Response) {
	switch {
	case resp == nil: // cancelled by the client, which expects no answer
	case resp.raw != nil && resp.Error == resp.origError && bytes.Equal(resp.Result, resp.origResult):
		s.sendClient(resp.raw)
	default:
		out := jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: req.ID, Result: resp.Result, Error: resp.Error}
		if out.Result == nil && out.Error == nil {
			out.Result = json.RawMessage("{}")
		}
		if err := s.toClient.WriteMessage(&out); err != nil {
			s.writeFailed(err)
		}
	}
}

// slow runs the rest of req's judging: wait (a Waiter's function), the
// stages from `from` on, the server, and the response phases. A wait may
// block (L2 waits for its own tools/list, or for the one another call
// started), so the client's later messages must not queue behind it: the
// reading of the client's stream goes on on another goroutine (a pooled
// worker) at once, and this one keeps req. Until req is with the server, a
// notifications/cancelled finds it in s.waiting. It reports whether the
// reading went on elsewhere: always, unless the server is gone.
func (s *session) slow(req *Request, orig *original, from int, wait func(context.Context, Handler)) bool {
	// Counted under mu while the server is alive: serverGone marks it dead
	// under mu before Serve waits, so every Add comes before that Wait and
	// Serve returns only once this request is answered.
	s.mu.Lock()
	if s.dead {
		reason := s.exitReason()
		s.mu.Unlock()
		s.replyError(req.ID, jsonrpc.CodeServerExited, reason)
		return false
	}
	s.wg.Add(1)
	key, _ := jsonrpc.AppendIDKey(nil, req.ID)
	ctx, cancel := context.WithCancel(context.WithValue(s.ctx, originalKey{}, orig))
	w := &inflight{cancel: cancel}
	s.waiting[string(key)] = append(s.waiting[string(key)], w)
	s.mu.Unlock()
	s.spawn(s.readClient)

	defer s.wg.Done()
	defer cancel()
	defer s.dropFrom(s.waiting, string(key), w)
	ran := len(s.p.Stages)
	resp := func() (resp *Response) {
		defer func() {
			if r := recover(); r != nil {
				resp = panicked(s, req, r)
			}
		}()
		wait(ctx, s.forward)
		for i := from; i < len(s.p.Stages); i++ {
			if r := s.stageRequest(s.p.Stages[i], req); r != nil {
				ran = i
				return r
			}
		}
		return s.forward(ctx, req)
	}()
	if resp != nil {
		resp = s.responsePhases(req, ran, resp)
	}
	s.answer(req, resp)
	return true
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

// forward is the innermost Handler of the slow path: it sends the request
// to the server and waits for the response. It returns nil when the
// request was cancelled.
func (s *session) forward(ctx context.Context, req *Request) *Response {
	var line []byte
	o, _ := ctx.Value(originalKey{}).(*original)
	client := o != nil && bytes.Equal(req.ID, o.id)
	if client && !o.rewritten(req) {
		line = o.line
	} else {
		var err error
		if line, err = encodeRequest(req); err != nil {
			return &Response{Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcpguard: " + err.Error()}}
		}
	}
	key, ok := jsonrpc.AppendIDKey(nil, req.ID)
	if !ok {
		return &Response{Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("mcpguard: a layer sent a request with id %s", req.ID)}}
	}
	if ctx.Err() != nil {
		// Cancelled while it waited: the server never sees it.
		return nil
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &inflight{ch: make(chan *Response, 1), cancel: cancel}
	if client {
		w.origID = req.ID
	}
	if !s.addPending(string(key), w) {
		if !client {
			return &Response{Error: &jsonrpc.Error{Code: jsonrpc.CodeServerExited, Message: s.exitReasonLocked()}}
		}
		return nil // already answered with an error
	}
	s.sendServer(line)
	select {
	case resp := <-w.ch:
		return resp
	case <-wctx.Done():
		s.dropFrom(s.pending, string(key), w)
		return nil
	}
}

// original is the request as the client sent it, so that the client's
// exact bytes are forwarded when no layer changed the request.
type original struct {
	line         []byte
	tool         string
	params, args json.RawMessage
	id           json.RawMessage // the client's id
}

type originalKey struct{}

// rewritten reports whether a layer changed the request.
func (o *original) rewritten(req *Request) bool {
	return req.Tool != o.tool || !bytes.Equal(req.Params, o.params) || !bytes.Equal(req.Arguments, o.args)
}

// encodeRequest serialises a request a layer changed (or made): the
// judged values are what the server gets.
func encodeRequest(req *Request) ([]byte, error) {
	params := req.Params
	if req.Method == "tools/call" {
		var p map[string]json.RawMessage
		if len(req.Params) > 0 {
			if err := json.Unmarshal(req.Params, &p); err != nil {
				return nil, fmt.Errorf("re-encode tools/call: %w", err)
			}
		}
		if p == nil {
			p = map[string]json.RawMessage{}
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
	out, err := (&jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: req.ID, Method: req.Method, Params: params}).Marshal()
	if err != nil {
		return nil, err
	}
	// What a layer produced is held to the same reading as what a client
	// sends: no duplicate keys, valid UTF-8.
	var sc jsonrpc.Scanner
	if _, err := sc.Scan(out); err != nil {
		return nil, fmt.Errorf("a layer's rewrite is not a valid message: %w", err)
	}
	return out, nil
}

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

// cancelled handles notifications/cancelled from the client: the request
// is forgotten (the client expects no answer): one with the server is dropped
// from the pending table, one still in a wait (see slow) stops waiting.
func (s *session) cancelled(line []byte) {
	var n struct {
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &n) != nil || len(n.Params.RequestID) == 0 {
		return
	}
	key, ok := jsonrpc.AppendIDKey(nil, n.Params.RequestID)
	if !ok {
		return
	}
	if w, ok := s.takePending(key); ok {
		if w.cancel != nil {
			w.cancel()
		}
		return
	}
	// Not with the server yet: still in a Waiter's wait.
	var cancel context.CancelFunc
	s.mu.Lock()
	if ws := s.waiting[string(key)]; len(ws) > 0 {
		cancel = ws[0].cancel
	}
	s.mu.Unlock()
	if cancel != nil {
		cancel()
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

// readServer relays messages from the server until its stdout closes.
func (s *session) readServer(stdout io.Reader) {
	r := jsonrpc.NewReader(stdout)
	r.Max = s.maxMessage()
	s.sr = r
	var sc jsonrpc.Scanner
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

// serverMessage relays what the server sends on its own, through the
// hooks. A list_changed is counted first, so that a layer sees it by the
// time the client can have acted on it.
func (s *session) serverMessage(env *jsonrpc.Envelope, line []byte) {
	if env.Kind == jsonrpc.KindNotification {
		s.notices.Add(env.MethodName)
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

func (s *session) failPending(id []byte, code int, msg string) {
	key, ok := jsonrpc.AppendIDKey(nil, id)
	if !ok {
		return
	}
	if w, ok := s.takePending(key); ok {
		s.fail(w, code, msg)
	}
}

func (s *session) replyError(id []byte, code int, msg string) {
	if err := s.toClient.WriteMessage(jsonrpc.NewError(id, code, msg, nil)); err != nil {
		s.writeFailed(err)
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
