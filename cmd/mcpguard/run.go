package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/classify"
	"github.com/mcpguard/mcpguard/guard/configs"
	"github.com/mcpguard/mcpguard/guard/policy"
)

// exitServerExited is the status of `mcpguard run` when the server ended on
// its own while the client was still connected.
const exitServerExited = 3

// exitDenied is the status of `mcpguard call` when a layer denied the call.
const exitDenied = 4

// exitNotStarted is the status of `run` and `call` when the server was never
// started: its config cannot run here (a config with L3 fails closed on a
// kernel without support) or its command could not be started. Distinct
// from 1 so that a script can tell "the guard refused to run it" from "the
// tool failed".
const exitNotStarted = 5

// guardFlags are the flags run and call share.
type guardFlags struct {
	config, policy, manifest, audit, server, l3, cwd string
	grace                                            time.Duration
	maxMessage                                       int
	vars                                             varsFlag
	classifier                                       classify.Flags
}

type varsFlag map[string]string

func (v varsFlag) String() string { return "" }
func (v varsFlag) Set(s string) error {
	k, val, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want NAME=VALUE, got %q", s)
	}
	v[k] = val
	return nil
}

func (g *guardFlags) register(fs *flag.FlagSet) {
	g.vars = varsFlag{}
	fs.StringVar(&g.config, "config", configs.C0, "defence config: "+strings.Join(configs.Names(), ", "))
	fs.StringVar(&g.policy, "policy", "", "the server's L1 policy `file` (JSON; see docs/policy.md)")
	fs.StringVar(&g.manifest, "manifest", "", "the server's AgentBound manifest `file` (C-AB configs)")
	fs.StringVar(&g.audit, "audit", "", "append audit events (JSON lines) to `file`; - for stderr")
	fs.StringVar(&g.server, "server", "", "server `name` for audit events (default: from the policy file or the command)")
	fs.StringVar(&g.l3, "l3", "", "kernel backend for configs with L3: auto, ebpf or landlock")
	fs.StringVar(&g.cwd, "cwd", "", "run the server in `dir`, and judge relative path arguments against it (default: the policy's workdir, else its first filesystem root)")
	fs.DurationVar(&g.grace, "grace", guard.DefaultGrace, "time the server gets after EOF, and after SIGTERM, before the next step")
	fs.IntVar(&g.maxMessage, "max-message", guard.DefaultMaxMessage, "largest JSON-RPC message in `bytes` (-1: no limit)")
	g.classifier.Register(fs)
	fs.Var(g.vars, "var", "`NAME=VALUE` for ${NAME} in policy files (repeatable; WS, HOME and TMP default to the working directory, $HOME and the temp dir)")
}

// openAudit opens the audit log --audit names: none, stderr (-) or a file
// appended to; close releases the file.
func openAudit(s stdio, file string) (*audit.Logger, func(), error) {
	switch file {
	case "":
		return nil, func() {}, nil
	case "-":
		return audit.New(s.err), func() {}, nil
	}
	f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open audit log: %w", err)
	}
	return audit.New(f), func() { f.Close() }, nil
}

// proxy builds the Proxy for server command argv; close releases the audit file.
func (g *guardFlags) proxy(s stdio, argv []string) (p *guard.Proxy, close func(), err error) {
	if len(argv) == 0 {
		return nil, nil, fmt.Errorf("%w: no server command after --", errUsage)
	}
	logger, closer, err := openAudit(s, g.audit)
	if err != nil {
		return nil, nil, err
	}
	vars := map[string]string{"HOME": os.Getenv("HOME"), "TMP": os.TempDir()}
	if wd, err := os.Getwd(); err == nil {
		vars["WS"] = wd
	}
	for k, v := range g.vars {
		vars[k] = v
	}
	server := g.server
	if server == "" {
		// The session is named after the policy's server field, whatever
		// the file is called: audit events, and so the overrides made
		// from them, must name the server the policy is for.
		if g.policy != "" {
			if p, err := policy.Load(g.policy, vars); err == nil && p.Server != "" {
				server = p.Server
			} else {
				server = strings.TrimSuffix(filepath.Base(g.policy), ".json")
			}
		} else {
			server = filepath.Base(argv[0])
		}
	}
	// L3 denials are explained as they happen (configs.Explainer); the
	// kernel's reports reach it once the server runs, after x is set.
	var x *configs.Explainer
	dir := g.cwd
	if dir != "" {
		if dir, err = filepath.Abs(dir); err != nil {
			closer()
			return nil, nil, fmt.Errorf("%w: --cwd: %v", errUsage, err)
		}
	}
	setup, err := configs.Build(g.config, configs.Options{
		Server:       server,
		PolicyFile:   g.policy,
		ManifestFile: g.manifest,
		Audit:        logger,
		AuditFile:    g.audit,
		L3:           g.l3,
		Vars:         vars,
		OnDenial:     func(e audit.Event) { x.Event(e) },
		Dir:          dir,
	})
	if err != nil {
		closer()
		if errors.Is(err, configs.ErrUnknown) {
			return nil, nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		return nil, nil, &exitCode{code: exitNotStarted, err: fmt.Errorf("server not started: %w", err)}
	}
	if err := g.classifier.Apply(setup, server, logger); err != nil {
		if setup.Sandbox != nil {
			setup.Sandbox.Close()
		}
		closer()
		return nil, nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	stages, stderr := setup.Stages, s.err
	if setup.Sandbox != nil {
		// Say which kernel backend enforces, and what it cannot stop, so
		// that `--l3 auto` is never a silent choice.
		msg := "mcpguard: " + setup.Name + ": L3 by " + setup.Sandbox.Name()
		if l := configs.Limits(setup); l != "" {
			msg += " (" + l + ")"
		}
		fmt.Fprintln(s.err, msg)
		x = newExplainer(s, setup.Sandbox.Name())
		x.LogTo(logger, server, setup.Name)
		stages = append(slices.Clip(stages), x.Stage())
		stderr = io.MultiWriter(s.err, x)
	}
	return &guard.Proxy{
		Command:     argv,
		Server:      server,
		Config:      setup.Name,
		Stages:      stages,
		ServerHooks: setup.ServerHooks,
		Prepare:     setup.Prepare,
		Sandbox:     setup.Sandbox,
		Dir:         setup.Dir,
		Stderr:      stderr,
		Grace:       g.grace,
		MaxMessage:  g.maxMessage,
	}, closer, nil
}

func cmdRun(ctx context.Context, s stdio, args []string) error {
	fs := newFlags(s, "run", "[flags] -- CMD [ARGS...]",
		`Runs the MCP server CMD as a subprocess and relays MCP (JSON-RPC over stdio)
between it and the client on stdin/stdout, through the layers of --config.
Stdout carries only JSON-RPC; diagnostics and the server's stderr go to stderr.
Put it in an MCP client's config in place of the server command, e.g.
  "command": "mcpguard",
  "args": ["run", "--config", "C0", "--", "npx", "@modelcontextprotocol/server-filesystem", "/data"]

Exit status: 0 when the client closed the session, 3 when the server exited
on its own (every request in flight got a JSON-RPC error first), 5 when the
server was not started (its config cannot run here: a config with L3 fails
closed), 1 for other errors, 2 for usage.`)
	var g guardFlags
	g.register(fs)
	listen := fs.String("listen", "", "serve over Streamable HTTP on `address` (loopback) instead of stdio; see docs/gateway.md")
	cpuProfile := fs.String("cpuprofile", "", "write the proxy's CPU profile to `file` when the session ends (go tool pprof)")
	traceFile := fs.String("trace", "", "write the proxy's execution trace to `file` (go tool trace)")
	warm := fs.Int("warm", 0, "with --listen: keep `n` sessions of the server started before clients ask for them")
	flags, argv := splitDashes(args)
	if err := fs.Parse(flags); err != nil {
		return err
	}
	if len(argv) == 0 && fs.NArg() > 0 {
		argv = fs.Args() // tolerate a missing "--" when no flag follows
	}
	if *warm != 0 && *listen == "" {
		return fmt.Errorf("%w: --warm needs --listen", errUsage)
	}
	if *listen != "" {
		if g.classifier.Enabled() {
			return fmt.Errorf("%w: --classifier does not work with --listen yet", errUsage)
		}
		return runListen(ctx, s, &g, argv, listenOptions{addr: *listen, warm: *warm, cpuProfile: *cpuProfile, trace: *traceFile})
	}
	p, closeAudit, err := g.proxy(s, argv)
	if err != nil {
		return err
	}
	defer closeAudit()
	p.Stages = withDenialEcho(p.Stages, s.err, g.audit)
	stop, err := profile(*cpuProfile, *traceFile)
	if err != nil {
		return err
	}
	defer stop()
	// The server's last stderr, for the report when it exits under L3.
	tail := &tailBuffer{max: 32 << 10}
	if p.Sandbox != nil {
		p.Stderr = io.MultiWriter(p.Stderr, tail)
	}
	if err := p.Serve(ctx, s.in, s.out); err != nil {
		if errors.Is(err, guard.ErrServerExited) {
			if p.Sandbox != nil {
				var events []audit.Event
				if d, ok := p.Sandbox.(interface{ Denied() []audit.Event }); ok {
					events = d.Denied()
				}
				fmt.Fprint(s.err, configs.ExplainExit(p.Sandbox.Name(), configs.Denials(events, tail.bytes(), 8)))
			}
			return &exitCode{code: exitServerExited, err: err}
		}
		return err
	}
	return nil
}

// profile starts a CPU profile and an execution trace of the proxy, each
// when its file is named, so that the proxy can be profiled as a client
// drives it (the standalone benchmark); stop ends both.
func profile(cpuFile, traceFile string) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, f := range stops {
			f()
		}
	}
	if cpuFile != "" {
		f, err := os.Create(cpuFile)
		if err != nil {
			return nil, fmt.Errorf("cpu profile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("cpu profile: %w", err)
		}
		stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
	}
	if traceFile != "" {
		f, err := os.Create(traceFile)
		if err != nil {
			stop()
			return nil, fmt.Errorf("trace: %w", err)
		}
		if err := trace.Start(f); err != nil {
			f.Close()
			stop()
			return nil, fmt.Errorf("trace: %w", err)
		}
		stops = append(stops, func() { trace.Stop(); f.Close() })
	}
	return stop, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.b...)
}

func cmdCall(ctx context.Context, s stdio, args []string) error {
	fs := newFlags(s, "call", "[flags] --tool NAME [--args JSON] -- CMD [ARGS...]",
		`Starts the MCP server CMD behind the guard, makes one tools/call, prints the
result (the CallToolResult as JSON) on stdout and ends the session.

Exit status: 0 on success, 1 when the tool reported an error (the result is
still printed) or the call failed, 4 when a layer of the guard denied the
call (the rule is named on stderr), 5 when the server was not started (its
config cannot run here, or it exited before answering initialize), 2 for usage.`)
	var g guardFlags
	g.register(fs)
	tool := fs.String("tool", "", "tool `name` to call (required)")
	rawArgs := fs.String("args", "{}", "tool arguments as a JSON object")
	timeout := fs.Duration("timeout", time.Minute, "give up on the call after this long")
	flags, argv := splitDashes(args)
	if err := fs.Parse(flags); err != nil {
		return err
	}
	if *tool == "" {
		return fmt.Errorf("%w: --tool is required", errUsage)
	}
	var arguments map[string]any
	if err := json.Unmarshal([]byte(*rawArgs), &arguments); err != nil {
		return fmt.Errorf("%w: --args must be a JSON object: %v", errUsage, err)
	}
	p, closeAudit, err := g.proxy(s, argv)
	if err != nil {
		return err
	}
	defer closeAudit()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	sess, err := guard.Open(ctx, p)
	if err != nil {
		return &exitCode{code: exitNotStarted, err: fmt.Errorf("server not started: %w", err)}
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = *tool
	req.Params.Arguments = arguments
	res, callErr := sess.CallTool(ctx, req)
	closeErr := sess.Close()
	if callErr != nil {
		if msg, ok := guard.IsDenied(callErr); ok {
			return &exitCode{code: exitDenied, err: errors.New(msg)}
		}
		if closeErr != nil {
			return fmt.Errorf("call %s: %w (%v)", *tool, callErr, closeErr)
		}
		return fmt.Errorf("call %s: %w", *tool, callErr)
	}
	if err := writeJSON(s.out, res); err != nil {
		return err
	}
	if res.IsError {
		return &exitCode{code: 1, err: fmt.Errorf("tool %s reported an error", *tool)}
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
