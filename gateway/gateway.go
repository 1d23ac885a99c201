package gateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/configs"
	"github.com/mcpguard/mcpguard/guard/runtime"
)

// Errors for the CLI to branch on.
var (
	// ErrRemoteL3 refuses an L3 config for a remote server: there is no
	// process of its on this machine for the kernel to confine.
	ErrRemoteL3 = errors.New("a remote server has no process for L3 to confine; use C0, C-AB or C-app")
)

// remoteConfig reports whether a remote server may have config name: only
// the configs without L3. Checked by name first, so that the refusal does
// not depend on whether this kernel could have enforced L3; the built setup
// is checked again in build.
func remoteConfig(name string) bool {
	switch name {
	case configs.C0, configs.CAB, configs.CApp:
		return true
	}
	return false
}

// Options are the gateway's settings that do not come from gateway.json.
type Options struct {
	// Stderr gets diagnostics and the servers' stderr (nil: os.Stderr).
	Stderr io.Writer
	// Grace is each proxy's grace period (0: guard.DefaultGrace).
	Grace time.Duration
	// Bridge returns the argv of a stdio-to-Streamable-HTTP bridge for a
	// remote server (see Bridge); the proxy runs it as the server, so the
	// layers see its messages as any other server's.
	Bridge func(url string) []string
	// Vars are defaults for ${NAME} in policy files; each server's vars win.
	Vars map[string]string
	// Loopback says the gateway listens on loopback only: a request whose
	// Host is not a loopback name is refused (DNS rebinding), unless
	// gateway.json's allowed_hosts lists it.
	Loopback bool
	// NewProxy, when set, makes each session's proxy instead of building
	// it from the server's config (for harnesses that built the layers
	// themselves, such as the corpus eval over HTTP).
	NewProxy func(server, identity string) (*guard.Proxy, error)
	// Direct, when set, names the server /mcp serves directly (and
	// transparently) instead of the aggregate of all servers.
	Direct string
}

// Gateway serves the configured servers over Streamable HTTP. Handler
// gives its http.Handler; Close ends every session.
type Gateway struct {
	cfg   *Config
	opt   Options
	audit *audit.Logger // the gateway's own events

	serverAudit map[string]*audit.Logger
	files       []*os.File
	tokens      []token
	jwks        *jwks // OAuth resource-server mode
	origins     map[string]bool
	hosts       map[string]bool

	mu       sync.Mutex
	sessions map[string]*session
	callers  map[string]*callerState
	servers  []*http.Server // started by Serve
	closing  bool
	wg       sync.WaitGroup // live sessions

	mem  *memory
	warm *warmPool
	// resolved keeps what L3's runtime resolver learned across sessions
	// of the same servers (runtime.Cache).
	resolved *runtime.Cache

	conns        atomic.Int64 // open connections (Listener)
	refusedConns atomic.Int64 // closed at once, past max_connections
	unauth       unauthConns  // open, no authenticated request yet (Listener)

	// started counts server sessions started, for tests that check that a
	// refused request reached no server.
	started atomic.Int64
	// testSession, when a test sets it (export_test.go) before serving,
	// sees every session made.
	testSession func(*session)

	stopReaper chan struct{}
	reaperDone chan struct{}
}

type token struct {
	Token
	hash []byte
}

// principal is who a request comes from and the servers it may reach.
type principal struct {
	name    string
	servers []string // "*" for all
}

func (p *principal) grants(server string) bool {
	return slices.Contains(p.servers, "*") || slices.Contains(p.servers, server)
}

// New checks that every server's config builds here (configs with L3 fail
// closed: a gateway that cannot enforce them does not start) and returns a
// gateway ready to serve.
func New(cfg *Config, opt Options) (*Gateway, error) {
	if opt.Stderr == nil {
		opt.Stderr = os.Stderr
	}
	g := &Gateway{
		cfg:         cfg,
		opt:         opt,
		serverAudit: map[string]*audit.Logger{},
		origins:     map[string]bool{},
		hosts:       map[string]bool{},
		sessions:    map[string]*session{},
		callers:     map[string]*callerState{},
		stopReaper:  make(chan struct{}),
		resolved:    runtime.NewCache(),
		reaperDone:  make(chan struct{}),
	}
	opened := map[string]*audit.Logger{}
	openLog := func(p string) (*audit.Logger, error) {
		if p == "" {
			return nil, nil
		}
		if p == "-" {
			return audit.New(opt.Stderr), nil
		}
		p = cfg.path(p)
		if l := opened[p]; l != nil {
			return l, nil
		}
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open audit log: %w", err)
		}
		g.files = append(g.files, f)
		opened[p] = audit.New(f)
		return opened[p], nil
	}
	var err error
	if g.audit, err = openLog(cfg.Audit); err != nil {
		g.closeFiles()
		return nil, err
	}
	for _, name := range cfg.names() {
		sc := cfg.Servers[name]
		if g.serverAudit[name], err = openLog(sc.Audit); err != nil {
			g.closeFiles()
			return nil, err
		}
		if opt.NewProxy != nil {
			continue
		}
		if sc.URL != "" && opt.Bridge == nil {
			g.closeFiles()
			return nil, fmt.Errorf("server %s: remote servers need a bridge command", name)
		}
		setup, err := g.build(name, nil)
		if err != nil {
			g.closeFiles()
			return nil, fmt.Errorf("server %s: %w", name, err)
		}
		if setup.Sandbox != nil {
			setup.Sandbox.Close()
		}
	}
	for _, t := range cfg.Tokens {
		h, _ := hex.DecodeString(t.SHA256)
		g.tokens = append(g.tokens, token{Token: t, hash: h})
	}
	for _, o := range cfg.AllowedOrigins {
		g.origins[canonOrigin(o)] = true
	}
	if cfg.OAuth != nil {
		g.jwks = newJWKS(cfg.OAuth)
	}
	for _, h := range cfg.AllowedHosts {
		g.hosts[strings.ToLower(h)] = true
	}
	budget := int64(cfg.Limits.MaxMemory)
	if budget == 0 {
		budget = defaultMemoryBudget()
	}
	g.mem = &memory{budget: budget, report: g.memoryReport}
	g.warm = newWarmPool(g)
	g.warm.start()
	go g.reaper()
	return g, nil
}

func (g *Gateway) closeFiles() {
	for _, f := range g.files {
		f.Close()
	}
}

// build builds server name's config for one session; logger receives the
// layers' events.
func (g *Gateway) build(name string, logger *audit.Logger) (*configs.Setup, error) {
	sc := g.cfg.Servers[name]
	vars := map[string]string{"HOME": os.Getenv("HOME"), "TMP": os.TempDir()}
	if g.cfg.dir != "" {
		vars["WS"] = g.cfg.dir
	} else if wd, err := os.Getwd(); err == nil {
		vars["WS"] = wd
	}
	for k, v := range g.opt.Vars {
		vars[k] = v
	}
	for k, v := range sc.Vars {
		vars[k] = v
	}
	if sc.URL != "" && !remoteConfig(sc.Config) {
		return nil, fmt.Errorf("config %s: %w", sc.Config, ErrRemoteL3)
	}
	setup, err := configs.Build(sc.Config, configs.Options{
		Server:       name,
		PolicyFile:   g.cfg.path(sc.Policy),
		ManifestFile: g.cfg.path(sc.Manifest),
		Audit:        logger,
		L3:           sc.L3,
		Vars:         vars,
		RuntimeCache: g.resolved,
	})
	if err != nil {
		return nil, err
	}
	if sc.URL != "" && setup.Sandbox != nil {
		setup.Sandbox.Close()
		return nil, fmt.Errorf("config %s: %w", sc.Config, ErrRemoteL3)
	}
	return setup, nil
}

// backend starts a session of server name for identity, or takes a warm
// one.
func (g *Gateway) backend(name, who string) (*backend, error) {
	if b := g.warm.take(name, who); b != nil {
		return b, nil
	}
	ident := &identity{}
	ident.set(who)
	p, err := g.proxy(name, ident)
	if err != nil {
		return nil, err
	}
	return startBackend(name, p, ident), nil
}

// proxy builds the proxy for one session of server name; the layers' audit
// events name ident.
func (g *Gateway) proxy(name string, ident *identity) (*guard.Proxy, error) {
	if g.opt.NewProxy != nil {
		p, err := g.opt.NewProxy(name, ident.get())
		if err != nil {
			return nil, err
		}
		start := p.OnStart
		p.OnStart = func(pid int) {
			g.started.Add(1)
			if start != nil {
				start(pid)
			}
		}
		return p, nil
	}
	sc := g.cfg.Servers[name]
	var logger *audit.Logger
	if l := g.serverAudit[name]; l != nil {
		logger = audit.New(identityWriter{l: l, identity: ident})
	}
	setup, err := g.build(name, logger)
	if err != nil {
		return nil, err
	}
	argv := sc.Command
	prepare := setup.Prepare
	if sc.URL != "" {
		argv = g.opt.Bridge(sc.URL)
		// After the layers' hooks, so that L1's environment allow-list
		// does not strip what the bridge needs.
		prepare = append(slices.Clip(prepare), bridgeEnv(sc.Headers))
	}
	var env []string
	if len(sc.Env) > 0 {
		env = append(os.Environ(), sc.Env...)
	}
	return &guard.Proxy{
		Command:     argv,
		Dir:         g.cfg.path(sc.Dir),
		Env:         env,
		Server:      name,
		Config:      setup.Name,
		Stages:      setup.Stages,
		ServerHooks: setup.ServerHooks,
		Prepare:     prepare,
		Sandbox:     setup.Sandbox,
		Stderr:      g.opt.Stderr,
		Grace:       g.opt.Grace,
		OnStart:     func(int) { g.started.Add(1) },
	}, nil
}

// identityWriter stamps the session's identity on the layers' events.
type identityWriter struct {
	l        *audit.Logger
	identity *identity
}

func (w identityWriter) Write(p []byte) (int, error) {
	var e audit.Event
	if err := json.Unmarshal(p, &e); err != nil {
		return 0, fmt.Errorf("audit event: %w", err)
	}
	if e.Identity == "" {
		e.Identity = w.identity.get()
	}
	return len(p), w.l.Log(e)
}

// originAllowed: no Origin (not a browser), a configured one, or, when
// none is configured, a page on this machine.
func (g *Gateway) originAllowed(o string) bool {
	if o == "" {
		return true
	}
	c := canonOrigin(o)
	if len(g.origins) > 0 {
		return g.origins[c]
	}
	u, err := url.Parse(c)
	return err == nil && c != "" && isLoopbackHost(u.Host)
}

// hostAllowed guards a loopback gateway against DNS rebinding: a page on
// evil.example whose name now resolves to 127.0.0.1 still sends its own
// name in Host.
func (g *Gateway) hostAllowed(host string) bool {
	if g.hosts[strings.ToLower(host)] {
		return true
	}
	return !g.opt.Loopback || isLoopbackHost(host)
}

// Started reports how many server sessions the gateway has started.
func (g *Gateway) Started() int64 { return g.started.Load() }

// Sessions reports the number of live sessions.
func (g *Gateway) Sessions() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.sessions)
}

// authenticate returns who a bearer secret belongs to: a JWT access token
// of the configured issuer, or a static token. Every static token is
// compared, in constant time, so timing tells nothing about which matched.
func (g *Gateway) authenticate(ctx context.Context, secret string) (*principal, error) {
	if g.jwks != nil && looksLikeJWT(secret) {
		sub, servers, err := g.jwks.verify(ctx, secret)
		if err != nil {
			return nil, err
		}
		return &principal{name: "oauth:" + sub, servers: servers}, nil
	}
	h := sha256.Sum256([]byte(secret))
	var found *token
	for i := range g.tokens {
		if subtle.ConstantTimeCompare(h[:], g.tokens[i].hash) == 1 {
			found = &g.tokens[i]
		}
	}
	if found == nil {
		return nil, errors.New("unknown bearer token")
	}
	return &principal{name: found.Name, servers: found.Servers}, nil
}

// addSession registers s under a fresh id, within the bounds on sessions
// (see admitSession); names are the servers it will start.
func (g *Gateway) addSession(s *session, names []string) error {
	var b [16]byte
	rand.Read(b[:])
	s.id = hex.EncodeToString(b[:])
	// Memory first, without g.mu: measuring lists the sessions.
	if err := g.mem.admit(names); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.admitSession(s.identity); err != nil {
		return err
	}
	s.caller = g.caller(s.identity)
	s.caller.sessions++
	g.sessions[s.id] = s
	g.wg.Add(1)
	return nil
}

func (g *Gateway) lookup(id string) *session {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sessions[id]
}

func (g *Gateway) removeSession(s *session) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sessions[s.id] == s {
		delete(g.sessions, s.id)
		s.caller.sessions--
	}
}

// reaper ends sessions idle for longer than the idle timeout.
func (g *Gateway) reaper() {
	defer close(g.reaperDone)
	idle := g.cfg.Limits.idleTimeout()
	t := time.NewTicker(max(idle/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-g.stopReaper:
			return
		case now := <-t.C:
			g.mu.Lock()
			var stale []*session
			for _, s := range g.sessions {
				if s.idleSince(now) > idle {
					stale = append(stale, s)
				}
			}
			g.mu.Unlock()
			for _, s := range stale {
				s.end(fmt.Sprintf("session idle for over %v", idle))
			}
		}
	}
}

// Close stops taking sessions, ends every session (their servers get EOF,
// then SIGTERM, then SIGKILL, each after the grace period) and waits for
// them until ctx is done.
func (g *Gateway) Close(ctx context.Context) error {
	g.mu.Lock()
	already := g.closing
	g.closing = true
	var all []*session
	for _, s := range g.sessions {
		all = append(all, s)
	}
	g.mu.Unlock()
	if !already {
		close(g.stopReaper)
		<-g.reaperDone
		g.warm.close()
	}
	for _, s := range all {
		s.end("gateway shutting down")
	}
	done := make(chan struct{})
	go func() { g.wg.Wait(); g.warm.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("close gateway: %w", ctx.Err())
	}
	if !already {
		g.closeFiles()
	}
	return nil
}

// event writes one gateway audit event.
func (g *Gateway) event(e audit.Event) {
	e.Layer = "gateway"
	if e.Server == "" {
		e.Server = "*"
	} else if sc := g.cfg.Servers[e.Server]; sc != nil {
		e.Config = sc.Config
	}
	if err := g.audit.Log(e); err != nil {
		fmt.Fprintf(g.opt.Stderr, "mcpguard gateway: %v\n", err)
	}
}

func (g *Gateway) logf(format string, args ...any) {
	fmt.Fprintf(g.opt.Stderr, "mcpguard gateway: "+format+"\n", args...)
}
