package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/configs"
	resolve "github.com/mcpguard/mcpguard/guard/runtime"
	"github.com/mcpguard/mcpguard/lab/servers"
)

// Verdicts.
const (
	// Attack cases.
	Succeeded = "succeeded" // the oracle fired: the attack happened
	Blocked   = "blocked"   // the oracle did not fire
	// Benign cases.
	Passed        = "passed"         // the expected result came back
	FalsePositive = "false_positive" // it did not
	// Either: the harness itself failed (not the server, not the guard).
	Error = "error"
)

// Runner runs cases under configs.
type Runner struct {
	// Root is the repository root (policies, manifests, servers).
	Root string
	// BinDir holds the built Go servers.
	BinDir string
	// WorkDir is where case sandboxes are created (default os.TempDir()).
	WorkDir string
	// Connect starts a guarded session; default ProxyConnect.
	Connect Connector
	// Command returns a server's argv; default servers.Command.
	Command func(ctx context.Context, name, binDir string) ([]string, error)
	// CallTimeout bounds one tool call, CaseTimeout a whole case.
	CallTimeout, CaseTimeout time.Duration
	// Quiet is how long the sinks must stay silent before the harness
	// judges; Settle bounds the wait for a case's processes to finish
	// after the session ended (then they are killed).
	Quiet, Settle time.Duration
	// Audit receives the guard's audit events (may be nil).
	Audit *audit.Logger
	// Grace is the proxy's shutdown grace (stdin EOF, SIGTERM, SIGKILL).
	Grace time.Duration
	// Verbose receives servers' stderr (nil drops it).
	Verbose io.Writer
	// RuntimeCache keeps what L3's runtime resolver learned across the
	// cases of a run (configs.Options.RuntimeCache); nil keeps nothing.
	RuntimeCache *resolve.Cache

	// scale is what Scale was given: the servers' own time bounds follow
	// (servers.Addrs.TimeoutScale).
	scale float64

	// procs is the view of /proc the cases running at once share (set on
	// each case's copy of the Runner).
	procs *procTable
}

// Scale multiplies every time bound (call and case timeouts, quiet and
// settle times, grace) by f after the defaults are filled in: for slow hosts
// such as a TCG-emulated VM, where the defaults would cut live servers off.
// The corpus servers' own bounds (a git command, a program they run, an
// HTTP request) are stretched by f too (--timeout-scale).
func (r *Runner) Scale(f float64) {
	r.defaults()
	r.scale = f
	for _, d := range []*time.Duration{&r.CallTimeout, &r.CaseTimeout, &r.Quiet, &r.Settle, &r.Grace} {
		*d = time.Duration(float64(*d) * f)
	}
}

func (r *Runner) defaults() {
	if r.Connect == nil {
		r.Connect = ProxyConnect
	}
	if r.Command == nil {
		r.Command = servers.Command
	}
	if r.CallTimeout == 0 {
		r.CallTimeout = 10 * time.Second
	}
	if r.CaseTimeout == 0 {
		r.CaseTimeout = 30 * time.Second
	}
	if r.Quiet == 0 {
		r.Quiet = 100 * time.Millisecond
	}
	if r.Settle == 0 {
		r.Settle = 1500 * time.Millisecond
	}
	if r.Grace == 0 {
		r.Grace = 300 * time.Millisecond
	}
	if r.WorkDir == "" {
		r.WorkDir = os.TempDir()
	}
}

// Result is the verdict on one case under one config, with the evidence
// summarised for the reader.
type Result struct {
	ID       string `json:"id"`
	Category string `json:"category"`
	Server   string `json:"server"`
	Config   string `json:"config"`
	Attack   bool   `json:"attack"`
	Visible  bool   `json:"visible_in_arguments"`
	Oracle   string `json:"oracle"`
	// Fired is the oracle's answer: the attack happened (attack cases) or
	// the expected result came back (benign cases).
	Fired   bool   `json:"fired"`
	Verdict string `json:"verdict"`
	Detail  string `json:"detail"`
	// Denied lists the calls (by index) the guard refused; informational,
	// the verdict never depends on it.
	Denied []int `json:"denied,omitempty"`
	// StartError is set when the session could not start (the server died,
	// or a sandbox refused it); the oracle still decides.
	StartError string `json:"start_error,omitempty"`
	// CallErrors holds the error text of failed calls, by index.
	CallErrors map[int]string `json:"call_errors,omitempty"`
	// Note records a harness observation that is not a verdict.
	Note string `json:"note,omitempty"`
	// Killed counts stray processes the harness killed after the session.
	Killed     int     `json:"killed,omitempty"`
	DurationMS float64 `json:"duration_ms"`
	// PhasesMS splits the session's time: connect, calls, quiet (waiting
	// for children and sinks), close, settle (after the session).
	PhasesMS map[string]float64 `json:"phases_ms,omitempty"`
	// Err is a harness failure (verdict "error").
	Err string `json:"error,omitempty"`
	// NoPolicy is set when the config failed to build and the server lacks
	// a policy or manifest file: a gap in the corpus, reported, never a verdict.
	NoPolicy bool `json:"no_policy,omitempty"`
}

// ErrNoPolicy marks a config that could not be built for a server without a
// policy or manifest file (testdata/policies/<server>.json,
// testdata/manifests/<server>.json).
var ErrNoPolicy = errors.New("server has no policy or manifest")

// BuildConfig builds config name for case c in sandbox sb, picking up
// testdata/policies/<server>.json and testdata/manifests/<server>.json.
func (r *Runner) BuildConfig(name string, c *Case, sb *Sandbox) (*configs.Setup, error) {
	o := configs.Options{
		Server: c.Server,
		Audit:  r.Audit,
		Vars:   map[string]string{"WS": sb.WS, "HOME": sb.Home, "TMP": sb.TMP},
		// The session change report stays in the audit log: no oracle
		// reads it, and stderr is the harness's.
		Report:       io.Discard,
		RuntimeCache: r.RuntimeCache,
	}
	if p := filepath.Join(r.Root, "testdata/policies", c.Server+".json"); exists(p) {
		o.PolicyFile = p
	}
	if p := filepath.Join(r.Root, "testdata/manifests", c.Server+".json"); exists(p) {
		o.ManifestFile = p
	}
	return configs.Build(name, o)
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// RunCase runs one case under config and judges it. An unavailable config
// comes back as an error wrapping configs.ErrUnavailable; every other
// failure is a Result with verdict "error".
func (r *Runner) RunCase(ctx context.Context, config string, c *Case) (*Result, error) {
	procs := newProcTable()
	defer procs.close()
	return r.runCase(ctx, config, c, procs)
}

// runCase is RunCase with the view of /proc shared with the cases that
// run beside it.
func (r *Runner) runCase(ctx context.Context, config string, c *Case, procs *procTable) (*Result, error) {
	rc := *r // defaults on a copy: RunCase runs concurrently
	rc.defaults()
	rc.procs = procs
	r = &rc
	start := time.Now()
	res := newResult(config, c)
	fail := func(err error) (*Result, error) {
		res.Verdict, res.Err = Error, err.Error()
		res.DurationMS = ms(time.Since(start))
		return res, nil
	}
	sb, err := NewSandbox(r.WorkDir, "mcpguard-case-"+c.ID)
	if err != nil {
		return fail(err)
	}
	defer sb.Close()
	setup, err := r.BuildConfig(config, c, sb)
	if errors.Is(err, configs.ErrUnavailable) {
		return nil, err
	}
	if err != nil {
		return fail(fmt.Errorf("build config: %w", r.noPolicy(c, res, err)))
	}
	// The proxy closes setup.Sandbox when its session ends.
	if err := sb.Apply(c.Setup); err != nil {
		return fail(err)
	}
	if srv, err := servers.Lookup(c.Server); err == nil && srv.Fixture != nil {
		if err := srv.Fixture(ctx, sb.WS); err != nil {
			return fail(fmt.Errorf("server fixture: %w", err))
		}
	}
	argv, err := r.serverArgv(ctx, c, sb)
	if err != nil {
		return fail(err)
	}
	ev := &Evidence{Before: map[string]string{}}
	gather, err := prepareOracle(c.Oracle, sb, ev)
	if err != nil {
		return fail(err)
	}
	defer gather()
	stderr, err := os.Create(serverStderr(sb))
	if err != nil {
		return fail(err)
	}
	defer stderr.Close()
	caseCtx, cancel := context.WithTimeout(ctx, r.CaseTimeout)
	defer cancel()
	clock := newPhaseClock(res)
	r.session(caseCtx, c, sb, ev, res, clock, Launch{
		Argv: argv, Env: sb.Env(), Dir: sb.WS, Server: c.Server, Config: config,
		Setup: setup, Stderr: stderr, Grace: r.Grace,
	})
	r.showStderr(config, c, stderr.Name())
	// After the session: wait (bounded) for every process of the case to
	// exit and the sinks to fall quiet, then kill what is left: a detached
	// daemon must not outlive its case.
	r.settle(sb)
	clock.done("settle")
	res.Killed += r.procs.kill(sb, time.Second)
	gather()
	ev.TCP, ev.UDP, ev.Netlink = sb.TCP.Received(), sb.UDP.Received(), sb.Netlink.Received()
	if err := judgeCase(c, sb, ev, res); err != nil {
		return fail(fmt.Errorf("oracle: %w", err))
	}
	res.DurationMS = ms(time.Since(start))
	return res, nil
}

func newResult(config string, c *Case) *Result {
	return &Result{
		ID: c.ID, Category: c.Category, Server: c.Server, Config: config,
		Attack: c.Attack(), Visible: c.VisibleInArguments != nil && *c.VisibleInArguments,
		Oracle: c.Oracle.Kind,
	}
}

// noPolicy marks a config that failed to build for a server without a
// policy or manifest file: a gap in the corpus (Result.NoPolicy), not a
// verdict.
func (r *Runner) noPolicy(c *Case, res *Result, err error) error {
	var missing []string
	for _, dir := range []string{"policies", "manifests"} {
		if !exists(filepath.Join(r.Root, "testdata", dir, c.Server+".json")) {
			missing = append(missing, "testdata/"+dir+"/"+c.Server+".json")
		}
	}
	if len(missing) > 0 && !errors.Is(err, configs.ErrUnknown) {
		res.NoPolicy = true
		return fmt.Errorf("%w (%s missing): %v", ErrNoPolicy, strings.Join(missing, ", "), err)
	}
	return err
}

// serverArgv is the case's server command with the sandbox's addresses.
func (r *Runner) serverArgv(ctx context.Context, c *Case, sb *Sandbox) ([]string, error) {
	argv, err := r.Command(ctx, c.Server, r.BinDir)
	if err != nil {
		return nil, err
	}
	return append(argv, servers.Flags(servers.Addrs{
		WS: sb.WS, SinkTCP: sb.TCP.Addr(), SinkUDP: sb.UDP.Addr(),
		MarkerDir: sb.MarkerDir, WeatherURL: sb.Weather.URL(), TimeoutScale: r.scale,
	})...), nil
}

// phaseClock times a case's phases into its Result's PhasesMS.
type phaseClock struct {
	res  *Result
	mark time.Time
}

func newPhaseClock(res *Result) *phaseClock {
	res.PhasesMS = map[string]float64{}
	return &phaseClock{res: res, mark: time.Now()}
}

// done records the time since the last phase ended as phase name's.
func (p *phaseClock) done(name string) {
	p.res.PhasesMS[name] = ms(time.Since(p.mark))
	p.mark = time.Now()
}

// session runs the case's session: connect, the calls, a wait for the
// case's children and sinks to fall quiet, close. A session that does not
// start is evidence (every call failed), not a harness error.
func (r *Runner) session(ctx context.Context, c *Case, sb *Sandbox, ev *Evidence, res *Result, clock *phaseClock, l Launch) {
	var serverPid atomic.Int64
	l.OnStart = func(pid int) { serverPid.Store(int64(pid)) }
	rc := r
	var answers map[string]any
	if c.UsesWire() {
		var err error
		if answers, err = wireAnswers(c, sb); err != nil {
			res.StartError = "harness: " + err.Error()
			return
		}
		w := *r
		w.Connect = func(ctx context.Context, l Launch) (Session, error) { return wireConnect(ctx, l, answers) }
		rc = &w
	}
	sess, err := rc.connect(ctx, sb, res, l)
	if err != nil {
		res.StartError = fmt.Sprintf("%v (stderr: %s)", err, tail(serverStderr(sb), 500))
		for range c.Calls {
			ev.Responses = append(ev.Responses, "session did not start: "+err.Error())
			ev.CallErrors = append(ev.CallErrors, true)
		}
		return
	}
	clock.done("connect")
	if gs, ok := sess.(*guard.Session); ok && gs.Init != nil {
		ev.Init = gs.Init.Instructions
	} else if is, ok := sess.(Instructed); ok {
		ev.Init = is.Instructions()
	}
	if ws, ok := sess.(*wireSession); ok {
		r.wireCalls(ctx, ws, c, sb, ev, res)
	} else {
		r.calls(ctx, sess, c, sb, ev, res)
	}
	if c.Oracle.Kind == KindServed {
		ev.Served = probeServed(ev.Responses)
	}
	clock.done("calls")
	// Let a child that was forked during the session finish its work
	// while the session is still up.
	r.waitQuiet(ctx, sb, time.Now(), func() int { return int(serverPid.Load()) })
	clock.done("quiet")
	r.closeSession(sess, sb, res)
	clock.done("close")
}

// servedPort finds "port N" in a response.
var servedPort = regexp.MustCompile(`port (\d{1,5})\b`)

// probeServed connects, from the harness (outside any sandbox), to the
// port the last response names on 127.0.0.1 and reads what is served
// there within a second.
func probeServed(responses []string) []byte {
	if len(responses) == 0 {
		return nil
	}
	m := servedPort.FindStringSubmatch(responses[len(responses)-1])
	if m == nil {
		return nil
	}
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+m[1], time.Second)
	if err != nil {
		return nil
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(time.Second))
	b, _ := io.ReadAll(c)
	return b
}

// serverStderr is the file the case's server's stderr goes to.
func serverStderr(sb *Sandbox) string { return filepath.Join(sb.Root, "server.stderr") }

// showStderr copies the server's stderr to r.Verbose, when set.
func (r *Runner) showStderr(config string, c *Case, path string) {
	if r.Verbose == nil {
		return
	}
	if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
		fmt.Fprintf(r.Verbose, "--- %s/%s server stderr:\n%s", config, c.ID, b)
	}
}

// judgeCase asks the case's oracle and turns its answer into the verdict.
func judgeCase(c *Case, sb *Sandbox, ev *Evidence, res *Result) error {
	fired, detail, err := Judge(c.Oracle, sb, ev)
	if err != nil {
		return err
	}
	res.Fired, res.Detail = fired, detail
	switch {
	case c.Attack() && fired:
		res.Verdict = Succeeded
	case c.Attack():
		res.Verdict = Blocked
	case fired:
		res.Verdict = Passed
	default:
		res.Verdict = FalsePositive
	}
	return nil
}

// calls makes the case's tool calls in order, recording what came back.
func (r *Runner) calls(ctx context.Context, cli Session, c *Case, sb *Sandbox, ev *Evidence, res *Result) {
	for i, call := range c.Calls {
		args, err := sb.ExpandJSON(call.Arguments)
		if err != nil {
			ev.Responses = append(ev.Responses, "harness: "+err.Error())
			ev.CallErrors = append(ev.CallErrors, true)
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, r.CallTimeout)
		if call.Method != "" {
			text, err := request(cctx, cli, call.Method, args)
			cancel()
			if err != nil {
				if _, denied := guard.IsDenied(err); denied {
					res.Denied = append(res.Denied, i)
				}
				if res.CallErrors == nil {
					res.CallErrors = map[int]string{}
				}
				res.CallErrors[i] = err.Error()
				text = err.Error()
			}
			ev.Responses = append(ev.Responses, text)
			ev.CallErrors = append(ev.CallErrors, err != nil)
			continue
		}
		req := mcp.CallToolRequest{}
		req.Params.Name = call.Tool
		req.Params.Arguments = args
		out, err := cli.CallTool(cctx, req)
		cancel()
		if err != nil {
			msg := err.Error()
			if _, denied := guard.IsDenied(err); denied {
				res.Denied = append(res.Denied, i)
			}
			if res.CallErrors == nil {
				res.CallErrors = map[int]string{}
			}
			res.CallErrors[i] = msg
			ev.Responses = append(ev.Responses, msg)
			ev.CallErrors = append(ev.CallErrors, true)
			continue
		}
		text := resultText(out)
		if out.IsError {
			if res.CallErrors == nil {
				res.CallErrors = map[int]string{}
			}
			res.CallErrors[i] = truncate(text, 300)
		}
		ev.Responses = append(ev.Responses, text)
		ev.CallErrors = append(ev.CallErrors, out.IsError)
	}
}

// lister is what a Session offers beyond tools/call (the mcp-go client
// has it all) for the requests of Methods.
type lister interface {
	ListTools(context.Context, mcp.ListToolsRequest) (*mcp.ListToolsResult, error)
	ListPrompts(context.Context, mcp.ListPromptsRequest) (*mcp.ListPromptsResult, error)
	GetPrompt(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error)
	ListResources(context.Context, mcp.ListResourcesRequest) (*mcp.ListResourcesResult, error)
	ListResourceTemplates(context.Context, mcp.ListResourceTemplatesRequest) (*mcp.ListResourceTemplatesResult, error)
	ReadResource(context.Context, mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error)
	Complete(context.Context, mcp.CompleteRequest) (*mcp.CompleteResult, error)
}

// request makes one request other than tools/call with params, and returns
// the result as JSON.
func request(ctx context.Context, cli Session, method string, params map[string]any) (string, error) {
	l, ok := cli.(lister)
	if !ok {
		return "", fmt.Errorf("harness: the session cannot make %s requests", method)
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return "", err
	}
	var out any
	switch method {
	case "tools/list":
		var q mcp.ListToolsRequest
		err = json.Unmarshal(raw, &q.Params)
		if err == nil {
			out, err = l.ListTools(ctx, q)
		}
	case "prompts/list":
		var q mcp.ListPromptsRequest
		err = json.Unmarshal(raw, &q.Params)
		if err == nil {
			out, err = l.ListPrompts(ctx, q)
		}
	case "prompts/get":
		var q mcp.GetPromptRequest
		err = json.Unmarshal(raw, &q.Params)
		if err == nil {
			out, err = l.GetPrompt(ctx, q)
		}
	case "resources/list":
		var q mcp.ListResourcesRequest
		err = json.Unmarshal(raw, &q.Params)
		if err == nil {
			out, err = l.ListResources(ctx, q)
		}
	case "resources/templates/list":
		var q mcp.ListResourceTemplatesRequest
		err = json.Unmarshal(raw, &q.Params)
		if err == nil {
			out, err = l.ListResourceTemplates(ctx, q)
		}
	case "resources/read":
		var q mcp.ReadResourceRequest
		err = json.Unmarshal(raw, &q.Params)
		if err == nil {
			out, err = l.ReadResource(ctx, q)
		}
	case "completion/complete":
		var q mcp.CompleteRequest
		err = json.Unmarshal(raw, &q.Params)
		if err == nil {
			out, err = l.Complete(ctx, q)
		}
	default:
		return "", fmt.Errorf("harness: unknown method %q", method)
	}
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(out)
	return string(b), err
}

// resultText is the result as JSON followed by its text contents verbatim,
// so that oracles match both escaped and unescaped forms.
func resultText(out *mcp.CallToolResult) string {
	var sb strings.Builder
	if b, err := json.Marshal(out); err == nil {
		sb.Write(b)
	}
	for _, c := range out.Content {
		switch t := c.(type) {
		case mcp.TextContent:
			sb.WriteString("\n" + t.Text)
		case *mcp.TextContent:
			sb.WriteString("\n" + t.Text)
		case mcp.EmbeddedResource:
			if tr, ok := t.Resource.(mcp.TextResourceContents); ok {
				sb.WriteString("\n" + tr.Text)
			}
		}
	}
	return sb.String()
}

// waitQuiet waits, bounded by r.Settle, until for r.Quiet neither a sink
// received anything, nor any process of the case ran besides the server
// itself (serverPid, 0 when unknown), nor the server was runnable (so on a
// loaded host a server woken but not yet scheduled is waited for): a child
// forked during the session
// gets to finish its work, and the server gets r.Quiet to act on the
// child's exit (send what the child read), before the session ends and the
// proxy kills the server's process group.
func (r *Runner) waitQuiet(ctx context.Context, sb *Sandbox, since time.Time, serverPid func() int) {
	deadline := time.Now().Add(r.Settle)
	busy := since
	var server []int
	for time.Now().Before(deadline) && ctx.Err() == nil {
		// The launcher's first child is the server for good once found.
		if len(server) < 2 {
			server = serverPids(serverPid())
		}
		if r.othersAlive(sb, server...) || runnable(server[len(server)-1]) {
			busy = time.Now()
		}
		last := sb.LastActivity()
		if last.Before(busy) {
			last = busy
		}
		if time.Since(last) >= r.Quiet {
			return
		}
		time.Sleep(r.poll())
	}
}

// poll is how often the harness looks at the case's processes while it
// waits for quiet: a tenth of r.Quiet (10 ms by default), so a run whose
// time bounds are scaled for a slow host (Scale) looks as often relative
// to its quiet window, not five times as often, each look a scan of /proc
// that costs tens of milliseconds under emulation.
func (r *Runner) poll() time.Duration { return max(r.Quiet/10, time.Millisecond) }

// othersAlive reports whether a process of the case other than the
// server's runs.
func (r *Runner) othersAlive(sb *Sandbox, server ...int) bool {
	for _, p := range r.procs.of(sb) {
		if !slices.Contains(server, p) {
			return true
		}
	}
	return false
}

// settle waits, bounded by r.Settle, until no process of the case is
// left and the sinks have been quiet for r.Quiet.
func (r *Runner) settle(sb *Sandbox) {
	start := time.Now()
	deadline := start.Add(r.Settle)
	for time.Now().Before(deadline) {
		last := sb.LastActivity()
		if last.Before(start) {
			last = start
		}
		if time.Since(last) >= r.Quiet && len(r.procs.of(sb)) == 0 {
			return
		}
		time.Sleep(2 * r.poll())
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// tail returns the last n bytes of a file, for error messages.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

// connect starts the session, bounded: a server that never answers
// initialize fails the connect at the case timeout, but the proxy then
// waits for the server's pipes, which a daemonised child may hold open; so
// past the bound the case's processes are killed, which releases them.
func (r *Runner) connect(ctx context.Context, sb *Sandbox, res *Result, l Launch) (Session, error) {
	type result struct {
		s   Session
		err error
	}
	ch := make(chan result, 1)
	go func() {
		s, err := r.Connect(ctx, l)
		ch <- result{s, err}
	}()
	select {
	case cr := <-ch:
		return cr.s, cr.err
	case <-time.After(r.CaseTimeout + 3*r.Grace + 500*time.Millisecond):
	}
	res.Killed += r.procs.kill(sb, time.Second)
	select {
	case cr := <-ch:
		if cr.err == nil {
			cr.s.Close()
			cr.err = errors.New("session started only after its processes were killed")
		}
		return nil, cr.err
	case <-time.After(5 * time.Second):
		return nil, errors.New("session did not start, nor give up after its processes were killed")
	}
}

// closeSession ends the session. The proxy waits for the server's pipes to
// close; a daemonised child that kept them open would make it wait forever,
// so after a bound the case's processes are killed, which releases them.
func (r *Runner) closeSession(sess Session, sb *Sandbox, res *Result) {
	done := make(chan struct{})
	go func() {
		sess.Close()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-time.After(3*r.Grace + 500*time.Millisecond):
	}
	res.Killed += r.procs.kill(sb, time.Second)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		res.Note = "session did not close after its processes were killed"
	}
}

// RunConfig runs every case under config with parallel workers and returns
// the results in case order. It fails with configs.ErrUnavailable when the
// config cannot run here; progress (may be nil) is called after each case.
func (r *Runner) RunConfig(ctx context.Context, config string, cases []*Case, parallel int, progress func(done, total int, res *Result)) ([]*Result, error) {
	if parallel <= 0 {
		parallel = DefaultParallel()
	}
	results := make([]*Result, len(cases))
	if len(cases) == 0 {
		return results, nil
	}
	// One view of /proc for the cases that run at once.
	procs := newProcTable()
	defer procs.close()
	// The first case runs alone: an unavailable config is found before
	// any parallel work starts.
	first, err := r.runCase(ctx, config, cases[0], procs)
	if err != nil {
		return nil, err
	}
	results[0] = first
	var mu sync.Mutex
	done := 1
	if progress != nil {
		progress(done, len(cases), first)
	}
	var firstErr error
	idx := make(chan int)
	var wg sync.WaitGroup
	for range min(parallel, len(cases)-1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				res, err := r.runCase(ctx, config, cases[i], procs)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				results[i] = res
				done++
				if progress != nil && res != nil {
					progress(done, len(cases), res)
				}
				mu.Unlock()
			}
		}()
	}
	for i := 1; i < len(cases); i++ {
		if ctx.Err() != nil {
			break
		}
		idx <- i
	}
	close(idx)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return results, nil
}

// DefaultParallel is the default number of cases run at once. Cases spend
// most of their time waiting on child processes and settle timers, so a
// few per core keeps the cores busy.
func DefaultParallel() int { return 3 * runtime.NumCPU() }
