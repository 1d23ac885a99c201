package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/configs"
	"github.com/mcpguard/mcpguard/guard/policy"
	"github.com/mcpguard/mcpguard/guard/runtime"
	"github.com/mcpguard/mcpguard/internal/proctree"
)

const policyUsage = `Usage:
  mcpguard policy init [--out FILE] [--server NAME] [--pin] [--env NAME=VALUE]...
                       [--learn [--call TOOL=JSON]...] -- CMD [ARGS...]
  mcpguard policy override --audit FILE [--event N | --last] [--write DIR]
  mcpguard policy check [--var NAME=VALUE]... FILE

init      starts the server confined (no network, a scratch write directory,
          the working directory read-only, a minimal environment), reads its
          tools/list and prints a starting policy (see docs/policy.md); review
          it: add network destinations and executables, narrow the roots.
override  prints the scoped override (one tool; one path, host or executable)
          that would have let an audited call through; save it in the
          overrides/ directory beside the policy (or use --write DIR).
check     loads a policy with its overrides, compiles it, and reports errors.`

func cmdPolicy(ctx context.Context, s stdio, args []string) error {
	if len(args) == 0 {
		fmt.Fprintln(s.err, policyUsage)
		return fmt.Errorf("%w: policy needs a subcommand: init, override or check", errUsage)
	}
	switch args[0] {
	case "init":
		return policyInit(ctx, s, args[1:])
	case "override":
		return policyOverride(s, args[1:])
	case "check":
		return policyCheck(s, args[1:])
	case "-h", "--help", "help":
		fmt.Fprintln(s.err, policyUsage)
		return nil
	}
	fmt.Fprintln(s.err, policyUsage)
	return fmt.Errorf("%w: unknown policy subcommand %q", errUsage, args[0])
}

func policyInit(ctx context.Context, s stdio, args []string) error {
	flagArgs, argv := splitDashes(args)
	fs := newFlags(s, "policy init", "[--out FILE] [--server NAME] -- CMD [ARGS...]",
		"Start the MCP server CMD confined (no network, a scratch directory to write, the working\n"+
			"directory to read, PATH, HOME, LANG and --env only), list its tools, and print a starting\n"+
			"policy derived from their input schemas: path-, URL-, host- and command-like arguments are recognised from their\n"+
			"names and formats. The policy uses ${WS} for the workspace; see docs/policy.md.")
	out := fs.String("out", "", "write the policy to `file` instead of stdout")
	server := fs.String("server", "", "server `name` recorded in the policy (default: the command's base name)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up on the server after this long")
	pin := fs.Bool("pin", false, "pin each tool's description and schema: a later change is refused as a rug pull")
	nets := &netList{}
	fs.Var(nets, "net", "`HOST:PORT` the server reaches at start-up (its database): granted, through the egress filter,\n"+
		"to the confined server, and written into network.allow (repeatable)")
	envs := &envList{}
	fs.Var(envs, "env", "`NAME=VALUE` the server needs (repeatable): passed to it, added to env.allow, and a path value's\n"+
		"directory (or the directory itself; the file alone in $HOME) proposed as a filesystem.write root: state files are data")
	learn := fs.Bool("learn", false, "observe the (confined) server with fanotify (root) through initialize, tools/list and\n"+
		"the --call calls, and propose what it loaded beyond the resolved runtime as the runtime\n"+
		"section; data files it touched are reported, not granted")
	calls := &callList{}
	fs.Var(calls, "call", "`TOOL=JSON` arguments of a tools/call that --learn makes after tools/list (repeatable)")
	var data stringList
	fs.Var(&data, "data", "`DIR` the server writes while it starts (its vault, its data directory; repeatable): writable to\n"+
		"the confined server during init (protected names and programs still refused), and written as a filesystem.write root")
	if err := fs.Parse(flagArgs); err != nil {
		return err
	}
	dataRoots, err := dataDirs(data)
	if err != nil {
		return err
	}
	if len(argv) == 0 {
		return fmt.Errorf("%w: no server command after --", errUsage)
	}
	if len(calls.c) > 0 && !*learn {
		return fmt.Errorf("%w: --call needs --learn", errUsage)
	}
	name := *server
	if name == "" {
		name = serverName(argv)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	home, _ := os.UserHomeDir()
	argRoots := argumentRoots(argv, home)
	nets.rules = withArgumentDestinations(s.err, nets.rules, argv)
	box, err := newInitBox(name, envs.kv, nets.rules, argRoots, dataRoots)
	if err != nil {
		return err
	}
	defer box.Close()
	tools, learned, err := initListing(ctx, s.err, box, argv, *learn, calls.c)
	if err != nil {
		return err
	}
	derive := policy.FromTools
	if *pin {
		derive = policy.FromToolsPinned
	}
	p, err := derive(name, tools)
	if err != nil {
		return err
	}
	if err := printKinds(s.err, p); err != nil {
		return err
	}
	if u := policy.URLTools(p); len(u) > 0 {
		fmt.Fprintf(s.err, "warning: %s take URLs; a redirect from an allowed host reaches any address unless L3's network rules (C-full, C-landlock) deny it (docs/policy.md#redirects)\n", strings.Join(u, ", "))
	}
	p.Network.Allow = append(p.Network.Allow, nets.rules...)
	for _, d := range dataRoots {
		p.Filesystem.Write = append(p.Filesystem.Write, d)
		fmt.Fprintf(s.err, "--data %s: written as a filesystem.write root\n", d)
	}
	proposeEnv(s.err, p, envs.kv, home, argv)
	proposeArgumentRoots(s.err, p, argRoots)
	applyLearned(p, learned, s.err)
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if *out == "" {
		_, err = s.out.Write(b)
		return err
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		return fmt.Errorf("write policy: %w", err)
	}
	fmt.Fprintf(s.err, "wrote %s: %d tools; review it before use (docs/policy.md)\n", *out, len(tools))
	return nil
}

// initListing runs the confined server through tools/list (and learn
// mode's observation and calls). The server's stderr is also kept, to say
// what it was refused if it gives up before listing its tools.
func initListing(ctx context.Context, stderr io.Writer, box *initBox, argv []string, learn bool, calls []learnCall) ([]policy.ToolInfo, *runtime.Learned, error) {
	tail := &tailBuffer{max: 64 << 10}
	serr := io.MultiWriter(stderr, tail)
	var (
		tools   []policy.ToolInfo
		learned *runtime.Learned
		err     error
	)
	if learn {
		tools, learned, err = learnRuntime(ctx, box, argv, serr, calls)
	} else {
		tools, err = listTools(ctx, box, argv, serr)
	}
	if err != nil {
		initRefusals(stderr, tail.bytes(), box.scratch)
	}
	return tools, learned, err
}

// dataDirs checks policy init's --data directories: absolute, existing
// directories, never the home directory, / or a system tree (what no
// policy may grant write to).
func dataDirs(dirs []string) ([]string, error) {
	home, _ := os.UserHomeDir()
	var out []string
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, fmt.Errorf("%w: --data %s: %v", errUsage, d, err)
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("%w: --data %s: not a directory", errUsage, d)
		}
		if why := configs.UnsafeRoot(abs); why != "" || abs == "/" || abs == filepath.Clean(home) || isSystem(abs) {
			return nil, fmt.Errorf("%w: --data %s: %s; the home directory, its settings roots, key stores, / and system directories are never write roots; give the server a directory of its own", errUsage, d, why)
		}
		out = append(out, abs)
	}
	return out, nil
}

// initRefusals says, when the server gave up before listing its tools,
// what it was refused to write (init lets it write its scratch only) and
// how to let it: --data for its data directory.
func initRefusals(w io.Writer, stderr []byte, scratch string) {
	for _, d := range configs.Denials(nil, stderr, 8) {
		if d.Kind != "write" || under(d.Target, scratch) {
			continue
		}
		dir := d.Target
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			dir = filepath.Dir(dir)
		}
		target := audit.Printable(d.Target)
		if why := configs.UnsafeRoot(dir); why != "" {
			fmt.Fprintf(w, "mcpguard policy init: the server was refused a write to %s while it started; %s is %s, never a write root: a server that needs to write there needs a directory of its own\n", target, audit.Printable(dir), why)
			continue
		}
		fmt.Fprintf(w, "mcpguard policy init: the server was refused a write to %s while it started (under init it may write only a scratch directory, its TMPDIR); if that is its data, run init again with --data %s\n", target, audit.Printable(dir))
	}
}

// proposeEnv adds the --env variables to env.allow, and a path value's
// directory (or the file alone, right in $HOME or /) as a filesystem.write
// root, and says so: server state is data.
func proposeEnv(w io.Writer, p *policy.Policy, kvs []string, home string, argv []string) {
	for _, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		if !slices.Contains(p.Env.Allow, k) {
			p.Env.Allow = append(p.Env.Allow, k)
		}
		if root := stateRoot(v, home); root != "" && !slices.Contains(p.Filesystem.Write, root) {
			p.Filesystem.Write = append(p.Filesystem.Write, root)
			fmt.Fprintf(w, "%s=%s: proposed %s as a filesystem.write root (server state is data)\n", k, v, root)
			if d := filepath.Dir(root); root == filepath.Clean(v) && (d == home || d == "/") {
				fmt.Fprintf(w, "  %s is right in %s, which is never a write root: the file alone is; a server that writes a temporary file beside it and renames it (many do) will be refused: give it a directory of its own (%s=%s, in the client's entry too)\n",
					root, d, k, filepath.Join(d, "."+serverName(argv), filepath.Base(root)))
			}
		}
	}
}

// withArgumentDestinations adds to rules the destinations the server's
// own command line names (argumentDestinations), and says so: granted
// under init (a server may connect while it starts) and written into
// network.allow, as --net would.
func withArgumentDestinations(w io.Writer, rules []policy.NetRule, argv []string) []policy.NetRule {
	for _, d := range argumentDestinations(argv) {
		if slices.ContainsFunc(rules, func(r policy.NetRule) bool { return r.Host == d.Rule.Host && slices.Equal(r.Ports, d.Rule.Ports) }) {
			continue
		}
		rules = append(rules, d.Rule)
		fmt.Fprintf(w, "argument %s: proposed %s in network.allow, and granted while init lists the tools (a destination the server is started with is one it talks to; under L3 it is reached only through this rule)\n",
			d.Arg, net.JoinHostPort(d.Rule.Host, strconv.Itoa(d.Rule.Ports[0])))
	}
	return rules
}

// proposeArgumentRoots adds the roots the server's own command line names
// (argumentRoots: a directory it serves, a database file's directory) as
// filesystem.write roots, and says so: what a server was started with is
// data it works on.
func proposeArgumentRoots(w io.Writer, p *policy.Policy, roots []argRoot) {
	for _, r := range roots {
		if slices.Contains(p.Filesystem.Write, r.Root) {
			continue
		}
		p.Filesystem.Write = append(p.Filesystem.Write, r.Root)
		fmt.Fprintf(w, "argument %s: proposed %s as a filesystem.write root (a path the server is started with is data it works on; narrow it to filesystem.read if it only reads)\n", r.Arg, r.Root)
	}
}

// printKinds prints the kind report: every argument of every tool, the
// kind the guard will judge it as, and why, so that the operator can
// correct a kind in tools.T.args (docs/policy.md, "Argument kinds").
func printKinds(w io.Writer, p *policy.Policy) error {
	lines, err := policy.KindReport(p)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "argument kinds (correct one with tools.TOOL.args.ARG.kind; docs/policy.md):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, l := range lines {
		kind := l.Kind
		if l.Access != "" {
			kind += " (" + l.Access + ")"
		}
		// Tool and argument names are the server's: escaped.
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", audit.Printable(l.Tool), audit.Printable(l.Arg), kind, audit.Printable(l.Why))
	}
	return tw.Flush()
}

// applyLearned puts learn mode's runtime proposals into p and reports
// them, and the data files, on stderr.
func applyLearned(p *policy.Policy, learned *runtime.Learned, stderr io.Writer) {
	if learned == nil {
		return
	}
	p.Runtime.Read, p.Runtime.Exec = learned.Read, learned.Exec
	for _, r := range learned.Read {
		fmt.Fprintf(stderr, "learned: runtime.read %s\n", r)
	}
	for _, x := range learned.Exec {
		fmt.Fprintf(stderr, "learned: runtime.exec %s\n", x)
	}
	for _, d := range learned.Data {
		fmt.Fprintf(stderr, "learned: data %s (reported, not granted: add a filesystem root if the server needs it)\n", d)
	}
}

// listTools starts argv confined (initBox), performs the MCP handshake
// and returns every tool of tools/list (following pagination) with its raw
// input schema. It talks JSON-RPC directly so that the schemas arrive
// exactly as the server wrote them.
func listTools(ctx context.Context, box *initBox, argv []string, stderr io.Writer) ([]policy.ToolInfo, error) {
	cmd, err := box.command(ctx, argv)
	if err != nil {
		return nil, err
	}
	return session(ctx, cmd, stderr, nil, nil, box.sb.Started)
}

// learnCall is one tools/call that learn mode makes after tools/list.
type learnCall struct {
	tool string
	args json.RawMessage
}

// session runs the prepared server command cmd through the handshake and
// tools/list, with the server in its own process group, obs (when not
// nil) following it and synced before it is closed, and calls made after
// tools/list (their errors reported on stderr, not fatal).
func session(ctx context.Context, cmd *exec.Cmd, stderr io.Writer, obs observer, calls []learnCall, started func(int) error) ([]policy.ToolInfo, error) {
	c, err := startInitServer(ctx, cmd, stderr, started)
	if err != nil {
		return nil, err
	}
	if obs != nil {
		obs.Follow(cmd.Process.Pid)
	}
	defer func() {
		if obs != nil {
			// The server's opens are read while it runs: after it exits
			// they can no longer be told apart from other processes'.
			obs.Sync(5 * time.Second)
		}
		c.stop()
	}()
	if _, err := c.call("initialize", map[string]any{
		"protocolVersion": guard.ProtocolVersion,
		// A client with every capability, so that servers list the tools
		// they register only for such clients (sampling, elicitation,
		// roots): a tool missing here is hidden and denied by L1 later.
		"capabilities": initCapabilities,
		"clientInfo":   map[string]any{"name": "mcpguard-policy-init", "version": "dev"},
	}); err != nil {
		return nil, err
	}
	note, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	if _, err := c.in.Write(append(note, '\n')); err != nil {
		return nil, err
	}
	tools, err := c.listAll()
	if err != nil {
		return nil, err
	}
	for _, lc := range calls {
		if _, err := c.call("tools/call", map[string]any{"name": lc.tool, "arguments": lc.args}); err != nil {
			fmt.Fprintf(stderr, "mcpguard policy init: call %s: %v\n", lc.tool, err)
		}
	}
	return tools, nil
}

// initClient is policy init's side of the server's stdio.
type initClient struct {
	ctx   context.Context
	cmd   *exec.Cmd
	group *proctree.Group
	in    io.WriteCloser
	sc    *bufio.Scanner
	id    int
}

// startInitServer starts cmd in its own process group with pipes on its
// standard input and output.
func startInitServer(ctx context.Context, cmd *exec.Cmd, stderr io.Writer, started func(pid int) error) (*initClient, error) {
	cmd.Stderr = proctree.Pipe(stderr)
	proctree.Prepare(cmd) // its own process group: the observer follows it
	cmd.WaitDelay = time.Second
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	g, err := proctree.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("start server: %w", err)
	}
	if started != nil {
		// The sandbox sets up what it must once the launcher runs (the
		// egress filter for --net) and only then lets the server start.
		if err := started(cmd.Process.Pid); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return nil, fmt.Errorf("start server: %w", err)
		}
	}
	sc := bufio.NewScanner(outPipe)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	return &initClient{ctx: ctx, cmd: cmd, group: g, in: in, sc: sc}, nil
}

// stop ends the server's whole process group: its input closed, SIGTERM
// after 2 s, SIGKILL after 2 s more, and whatever of the group is left
// killed in any case: a server that ignores EOF, or a child that outlives
// it (under `sh -c`) holding policy init's stderr, must not survive it.
func (c *initClient) stop() {
	c.group.Stop(2*time.Second, func() { c.in.Close() })
}

// call sends a request and returns its result, answering the server's
// own requests and skipping what is not JSON-RPC meanwhile.
func (c *initClient) call(method string, params any) (json.RawMessage, error) {
	c.id++
	req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params})
	if _, err := c.in.Write(append(req, '\n')); err != nil {
		return nil, fmt.Errorf("%s: write to server: %w", method, err)
	}
	for c.sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(c.sc.Bytes(), &m); err != nil {
			continue // not JSON-RPC: a chatty server's log line on stdout
		}
		if m.Method != "" {
			if len(m.ID) > 0 { // a server-to-client request
				c.in.Write(append(clientReply(m.ID, m.Method), '\n'))
			}
			continue
		}
		if string(m.ID) != fmt.Sprint(c.id) {
			continue
		}
		if m.Error != nil {
			return nil, fmt.Errorf("%s: server error %d: %s", method, m.Error.Code, m.Error.Message)
		}
		return m.Result, nil
	}
	if err := c.sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: read from server: %w", method, err)
	}
	if err := c.ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	return nil, fmt.Errorf("%s: server closed its output", method)
}

// listAll follows tools/list's pages.
func (c *initClient) listAll() ([]policy.ToolInfo, error) {
	var tools []policy.ToolInfo
	cursor := ""
	for page := 0; page < 1000; page++ {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		res, err := c.call("tools/list", params)
		if err != nil {
			return nil, err
		}
		var r struct {
			Tools      []policy.ToolInfo `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &r); err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		tools = append(tools, r.Tools...)
		if r.NextCursor == "" {
			return tools, nil
		}
		cursor = r.NextCursor
	}
	return nil, errors.New("tools/list: too many pages")
}

// observer follows the server's process group in learn mode
// (runtime.Observer).
type observer interface {
	Follow(pgid int)
	Sync(timeout time.Duration) bool
}

// callList collects --call TOOL=JSON flags.
type callList struct{ c []learnCall }

func (c *callList) String() string { return "" }
func (c *callList) Set(s string) error {
	tool, args, ok := strings.Cut(s, "=")
	if !ok || tool == "" || !json.Valid([]byte(args)) {
		return fmt.Errorf("want TOOL=JSON, got %q", s)
	}
	c.c = append(c.c, learnCall{tool: tool, args: json.RawMessage(args)})
	return nil
}

// initCapabilities are the client capabilities policy init declares.
var initCapabilities = map[string]any{
	"sampling":    map[string]any{},
	"elicitation": map[string]any{},
	"roots":       map[string]any{"listChanged": true},
}

// clientReply answers a server's request during policy init: an empty
// roots list, and a refusal for sampling and elicitation (no model or user
// is behind policy init), so that the server goes on listing its tools.
func clientReply(id json.RawMessage, method string) []byte {
	var resp []byte
	switch method {
	case "roots/list":
		resp, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{"roots": []any{}}})
	case "ping":
		resp, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{}})
	default:
		resp, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
			"error": map[string]any{"code": -32601, "message": method + " is not answered by mcpguard policy init"}})
	}
	return resp
}

// envList collects --env NAME=VALUE flags.
type envList struct{ kv []string }

func (e *envList) String() string { return strings.Join(e.kv, " ") }
func (e *envList) Set(s string) error {
	k, _, ok := strings.Cut(s, "=")
	if !ok || k == "" || strings.ContainsAny(k, " \t\n") {
		return fmt.Errorf("want NAME=VALUE, got %q", s)
	}
	e.kv = append(e.kv, s)
	return nil
}

// stateRoot is the write root a state path set by an environment variable
// needs, by the rules a path on the server's command line follows
// (rootFor): the directory itself when it is one; a file's directory
// (servers write a temporary file beside it and rename it), or the file
// alone when that directory is the home directory or a system tree, so
// that a state file in $HOME never makes $HOME writable (the guard's own
// policy and audit log live under it); a path whose directory does not
// exist yet: that directory. "" for values that are not absolute paths,
// for /, $HOME itself, system trees, code and programs.
func stateRoot(v, home string) string {
	if !filepath.IsAbs(v) {
		return ""
	}
	v = filepath.Clean(v)
	if r := rootFor(v, home); r != "" {
		return r
	}
	if _, err := os.Stat(v); err == nil {
		return "" // what rootFor refused: code, a program, $HOME, a system tree
	}
	if d := filepath.Dir(v); d != "/" && d != home && !isSystem(d) && !isSystem(v) {
		return d
	}
	return ""
}

// serverName names a server after what it runs, not after its
// interpreter: the package of `npx PKG`, `uvx PKG` or `pipx run PKG`, or
// of a node entry file, a script's base name, otherwise the program's.
func serverName(argv []string) string {
	base := filepath.Base(argv[0])
	rest := argv[1:]
	if (base == "npm" || base == "pipx") && len(rest) > 0 {
		rest = rest[1:] // exec, run
	}
	for i, a := range rest {
		if strings.HasPrefix(a, "-") {
			// uvx --from PKG, pipx run --spec PKG: the package.
			if (a == "--from" || a == "--spec") && i+1 < len(rest) && (base == "uvx" || base == "pipx") {
				return pyPackage(rest[i+1])
			}
			continue
		}
		switch {
		case base == "uvx" || base == "pipx":
			return pyPackage(a)
		case base == "npx" || base == "npm":
			name := a
			if i := strings.LastIndexByte(name, '@'); i > 0 {
				name = name[:i]
			}
			return name
		case base == "node" || strings.HasPrefix(base, "python"):
			if pkg := packageOf(a); pkg != "" {
				return pkg
			}
			return strings.TrimSuffix(filepath.Base(a), filepath.Ext(a))
		}
		return base
	}
	return base
}

// pyPackage is the name in a Python requirement ("pkg[x]==1" -> "pkg").
func pyPackage(req string) string {
	if f := strings.FieldsFunc(req, func(r rune) bool { return strings.ContainsRune("@=[<>~! ", r) }); len(f) > 0 {
		return f[0]
	}
	return req
}

// packageOf is the name in the nearest package.json above file, "" when
// there is none.
func packageOf(file string) string {
	real, err := filepath.EvalSymlinks(file)
	if err != nil {
		return ""
	}
	if real, err = filepath.Abs(real); err != nil {
		return ""
	}
	for d := filepath.Dir(real); d != "/" && filepath.Base(d) != "node_modules"; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "package.json"))
		if err != nil {
			continue
		}
		var m struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(b, &m) == nil && m.Name != "" {
			return m.Name
		}
	}
	return ""
}

func policyOverride(s stdio, args []string) error {
	fs := newFlags(s, "policy override", "--audit FILE [--event N | --last | --tool NAME] [--write DIR]",
		"Print the scoped override for one audit event: the tool, and the one path, host or\n"+
			"executable the event names (for content rules, the rule waived for that tool).\n"+
			"Events are numbered from 1 in file order; --last (the default) takes the last denial\n"+
			"or rewrite.")
	auditFile := fs.String("audit", "", "the audit log `file` (JSON lines) written by mcpguard run/call --audit")
	event := fs.Int("event", 0, "use event number `N` (1-based)")
	last := fs.Bool("last", false, "use the last event that denied or rewrote something (default)")
	tool := fs.String("tool", "", "use the last event that denied or rewrote something of tool `name` (the\n"+
		"command L2 prints on stderr when it removes a tool from a listing)")
	write := fs.String("write", "", "also write the override into `dir` (an overrides/ directory)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *auditFile == "" {
		return fmt.Errorf("%w: --audit FILE is required", errUsage)
	}
	if (*event != 0 && *last) || (*tool != "" && (*event != 0 || *last)) {
		return fmt.Errorf("%w: --event, --last and --tool exclude each other", errUsage)
	}
	events, err := readAudit(*auditFile)
	if err != nil {
		return err
	}
	var e audit.Event
	switch {
	case *event != 0:
		if *event < 1 || *event > len(events) {
			return fmt.Errorf("%w: --event %d: the log has %d events", errUsage, *event, len(events))
		}
		e = events[*event-1]
	default:
		found := false
		for i := len(events) - 1; i >= 0; i-- {
			if (events[i].Decision == audit.Deny || events[i].Decision == audit.Rewrite) && (*tool == "" || events[i].Tool == *tool) {
				e, found = events[i], true
				break
			}
		}
		if !found && *tool != "" {
			return fmt.Errorf("%s: no denial or rewrite of tool %q to override", *auditFile, *tool)
		}
		if !found {
			return fmt.Errorf("%s: no denial or rewrite to override", *auditFile)
		}
	}
	o, err := policy.OverrideFor(e)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if *write != "" {
		if err := os.MkdirAll(*write, 0o755); err != nil {
			return fmt.Errorf("write override: %w", err)
		}
		name := fmt.Sprintf("%s-%s-%s-%s.json", safeName(o.Server), safeName(o.Tool), safeName(o.Rule),
			e.Time.UTC().Format("20060102T150405.000"))
		f := filepath.Join(*write, name)
		if err := os.WriteFile(f, b, 0o644); err != nil {
			return fmt.Errorf("write override: %w", err)
		}
		fmt.Fprintf(s.err, "wrote %s\n", f)
	}
	_, err = s.out.Write(b)
	return err
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, s)
}

// readAudit reads a JSON-lines audit log; a malformed line is an error
// naming its line number.
func readAudit(file string) ([]audit.Event, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	var events []audit.Event
	for i, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var e audit.Event
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", file, i+1, err)
		}
		events = append(events, e)
	}
	return events, nil
}

func policyCheck(s stdio, args []string) error {
	fs := newFlags(s, "policy check", "[--var NAME=VALUE]... FILE",
		"Load a policy with the overrides beside it, compile it (schemas, roots, rules) and\n"+
			"report the first error. WS, HOME and TMP default to the working directory, $HOME and\n"+
			"the temp dir.")
	vars := varsFlag{}
	fs.Var(vars, "var", "`NAME=VALUE` for ${NAME} in the policy (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: policy check needs exactly one FILE", errUsage)
	}
	v := map[string]string{"HOME": os.Getenv("HOME"), "TMP": os.TempDir()}
	if wd, err := os.Getwd(); err == nil {
		v["WS"] = wd
	}
	for k, x := range vars {
		v[k] = x
	}
	p, err := policy.LoadWithOverrides(fs.Arg(0), v)
	if err != nil {
		return err
	}
	e, err := policy.Compile(p, policy.EngineOptions{L2: true})
	if err != nil {
		return fmt.Errorf("compile policy %s: %w", fs.Arg(0), err)
	}
	tools := e.Tools()
	sort.Strings(tools)
	fmt.Fprintf(s.out, "%s: ok: server %s, %d tools (%s)\n", fs.Arg(0), p.Server, len(tools), strings.Join(tools, ", "))
	return nil
}
