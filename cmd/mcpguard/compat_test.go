package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpguard/mcpguard/guard/runtime"
	"github.com/stretchr/testify/require"
)

// The compatibility suite (docs/compat.md): real MCP servers, launched the
// ways users launch them, through `mcpguard run` under each config that
// runs on this machine, driven by the official TypeScript SDK client
// (testdata/compat/client.mjs). Each cell is a benign session with real
// tool calls; its policy is `mcpguard policy init` output, with only the
// edits docs/compat.md lists. MCPGUARD_COMPAT_RUN_BIN runs the sessions
// with another mcpguard binary (to measure a baseline); MCPGUARD_COMPAT_OUT
// writes the matrix as JSON.

type compatCall struct {
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments,omitempty"`
	Expect    string         `json:"expect"`
}

// compatServer is a row of the matrix (compatServers).
type compatServer struct {
	name string
	// launch finds the server on this machine: its launchers and the
	// user's environment they need.
	launch func(t *testing.T, e compatEnv) launchers
	calls  func(ws string) []compatCall
	// env the server is given (and policy init learns via --env).
	env   func(ws string) map[string]string
	setup func(t *testing.T, ws string)
	// edit is the documented edit of policy init's output (docs/compat.md).
	edit func(t *testing.T, p map[string]any)
	// policy, when set, writes the row's policy to pol in place of policy
	// init, for a server init cannot start confined (docs/compat.md says
	// which and why); env is the server's environment.
	policy func(t *testing.T, e compatEnv, ws, pol string, argv []string, env map[string]string)
	// tools the client must be offered (besides at least one tool).
	tools []string
	// needsEgress marks a server whose API has a name only the L3 egress
	// filter knows (pinned by the policy's resolve): there is no such
	// name without L3, so the configs without it are not applicable.
	needsEgress bool
}

// launchers are a server's ways to be launched: name -> argv, wsArg
// standing for the workspace.
type launchers struct {
	argv map[string][]string
	// procEnv is the user's environment for policy init and the session
	// (not state: no --env).
	procEnv map[string]string
	// initFlags are more of policy init's flags (--net for a database the
	// server reaches at start-up).
	initFlags []string
}

// wsArg in a launcher's argv stands for the cell's workspace.
const wsArg = "\x00WS"

// resolveTimeoutEnv scales the runtime resolver's helper time bound
// (npm exec for npx -y takes minutes under the VM's TCG) as the rest.
func resolveTimeoutEnv() string {
	return runtime.TimeoutEnv + "=" + (20 * compatTimeScale()).String()
}

// compatTimeScale is a second times MCPGUARD_COMPAT_TIMEOUT_SCALE (default
// 1): the VM's emulated CPU needs 4 or more for node's start-up.
func compatTimeScale() time.Duration {
	f, err := strconv.ParseFloat(os.Getenv("MCPGUARD_COMPAT_TIMEOUT_SCALE"), 64)
	if err != nil || f <= 0 {
		f = 1
	}
	return time.Duration(f * float64(time.Second))
}

// compatConfigList is the configs the suite runs: by default those of a
// host with Landlock and without BPF LSM; MCPGUARD_COMPAT_CONFIGS (comma-
// separated) names others, e.g. C0,C-ebpf,C-full in the VM (docs/compat.md).
// C0 stays first: it shows that a twin's attack is real there. A config
// that cannot run fails its cells; nothing is skipped.
func compatConfigList() []string {
	if v := os.Getenv("MCPGUARD_COMPAT_CONFIGS"); v != "" {
		return strings.Split(v, ",")
	}
	return []string{"C0", "C-app", "C-landlock", "C-full-landlock"}
}

// compatEnv is what every compat test needs: the repository root, the
// compat directory, node, and an mcpguard binary built from this tree
// (runBin: the one sessions run, MCPGUARD_COMPAT_RUN_BIN when set).
type compatEnv struct {
	root, compat, nm, node, bin, runBin string
}

func newCompatEnv(t *testing.T) compatEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("compat suite: not with -short")
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	e := compatEnv{root: root, compat: filepath.Join(root, "testdata", "compat")}
	e.nm = filepath.Join(e.compat, "node_modules")
	if e.node, err = exec.LookPath("node"); err != nil {
		t.Skip("compat suite: node not installed (scripts/deps.sh installs it)")
	}
	if _, err := os.Stat(filepath.Join(e.nm, "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		t.Skip("compat suite: testdata/compat/node_modules missing (run scripts/deps.sh)")
	}
	// MCPGUARD_COMPAT_BIN: a prebuilt mcpguard (compiling in the VM's
	// emulated CPU takes minutes).
	if e.bin = os.Getenv("MCPGUARD_COMPAT_BIN"); e.bin == "" {
		e.bin = filepath.Join(t.TempDir(), "mcpguard")
		out, err := exec.Command("go", "build", "-o", e.bin, ".").CombinedOutput()
		require.NoError(t, err, "build mcpguard: %s", out)
	}
	e.runBin = e.bin
	if b := os.Getenv("MCPGUARD_COMPAT_RUN_BIN"); b != "" {
		e.runBin = b
	}
	return e
}

// policyInit makes a cell's policy as the docs say: `mcpguard policy init`
// with the launch command, in the workspace, with --env for each variable.
// procEnv is more of policy init's own environment (not passed by --env).
func (e compatEnv) policyInit(ws, pol string, env, procEnv map[string]string, flags, argv []string) ([]byte, error) {
	initArgs := append([]string{"policy", "init", "--out", pol, "--timeout", (30 * compatTimeScale()).String()}, flags...)
	for _, k := range slices.Sorted(maps.Keys(env)) {
		initArgs = append(initArgs, "--env", k+"="+env[k])
	}
	initArgs = append(append(initArgs, "--"), argv...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*60*compatTimeScale())
	defer cancel()
	ic := exec.CommandContext(ctx, e.bin, initArgs...)
	ic.Dir = ws
	ic.Env = append(os.Environ(), resolveTimeoutEnv())
	for k, v := range procEnv {
		ic.Env = append(ic.Env, k+"="+v)
	}
	return ic.CombinedOutput()
}

// editPolicy applies a documented edit to the policy file.
func editPolicy(t *testing.T, pol string, edit func(p map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(pol)
	require.NoError(t, err)
	var p map[string]any
	require.NoError(t, json.Unmarshal(b, &p))
	edit(p)
	b, err = json.MarshalIndent(p, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(pol, b, 0o644))
}
func TestCompat(t *testing.T) {
	t.Parallel()
	e := newCompatEnv(t)
	configs := compatConfigList()
	var cells []compatCell
	for _, srv := range selectedServers() {
		l := srv.launch(t, e)
		for _, name := range l.selected() {
			cells = append(cells, e.runLauncher(t, srv, l, name, configs)...)
		}
	}
	t.Logf("compatibility matrix (run binary %s):\n%s", e.runBin, compatMatrix(cells, configs))
	if f := os.Getenv("MCPGUARD_COMPAT_OUT"); f != "" {
		j, _ := json.MarshalIndent(cells, "", "  ")
		require.NoError(t, os.WriteFile(f, j, 0o644))
	}
	for _, c := range cells {
		if !c.OK && !c.NA {
			t.Errorf("%s / %s / %s: %s", c.Server, c.Launcher, c.Config, c.Detail)
		}
	}
}

// compatCell is one server, launched one way, under one config
// (MCPGUARD_COMPAT_OUT writes them as they are).
type compatCell struct {
	Server, Launcher, Config string
	OK                       bool
	// NA: the cell does not apply to the config (compatServer.needsEgress).
	NA     bool `json:",omitempty"`
	Detail string
}

// hasL3 reports whether a config confines the server in the kernel (and
// so gives it the egress filter).
func hasL3(cfg string) bool {
	return strings.Contains(cfg, "landlock") || cfg == "C-ebpf" || cfg == "C-full" || cfg == "C-AB+ebpf"
}

// selectedServers are the rows MCPGUARD_COMPAT_SERVERS (a regexp)
// matches.
func selectedServers() []compatServer {
	only := regexp.MustCompile(os.Getenv("MCPGUARD_COMPAT_SERVERS"))
	var out []compatServer
	for _, s := range append(compatServers, netCompatServers()...) {
		if only.MatchString(s.name) {
			out = append(out, s)
		}
	}
	return out
}

// selected are the launchers MCPGUARD_COMPAT_LAUNCHERS (a regexp)
// matches, sorted.
func (l launchers) selected() []string {
	only := regexp.MustCompile(os.Getenv("MCPGUARD_COMPAT_LAUNCHERS"))
	var names []string
	for n := range l.argv {
		if only.MatchString(n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// in is a launcher's command with the workspace in it.
func (l launchers) in(name, ws string) []string {
	argv := slices.Clone(l.argv[name])
	for i, a := range argv {
		if a == wsArg {
			argv[i] = ws
		}
	}
	return argv
}

// runLauncher runs one server, launched one way, under every config: the
// policy as the docs say to make it, then a session per config, each in a
// workspace set up anew.
func (e compatEnv) runLauncher(t *testing.T, srv compatServer, l launchers, name string, configs []string) []compatCell {
	t.Helper()
	ws := t.TempDir()
	argv := l.in(name, ws)
	env := map[string]string{}
	if srv.env != nil {
		env = srv.env(ws)
	}
	if srv.setup != nil {
		srv.setup(t, ws)
	}
	pol := filepath.Join(t.TempDir(), "policy.json")
	var out []byte
	var err error
	if srv.policy != nil {
		srv.policy(t, e, ws, pol, argv, env)
	} else {
		out, err = e.policyInit(ws, pol, env, l.procEnv, l.initFlags, argv)
	}
	if err == nil && srv.edit != nil {
		editPolicy(t, pol, func(p map[string]any) { srv.edit(t, p) })
	}
	sessEnv := maps.Clone(env)
	maps.Copy(sessEnv, l.procEnv)
	k, v, _ := strings.Cut(resolveTimeoutEnv(), "=")
	sessEnv[k] = v
	var cells []compatCell
	for _, cfg := range configs {
		c := compatCell{Server: srv.name, Launcher: name, Config: cfg}
		if srv.needsEgress && !hasL3(cfg) {
			c.NA, c.Detail = true, "no L3: the API's name exists only in the egress filter"
			cells = append(cells, c)
			continue
		}
		if err != nil {
			c.Detail = "policy init: " + tail(string(out), 300)
			cells = append(cells, c)
			continue
		}
		if srv.setup != nil {
			srv.setup(t, ws)
		}
		c.OK, c.Detail = compatSession(t, e.node, e.compat, e.runBin, cfg, pol, ws, argv, sessEnv, srv.calls(ws), srv.tools)
		cells = append(cells, c)
	}
	return cells
}

// compatMatrix lays the cells out a row per server and launcher, a column
// per config, with each config's working cells counted at the foot.
func compatMatrix(cells []compatCell, configs []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-28s %-32s", "server", "launcher")
	for _, c := range configs {
		fmt.Fprintf(&b, " %-16s", c)
	}
	b.WriteString("\n")
	ok := map[string]int{}
	total := map[string]int{}
	for i := 0; i < len(cells); i += len(configs) {
		fmt.Fprintf(&b, "%-28s %-32s", cells[i].Server, cells[i].Launcher)
		for _, c := range cells[i : i+len(configs)] {
			mark := "FAIL"
			switch {
			case c.NA:
				mark = "n/a"
			case c.OK:
				mark = "ok"
				ok[c.Config]++
			}
			if !c.NA {
				total[c.Config]++
			}
			fmt.Fprintf(&b, " %-16s", mark)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "%-61s", "working cells")
	for _, c := range configs {
		fmt.Fprintf(&b, " %-16s", fmt.Sprintf("%d/%d", ok[c], total[c]))
	}
	return b.String()
}

// compatSession runs one cell: the SDK client against `mcpguard run`.
// The client must be offered every tool of tools.
func compatSession(t *testing.T, node, compat, bin, cfg, pol, ws string, argv []string, env map[string]string, calls []compatCall, tools []string) (bool, string) {
	t.Helper()
	spec := map[string]any{
		"tools":     tools,
		"command":   bin,
		"args":      append([]string{"run", "--config", cfg, "--policy", pol, "--"}, argv...),
		"cwd":       ws,
		"env":       env,
		"timeoutMs": (60 * compatTimeScale()).Milliseconds(),
		"calls":     calls,
	}
	b, err := json.Marshal(spec)
	require.NoError(t, err)
	f := filepath.Join(t.TempDir(), "spec.json")
	require.NoError(t, os.WriteFile(f, b, 0o644))
	// The whole session, npx's resolution included, scaled as the
	// client's own request timeout is (a fixed 2 minutes killed every
	// npx cell under the VM's TCG).
	ctx, cancel := context.WithTimeout(context.Background(), 2*60*compatTimeScale())
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(compat, "client.mjs"), f)
	cmd.Dir = compat
	out, err := cmd.Output()
	var res struct {
		OK     bool   `json:"ok"`
		Error  string `json:"error"`
		Stderr string `json:"stderr"`
		Calls  []struct {
			Tool string `json:"tool"`
			OK   bool   `json:"ok"`
			Text string `json:"text"`
		} `json:"calls"`
	}
	if jerr := json.Unmarshal([]byte(lastLineOf(string(out))), &res); jerr != nil {
		return false, fmt.Sprintf("client: %v: %s", err, tail(string(out), 300))
	}
	if res.OK && err == nil {
		return true, ""
	}
	detail := res.Error
	for _, c := range res.Calls {
		if !c.OK {
			detail += fmt.Sprintf(" [%s: %s]", c.Tool, tail(c.Text, 200))
		}
	}
	return false, detail + " stderr: " + tail(res.Stderr, 500)
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func lastLineOf(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
