package guard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
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
	s := p.newSession(ctx, out)
	defer close(s.quit) // idle workers exit
	srv, err := s.start()
	if err != nil {
		return err
	}
	if p.Sandbox != nil {
		defer p.Sandbox.Close()
	}
	defer srv.stdout.Close()
	s.toServer = jsonrpc.NewWriter(srv.stdin)
	s.toServer.Canonical, s.toClient.Canonical = s.canon, s.canon

	serverDone := make(chan struct{})
	go func() {
		s.readServer(srv.stdout)
		close(serverDone)
	}()
	s.cr = jsonrpc.NewReader(in)
	s.cr.Max = s.maxMessage()
	go s.worker(s.readClient)

	s.awaitEnd(ctx, srv)
	serverEnded, waitErr := s.stop(srv, serverDone)
	reason := "server exited"
	if waitErr != nil {
		reason = "server exited: " + waitErr.Error()
	}
	if e, ok := p.Sandbox.(interface{ EndReason() string }); ok && e.EndReason() != "" {
		// The sandbox ended the session (a breached limit): say so.
		reason = e.EndReason()
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

// newSession is the state of one Serve call, writing to the client on out.
func (p *Proxy) newSession(ctx context.Context, out io.Writer) *session {
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
		canon:      len(p.Stages) > 0 || len(p.ServerHooks) > 0,
		serverReqs: make(map[string]string),
	}
	s.ctx = context.WithValue(WithNotices(ctx, &s.notices), sessionKey{}, s)
	s.csc.Strict = s.canon
	if s.stderr == nil {
		s.stderr = os.Stderr
	}
	s.grace = p.Grace
	if s.grace <= 0 {
		s.grace = DefaultGrace
	}
	return s
}

// serverProc is the running server: its process group and its ends of
// the stdio pipes.
type serverProc struct {
	group  *proctree.Group
	stdin  io.WriteCloser
	stdout *os.File
}

// start starts the server in a process group of its own, prepared by the
// Prepare functions and the sandbox. On an error nothing is left running
// and the sandbox is closed.
func (s *session) start() (*serverProc, error) {
	p := s.p
	cmd := exec.Command(p.Command[0], p.Command[1:]...)
	cmd.Dir = p.Dir
	cmd.Env = p.Env
	cmd.Stderr = proctree.Pipe(s.stderr)
	// A group of its own, so that shutdown reaches the server's children.
	proctree.Prepare(cmd)
	for _, prep := range p.Prepare {
		if err := prep(cmd); err != nil {
			return nil, fmt.Errorf("prepare server: %w", err)
		}
	}
	if p.Sandbox != nil {
		if err := p.Sandbox.Prepare(cmd); err != nil {
			return nil, fmt.Errorf("sandbox %s: %w", p.Sandbox.Name(), err)
		}
	}
	srv, err := s.startPrepared(cmd)
	if err != nil && p.Sandbox != nil {
		p.Sandbox.Close()
	}
	return srv, err
}

// startPrepared starts cmd with the proxy's pipes and tells the sandbox
// and OnStart its pid.
func (s *session) startPrepared(cmd *exec.Cmd) (*serverProc, error) {
	p := s.p
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("server stdin: %w", err)
	}
	// Our own pipe rather than StdoutPipe: Wait must not depend on stdout
	// closing, or a daemon that inherited it would keep the session alive
	// after the server itself exited.
	stdout, stdoutW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("server stdout: %w", err)
	}
	cmd.Stdout = stdoutW
	// Bounds Wait's copying of stderr when Stderr is not a file, for the
	// same reason.
	cmd.WaitDelay = s.grace
	group, err := proctree.Start(cmd)
	stdoutW.Close()
	if err != nil {
		stdout.Close()
		return nil, fmt.Errorf("start server: %w", err)
	}
	pid := group.Pid()
	if p.Sandbox != nil {
		if err := p.Sandbox.Started(pid); err != nil {
			group.Kill()
			<-group.Done()
			group.Close()
			stdout.Close()
			return nil, fmt.Errorf("sandbox %s: %w", p.Sandbox.Name(), err)
		}
	}
	if p.OnStart != nil {
		p.OnStart(pid)
	}
	return &serverProc{group: group, stdin: stdin, stdout: stdout}, nil
}

// awaitEnd returns when the session is over: the server exited, the client
// went away, ctx ended, or the client closed its side and its requests were
// answered (or the grace period passed).
func (s *session) awaitEnd(ctx context.Context, srv *serverProc) {
	select {
	case <-srv.group.Done():
	case <-s.clientDone:
		// The client sent all it will but may still read (a half-closed
		// pipe: `printf REQUESTS | mcpguard run`). Its requests are
		// answered before the server sees EOF, for up to the grace
		// period: many servers exit on EOF with calls still running.
		select {
		case <-s.drained():
		case <-time.After(s.grace):
		case <-srv.group.Done():
		case <-s.clientLost:
		case <-ctx.Done():
		}
	case <-s.clientLost:
	case <-ctx.Done():
	}
}

// stop ends the server (unless it already exited on its own: serverEnded)
// and relays what it wrote before it went; waitErr is how it ended.
func (s *session) stop(srv *serverProc, serverDone <-chan struct{}) (serverEnded bool, waitErr error) {
	select {
	case <-srv.group.Done(): // the server exited on its own
		serverEnded = true
		waitErr = srv.group.Err()
		srv.group.Close() // whatever the server left in its group goes with it
	default:
	}
	if !serverEnded {
		// The client is gone (or we were told to stop): EOF, then SIGTERM,
		// then SIGKILL, each after the grace period.
		waitErr = srv.group.Stop(s.grace, func() { srv.stdin.Close() })
	}
	srv.stdin.Close()
	// Relay what the server wrote before it exited; a process outside the
	// group that still holds its stdout gets a short while, then the pipe
	// is closed under it.
	select {
	case <-serverDone:
	case <-time.After(drainTime):
		srv.stdout.Close()
		<-serverDone
	}
	return serverEnded, waitErr
}
