package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcpguard/mcpguard/gateway"
	"github.com/mcpguard/mcpguard/guard"
)

// defaultListen is the gateway's address unless told otherwise: loopback,
// as the MCP specification asks of local Streamable HTTP servers.
const defaultListen = "127.0.0.1:8808"

func cmdGateway(ctx context.Context, s stdio, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "hash-token":
			return cmdHashToken(s)
		case "bridge":
			return cmdBridge(ctx, s, args[1:])
		}
	}
	fs := newFlags(s, "gateway", "--config gateway.json [--listen ADDR]",
		`Serves the servers of gateway.json over MCP's Streamable HTTP transport:
each at /servers/<name>/mcp, and all of them at /mcp as one MCP server
(names kept as each server gives them; colliding or confusable ones
prefixed by server, fs__read_file). Every client session gets its own
server process behind its own guard (config, policy, audit log and L3
domain as in 'mcpguard run'). See docs/gateway.md for gateway.json.

It listens on loopback unless --allow-remote is given, which also needs
bearer tokens (or OAuth) in gateway.json. SIGINT or SIGTERM: stop taking requests,
end every session, stop the servers.

  mcpguard gateway hash-token   reads a secret on stdin, prints its sha256
                                for gateway.json's "tokens"`)
	config := fs.String("config", "", "gateway.json `file` (required)")
	listen := fs.String("listen", defaultListen, "`address` to listen on")
	allowRemote := fs.Bool("allow-remote", false, "allow a non-loopback --listen (gateway.json must list tokens)")
	grace := fs.Duration("grace", guard.DefaultGrace, "time each server gets after EOF, and after SIGTERM, before the next step")
	cpuProfile := fs.String("cpuprofile", "", "write the gateway's CPU profile to `file` when it stops (go tool pprof)")
	traceFile := fs.String("trace", "", "write the gateway's execution trace to `file` (go tool trace)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *config == "" || fs.NArg() > 0 {
		return fmt.Errorf("%w: want --config gateway.json and no arguments", errUsage)
	}
	cfg, err := gateway.LoadConfig(*config)
	if err != nil {
		if errors.Is(err, gateway.ErrConfig) {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		return err
	}
	return serveGateway(ctx, s, cfg, gatewayOptions{listen: *listen, allowRemote: *allowRemote, grace: *grace,
		cpuProfile: *cpuProfile, trace: *traceFile})
}

type gatewayOptions struct {
	listen      string
	allowRemote bool
	grace       time.Duration
	direct      string // serve this server at /mcp, as `run --listen` does
	cpuProfile  string // write a CPU profile of the gateway here, until it stops
	trace       string // and an execution trace
}

// errRemote refuses a listen address off loopback without the flag and auth.
var errRemote = errors.New("refusing to listen off loopback")

// checkListen refuses a non-loopback address unless allowed and tokens
// protect it; it reports whether addr is loopback.
func checkListen(addr string, allowRemote, authenticated bool) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("%w: --listen %q: %v", errUsage, addr, err)
	}
	loopback := host == "localhost"
	if ip := net.ParseIP(host); ip != nil {
		loopback = ip.IsLoopback()
	}
	switch {
	case loopback:
		return true, nil
	case !allowRemote:
		return false, fmt.Errorf("%w: %w %q without --allow-remote", errUsage, errRemote, addr)
	case !authenticated:
		return false, fmt.Errorf("%w: %w %q: gateway.json lists no tokens and no oauth", errUsage, errRemote, addr)
	}
	return false, nil
}

func serveGateway(ctx context.Context, s stdio, cfg *gateway.Config, o gatewayOptions) error {
	loopback, err := checkListen(o.listen, o.allowRemote, cfg.Authenticated())
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	g, err := gateway.New(cfg, gateway.Options{
		Stderr:   s.err,
		Grace:    o.grace,
		Direct:   o.direct,
		Loopback: loopback,
		Bridge:   func(url string) []string { return []string{exe, "gateway", "bridge", "--url", url} },
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		g.Close(context.Background())
		return fmt.Errorf("listen: %w", err)
	}
	stopProfile, err := profile(o.cpuProfile, o.trace)
	if err != nil {
		ln.Close()
		g.Close(context.Background())
		return err
	}
	defer stopProfile()
	served := make(chan error, 1)
	go func() { served <- g.Serve(ln) }()
	fmt.Fprintf(s.err, "mcpguard gateway: listening on http://%s\n", ln.Addr())
	select {
	case err := <-served:
		g.Close(context.Background())
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	fmt.Fprintln(s.err, "mcpguard gateway: shutting down")
	// Stop accepting, end the sessions (their streams end with them), then
	// wait for the connections and the servers to be gone.
	stop, cancel := context.WithTimeout(context.Background(), 2*o.grace+10*time.Second)
	defer cancel()
	return g.Shutdown(stop)
}

// cmdHashToken prints the sha256 of the secret on stdin's first line.
func cmdHashToken(s stdio) error {
	line, err := bufio.NewReader(s.in).ReadString('\n')
	secret := strings.TrimRight(line, "\r\n")
	if secret == "" {
		if err != nil {
			return fmt.Errorf("%w: hash-token reads the secret on stdin", errUsage)
		}
		return fmt.Errorf("%w: empty secret", errUsage)
	}
	fmt.Fprintln(s.out, gateway.HashToken(secret))
	return nil
}

// listenOptions are `run`'s flags that only --listen uses.
type listenOptions struct {
	addr       string
	warm       int
	cpuProfile string
	trace      string
}

// runListen is `mcpguard run --listen ADDR`: the one server of the command
// line, served over Streamable HTTP at /mcp (and /servers/<name>/mcp).
func runListen(ctx context.Context, s stdio, g *guardFlags, argv []string, lo listenOptions) error {
	if len(argv) == 0 {
		return fmt.Errorf("%w: no server command after --", errUsage)
	}
	name := g.server
	if name == "" {
		if g.policy != "" {
			name = strings.TrimSuffix(filepath.Base(g.policy), ".json")
		} else {
			name = filepath.Base(argv[0])
		}
	}
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, name)
	sc := &gateway.ServerConfig{
		Config:   g.config,
		Policy:   g.policy,
		Manifest: g.manifest,
		Audit:    g.audit,
		L3:       g.l3,
		Vars:     g.vars,
		Command:  argv,
		Warm:     lo.warm,
	}
	cfg := &gateway.Config{Servers: map[string]*gateway.ServerConfig{name: sc}}
	if g.maxMessage > 0 {
		cfg.Limits.MaxMessage = int64(g.maxMessage) // the largest request body
	}
	if err := cfg.Check(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return serveGateway(ctx, s, cfg, gatewayOptions{listen: lo.addr, grace: g.grace, direct: name,
		cpuProfile: lo.cpuProfile, trace: lo.trace})
}

// cmdBridge is the stdio side of a remote upstream: the gateway's proxy
// runs it as the server, so that L1 and L2 see the remote server's messages.
func cmdBridge(ctx context.Context, s stdio, args []string) error {
	fs := newFlags(s, "gateway bridge", "--url URL",
		`Relays MCP between stdin/stdout and the Streamable HTTP server at URL. The
gateway runs it for servers of gateway.json that have a "url"; HTTP headers
for the remote server come in $`+gateway.BridgeHeadersEnv+` (a JSON object).`)
	url := fs.String("url", "", "the remote server's Streamable HTTP `URL`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *url == "" {
		return fmt.Errorf("%w: --url is required", errUsage)
	}
	headers, err := gateway.HeadersFromEnv()
	if err != nil {
		return err
	}
	if err := gateway.Bridge(ctx, *url, headers, s.in, s.out); err != nil {
		return &exitCode{code: exitServerExited, err: err}
	}
	return nil
}
