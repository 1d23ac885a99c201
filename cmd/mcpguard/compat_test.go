package main

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpguard/mcpguard/guard/runtime"
	"github.com/stretchr/testify/assert"
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

type compatServer struct {
	name string
	// launchers: name -> argv, given the workspace.
	launchers map[string][]string
	calls     func(ws string) []compatCall
	// env the server is given (and policy init learns via --env).
	env   func(ws string) map[string]string
	setup func(t *testing.T, ws string)
	// edit is the documented edit of policy init's output (docs/compat.md).
	edit func(p map[string]any)
	// procEnv is the user's environment for policy init and the session
	// (not state: no --env).
	procEnv map[string]string
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
func (e compatEnv) policyInit(ws, pol string, env, procEnv map[string]string, argv []string) ([]byte, error) {
	initArgs := []string{"policy", "init", "--out", pol, "--timeout", (30 * compatTimeScale()).String()}
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
	root, compat, nm, node, runBin := e.root, e.compat, e.nm, e.node, e.runBin
	goSrv := filepath.Join(os.Getenv("MCPGUARD_SERVER_BIN"), "filesystem") // prebuilt by scripts/vmtest
	if os.Getenv("MCPGUARD_SERVER_BIN") == "" {
		goSrv = filepath.Join(t.TempDir(), "mcp-go-filesystem")
		out, err := exec.Command("go", "build", "-o", goSrv, filepath.Join(root, "testdata", "servers", "filesystem")).CombinedOutput()
		require.NoError(t, err, "build the mcp-go server: %s", out)
	}

	npxOK := os.Getenv("MCPGUARD_COMPAT_NPX") != "0"
	if _, err := exec.LookPath("npx"); err != nil {
		npxOK = false
	}
	// npmLaunchers: `node <entry>`, `node_modules/.bin/NAME` and, with
	// npx, `npx -y PKG@VERSION` (the version testdata/compat pins).
	npmLaunchers := func(pkg, binName string, npx bool, args ...string) map[string][]string {
		dir := filepath.Join(nm, filepath.FromSlash(pkg))
		var m struct {
			Version string            `json:"version"`
			Bin     map[string]string `json:"bin"`
		}
		b, err := os.ReadFile(filepath.Join(dir, "package.json"))
		require.NoError(t, err, "%s not installed: run scripts/deps.sh", pkg)
		require.NoError(t, json.Unmarshal(b, &m))
		l := map[string][]string{
			"node <entry>":      append([]string{node, filepath.Join(dir, m.Bin[binName])}, args...),
			"node_modules/.bin": append([]string{filepath.Join(nm, ".bin", binName)}, args...),
		}
		if npx && npxOK {
			l["npx -y"] = append([]string{"npx", "-y", pkg + "@" + m.Version}, args...)
		}
		return l
	}
	npmServer := func(pkg, binName string, args ...string) map[string][]string {
		return npmLaunchers("@modelcontextprotocol/"+pkg, binName, true, args...)
	}
	hello := func(t *testing.T, ws string) {
		require.NoError(t, os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hello compat\n"), 0o644))
	}
	servers := []compatServer{
		{
			name:      "server-filesystem",
			launchers: npmServer("server-filesystem", "mcp-server-filesystem", wsArg),
			setup:     hello,
			calls: func(ws string) []compatCall {
				return []compatCall{
					{Tool: "list_directory", Arguments: map[string]any{"path": ws}, Expect: "hello.txt"},
					{Tool: "read_text_file", Arguments: map[string]any{"path": filepath.Join(ws, "hello.txt")}, Expect: "hello compat"},
				}
			},
		},
		{
			name:      "server-memory",
			launchers: npmServer("server-memory", "mcp-server-memory"),
			env: func(ws string) map[string]string {
				return map[string]string{"MEMORY_FILE_PATH": filepath.Join(ws, "state", "memory.jsonl")}
			},
			setup: func(t *testing.T, ws string) {
				require.NoError(t, os.MkdirAll(filepath.Join(ws, "state"), 0o755))
				os.Remove(filepath.Join(ws, "state", "memory.jsonl"))
			},
			calls: func(ws string) []compatCall {
				return []compatCall{
					{Tool: "create_entities", Arguments: map[string]any{"entities": []any{map[string]any{"name": "alice", "entityType": "person", "observations": []any{"likes tea"}}}}, Expect: "alice"},
					{Tool: "read_graph", Expect: "likes tea"},
				}
			},
		},
		{
			name:      "server-everything",
			launchers: npmServer("server-everything", "mcp-server-everything"),
			calls: func(ws string) []compatCall {
				return []compatCall{
					{Tool: "echo", Arguments: map[string]any{"message": "hi compat"}, Expect: "hi compat"},
					{Tool: "get-sum", Arguments: map[string]any{"a": 2, "b": 3}, Expect: "5"},
				}
			},
		},
		{
			name:      "server-sequential-thinking",
			launchers: npmServer("server-sequential-thinking", "mcp-server-sequential-thinking"),
			calls: func(ws string) []compatCall {
				return []compatCall{{Tool: "sequentialthinking", Arguments: map[string]any{
					"thought": "one step", "nextThoughtNeeded": false, "thoughtNumber": 1, "totalThoughts": 1}, Expect: "thoughtNumber"}}
			},
		},
		{
			name:      "mcp-go filesystem",
			launchers: map[string][]string{"binary": {goSrv, "--ws", wsArg}},
			setup:     hello,
			calls: func(ws string) []compatCall {
				return []compatCall{{Tool: "read_text_file", Arguments: map[string]any{"path": filepath.Join(ws, "hello.txt")}, Expect: "hello compat"}}
			},
		},
	}
	// Servers beyond @modelcontextprotocol's: launched by `node <entry>`
	// only (MCPGUARD_COMPAT_ALL_LAUNCHERS=1 adds `.bin`), to keep the
	// suite's wall time down; `.bin` and npx are covered by the servers
	// above, through the same resolver.
	more := func(pkg, binName string) map[string][]string {
		l := npmLaunchers(pkg, binName, false)
		if os.Getenv("MCPGUARD_COMPAT_ALL_LAUNCHERS") != "1" {
			delete(l, "node_modules/.bin")
		}
		return l
	}
	servers = append(servers,
		compatServer{
			name:      "git-mcp-server",
			launchers: more("@cyanheads/git-mcp-server", "git-mcp-server"),
			setup:     gitRepo,
			// Documented edit: git-mcp-server runs git, a program the
			// resolver cannot see from the command: runtime.exec.
			edit: func(p map[string]any) { addRuntimeExec(t, p, "git") },
			calls: func(ws string) []compatCall {
				return []compatCall{
					{Tool: "git_status", Arguments: map[string]any{"path": ws}, Expect: "notes.txt"},
					{Tool: "git_log", Arguments: map[string]any{"path": ws}, Expect: "first commit"},
				}
			},
		},
		compatServer{
			name:      "mcp-taskmanager",
			launchers: more("@kazuph/mcp-taskmanager", "mcp-taskmanager"),
			env: func(ws string) map[string]string {
				return map[string]string{"TASK_MANAGER_FILE_PATH": filepath.Join(ws, "state", "tasks.json")}
			},
			setup: func(t *testing.T, ws string) {
				require.NoError(t, os.MkdirAll(filepath.Join(ws, "state"), 0o755))
				os.Remove(filepath.Join(ws, "state", "tasks.json"))
			},
			calls: func(ws string) []compatCall {
				return []compatCall{
					{Tool: "request_planning", Arguments: map[string]any{"originalRequest": "brew tea",
						"tasks": []any{map[string]any{"title": "boil water", "description": "kettle"}}}, Expect: "req-1"},
					{Tool: "list_requests", Expect: "brew tea"},
				}
			},
		},
		compatServer{
			name:      "excel-mcp-server",
			launchers: more("@negokaz/excel-mcp-server", "excel-mcp-server"),
			setup: func(t *testing.T, ws string) {
				writeBlankXLSX(t, filepath.Join(ws, "book.xlsx"))
			},
			calls: func(ws string) []compatCall {
				book := filepath.Join(ws, "book.xlsx")
				return []compatCall{
					{Tool: "excel_write_to_sheet", Arguments: map[string]any{"fileAbsolutePath": book, "sheetName": "Sheet1",
						"newSheet": false, "range": "A1:B1", "values": []any{[]any{"tea", 42}}}, Expect: "wrote"},
					{Tool: "excel_read_sheet", Arguments: map[string]any{"fileAbsolutePath": book, "sheetName": "Sheet1"}, Expect: "<td>42</td>"},
				}
			},
		},
	)
	pyScript := filepath.Join(root, "testdata", "servers", "py", "notes", "server.py")
	py := compatServer{
		name:      "python stdlib notes",
		launchers: map[string][]string{},
		setup: func(t *testing.T, ws string) {
			require.NoError(t, os.MkdirAll(filepath.Join(ws, "notes"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(ws, "notes", "todo.txt"), []byte("buy tea\n"), 0o644))
		},
		calls: func(ws string) []compatCall {
			return []compatCall{
				{Tool: "list_notes", Expect: "todo"},
				{Tool: "read_note", Arguments: map[string]any{"name": "todo"}, Expect: "buy tea"},
			}
		},
	}
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		py.launchers["/usr/bin/python3"] = []string{"/usr/bin/python3", "-B", pyScript, "--ws", wsArg}
		venv := filepath.Join(t.TempDir(), "venv")
		if out, err := exec.Command("/usr/bin/python3", "-m", "venv", "--without-pip", venv).CombinedOutput(); err == nil {
			py.launchers["venv elsewhere"] = []string{filepath.Join(venv, "bin", "python"), "-B", pyScript, "--ws", wsArg}
		} else {
			t.Logf("no venv cell: python3 -m venv: %v: %s", err, out)
		}
	}
	if p, err := exec.LookPath("python3"); err == nil && strings.Contains(p, "/shims/") {
		py.launchers["python3 (version manager shim)"] = []string{"python3", "-B", pyScript, "--ws", wsArg}
	}
	servers = append(servers, py)
	if tool := pyToolServer(t, root); tool != nil {
		servers = append(servers, *tool)
	}

	type cell struct {
		Server, Launcher, Config string
		OK                       bool
		Detail                   string
	}
	var cells []cell
	// Regexps: run only the servers, and the launchers, they match.
	onlySrv := regexp.MustCompile(os.Getenv("MCPGUARD_COMPAT_SERVERS"))
	onlyLaunch := regexp.MustCompile(os.Getenv("MCPGUARD_COMPAT_LAUNCHERS"))
	for _, srv := range servers {
		if !onlySrv.MatchString(srv.name) {
			continue
		}
		names := make([]string, 0, len(srv.launchers))
		for n := range srv.launchers {
			if onlyLaunch.MatchString(n) {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		for _, ln := range names {
			ws := t.TempDir()
			argv := append([]string(nil), srv.launchers[ln]...)
			for i, a := range argv {
				if a == wsArg {
					argv[i] = ws
				}
			}
			env := map[string]string{}
			if srv.env != nil {
				env = srv.env(ws)
			}
			if srv.setup != nil {
				srv.setup(t, ws)
			}
			// The policy, as the docs say to make it.
			pol := filepath.Join(t.TempDir(), "policy.json")
			out, err := e.policyInit(ws, pol, env, srv.procEnv, argv)
			if err == nil && srv.edit != nil {
				editPolicy(t, pol, srv.edit)
			}
			for _, cfg := range configs {
				c := cell{Server: srv.name, Launcher: ln, Config: cfg}
				if err != nil {
					c.Detail = "policy init: " + tail(string(out), 300)
					cells = append(cells, c)
					continue
				}
				if srv.setup != nil {
					srv.setup(t, ws)
				}
				sessEnv := maps.Clone(env)
				maps.Copy(sessEnv, srv.procEnv)
				k, v, _ := strings.Cut(resolveTimeoutEnv(), "=")
				sessEnv[k] = v
				c.OK, c.Detail = compatSession(t, node, compat, runBin, cfg, pol, ws, argv, sessEnv, srv.calls(ws))
				cells = append(cells, c)
			}
		}
	}
	// The matrix.
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
			if c.OK {
				mark = "ok"
				ok[c.Config]++
			}
			total[c.Config]++
			fmt.Fprintf(&b, " %-16s", mark)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "%-61s", "working cells")
	for _, c := range configs {
		fmt.Fprintf(&b, " %-16s", fmt.Sprintf("%d/%d", ok[c], total[c]))
	}
	t.Logf("compatibility matrix (run binary %s):\n%s", runBin, b.String())
	if f := os.Getenv("MCPGUARD_COMPAT_OUT"); f != "" {
		j, _ := json.MarshalIndent(cells, "", "  ")
		require.NoError(t, os.WriteFile(f, j, 0o644))
	}
	for _, c := range cells {
		if !c.OK {
			t.Errorf("%s / %s / %s: %s", c.Server, c.Launcher, c.Config, c.Detail)
		}
	}
}

// compatSession runs one cell: the SDK client against `mcpguard run`.
func compatSession(t *testing.T, node, compat, bin, cfg, pol, ws string, argv []string, env map[string]string, calls []compatCall) (bool, string) {
	t.Helper()
	spec := map[string]any{
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

// gitRepo makes ws a git repository with one commit and an untracked file
// (once; later calls find it there).
func gitRepo(t *testing.T, ws string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(ws, ".git")); err == nil {
		return
	}
	require.NoError(t, os.WriteFile(filepath.Join(ws, "readme.txt"), []byte("compat\n"), 0o644))
	for _, args := range [][]string{
		{"init", "-q"},
		{"add", "readme.txt"},
		{"-c", "user.name=compat", "-c", "user.email=compat@example.invalid", "commit", "-q", "-m", "first commit"},
	} {
		c := exec.Command("git", args...)
		c.Dir = ws
		out, err := c.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	require.NoError(t, os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("untracked\n"), 0o644))
}

// addRuntimeExec is the documented edit for a server that runs a program
// (docs/compat.md): the program, found on PATH, into runtime.exec.
func addRuntimeExec(t *testing.T, p map[string]any, name string) {
	t.Helper()
	prog, err := exec.LookPath(name)
	require.NoError(t, err)
	rt, _ := p["runtime"].(map[string]any)
	if rt == nil {
		rt = map[string]any{}
		p["runtime"] = rt
	}
	ex, _ := rt["exec"].([]any)
	rt["exec"] = append(ex, prog)
}

// writeBlankXLSX writes a workbook with one empty sheet, Sheet1: the
// smallest file excel-mcp-server (excelize) opens.
func writeBlankXLSX(t *testing.T, path string) {
	t.Helper()
	const hdr = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>`
	const rel = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
	parts := []struct{ name, body string }{
		{"[Content_Types].xml", hdr + `<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">` +
			`<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>` +
			`<Default Extension="xml" ContentType="application/xml"/>` +
			`<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>` +
			`<Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>`},
		{"_rels/.rels", hdr + `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
			`<Relationship Id="rId1" Type="` + rel + `/officeDocument" Target="xl/workbook.xml"/></Relationships>`},
		{"xl/workbook.xml", hdr + `<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="` + rel + `">` +
			`<sheets><sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>`},
		{"xl/_rels/workbook.xml.rels", hdr + `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
			`<Relationship Id="rId1" Type="` + rel + `/worksheet" Target="worksheets/sheet1.xml"/></Relationships>`},
		{"xl/worksheets/sheet1.xml", hdr + `<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">` +
			`<dimension ref="A1"/><sheetData/></worksheet>`},
	}
	f, err := os.Create(path)
	require.NoError(t, err)
	z := zip.NewWriter(f)
	for _, p := range parts {
		w, err := z.Create(p.name)
		require.NoError(t, err)
		_, err = w.Write([]byte(p.body))
		require.NoError(t, err)
	}
	require.NoError(t, z.Close())
	require.NoError(t, f.Close())
}

// sink is a loopback TCP listener that keeps every byte it is sent: the
// exfiltration oracle of TestCompatTwins.
type sink struct {
	ln  net.Listener
	mu  sync.Mutex
	got []byte
}

func newSink(t *testing.T) *sink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &sink{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				b, _ := io.ReadAll(c)
				s.mu.Lock()
				s.got = append(s.got, b...)
				s.mu.Unlock()
			}()
		}
	}()
	return s
}

func (s *sink) port() string { return fmt.Sprint(s.ln.Addr().(*net.TCPAddr).Port) }

func (s *sink) has(canary string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Contains(s.got, []byte(canary))
}

func (s *sink) reset() {
	s.mu.Lock()
	s.got = nil
	s.mu.Unlock()
}

// TestCompatTwins runs trojaned twins of two real npm servers
// (testdata/compat/trojans: a wrapper package that imports the real
// server's entry module and adds an attack) through `mcpguard run`, with
// policies made by `policy init` as for their real twins. Oracles outside
// the guard decide: a canary arriving at a loopback sink the test owns, a
// planted file appearing. Each attack must succeed under C0 (it is
// viable) and fail under C-landlock and C-full-landlock, with the twin's
// benign calls working under every config. C-app's verdict is reported:
// L1 and L2 judge tool calls, and these attacks make none.
func TestCompatTwins(t *testing.T) {
	t.Parallel()
	e := newCompatEnv(t)
	configs := compatConfigList()
	sk := newSink(t)
	twins := filepath.Join(e.compat, "trojans")
	const planted = "mcpguard-twin-planted"
	type attack struct {
		twin, name, class string
		// hit reports whether the attack happened, from outside the guard.
		hit func(ws, home string) bool
		// expectNotBlocked, when set, says why this machine's L3 cannot
		// stop the attack: it is then reported, not asserted.
		expectNotBlocked string
	}
	plantedAt := func(rel func(ws, home string) string) func(ws, home string) bool {
		return func(ws, home string) bool {
			b, err := os.ReadFile(rel(ws, home))
			return err == nil && bytes.Contains(b, []byte(planted))
		}
	}
	const sshCanary, envCanary = "CANARY-SSH-7f3a91", "CANARY-ENV-c02b64"
	attacks := []attack{
		{twin: "filesystem-twin", name: "ssh-at-start", class: "exfiltration",
			hit: func(ws, home string) bool { return sk.has(sshCanary) }},
		{twin: "filesystem-twin", name: "child-env", class: "exfiltration",
			hit: func(ws, home string) bool { return sk.has(envCanary) }},
		{twin: "filesystem-twin", name: "hook-on-call", class: "persistence",
			hit: plantedAt(func(ws, home string) string { return filepath.Join(ws, ".git", "hooks", "pre-commit") })},
		{twin: "memory-twin", name: "env-on-call", class: "exfiltration",
			hit: func(ws, home string) bool { return sk.has(envCanary) }},
		{twin: "memory-twin", name: "child-hook", class: "persistence",
			hit: plantedAt(func(ws, home string) string { return filepath.Join(ws, ".git", "hooks", "post-checkout") })},
		{twin: "memory-twin", name: "bashrc-at-start", class: "persistence",
			hit: plantedAt(func(ws, home string) string { return filepath.Join(home, ".bashrc") })},
	}
	if os.Geteuid() != 0 {
		// The write root holds .git: only a root proxy's mount namespace
		// keeps .git/hooks read-only inside it (guard/launch.Protect).
		attacks[2].expectNotBlocked = "non-root proxy: .git/hooks inside the write root stays writable without a mount namespace"
	}
	type verdict struct {
		Twin, Attack, Class, Config string
		Attacked, BenignOK          bool
		Detail                      string
	}
	var verdicts []verdict
	// One policy per twin: policy init ignores the --twin-* arguments
	// (they select an attack, not a tool), so a twin's policy is the same
	// whichever attack its command names.
	// The workspace and HOME are a twin's too (reset before every session):
	// the memory twin's policy names its state directory.
	policies := map[string]string{}
	dirs := map[string][2]string{}
	for _, a := range attacks {
		if _, ok := dirs[a.twin]; !ok {
			dirs[a.twin] = [2]string{t.TempDir(), t.TempDir()}
		}
		ws, home := dirs[a.twin][0], dirs[a.twin][1]
		reset := func() {
			sk.reset()
			require.NoError(t, os.RemoveAll(filepath.Join(ws, ".git")))
			require.NoError(t, os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hello compat\n"), 0o644))
			require.NoError(t, os.MkdirAll(filepath.Join(ws, "state"), 0o755))
			os.Remove(filepath.Join(ws, "state", "memory.jsonl"))
			require.NoError(t, os.WriteFile(filepath.Join(home, ".bashrc"), []byte("# the user's\n"), 0o644))
			require.NoError(t, os.MkdirAll(filepath.Join(home, ".ssh"), 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(home, ".ssh", "id_rsa"), []byte(sshCanary+"\n"), 0o600))
			require.NoError(t, os.MkdirAll(filepath.Join(home, "project"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(home, "project", ".env"), []byte("API_KEY="+envCanary+"\n"), 0o644))
		}
		reset()
		argv := []string{e.node, filepath.Join(twins, a.twin, "index.mjs"), "--twin-attack=" + a.name, "--twin-sink=" + sk.port()}
		env := map[string]string{}
		var calls []compatCall
		switch a.twin {
		case "filesystem-twin":
			argv = append(argv, ws)
			calls = []compatCall{
				{Tool: "list_directory", Arguments: map[string]any{"path": ws}, Expect: "hello.txt"},
				{Tool: "read_text_file", Arguments: map[string]any{"path": filepath.Join(ws, "hello.txt")}, Expect: "hello compat"},
			}
		case "memory-twin":
			env["MEMORY_FILE_PATH"] = filepath.Join(ws, "state", "memory.jsonl")
			calls = []compatCall{
				{Tool: "create_entities", Arguments: map[string]any{"entities": []any{map[string]any{"name": "alice", "entityType": "person", "observations": []any{"likes tea"}}}}, Expect: "alice"},
				{Tool: "read_graph", Expect: "likes tea"},
			}
		}
		// The user's policy step runs the twin unconfined, as it would for
		// the real server; the fake HOME keeps its attack off this machine.
		pol, ok := policies[a.twin]
		if !ok {
			pol = filepath.Join(t.TempDir(), "policy.json")
			out, err := e.policyInit(ws, pol, env, map[string]string{"HOME": home}, argv)
			require.NoError(t, err, "policy init %s: %s", a.twin, tail(string(out), 500))
			policies[a.twin] = pol
		}
		sessEnv := maps.Clone(env)
		sessEnv["HOME"] = home
		for _, cfg := range configs {
			reset()
			ok, detail := compatSession(t, e.node, e.compat, e.runBin, cfg, pol, ws, argv, sessEnv, calls)
			hit := false
			// Attacks on a tool result or in a child may land just after
			// the session: wait a little.
			for deadline := time.Now().Add(time.Second); ; time.Sleep(50 * time.Millisecond) {
				if hit = a.hit(ws, home); hit || time.Now().After(deadline) {
					break
				}
			}
			verdicts = append(verdicts, verdict{a.twin, a.name, a.class, cfg, hit, ok, detail})
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-16s %-16s %-13s", "twin", "attack", "class")
	for _, c := range configs {
		fmt.Fprintf(&b, " %-18s", c)
	}
	b.WriteString("\n")
	for i := 0; i < len(verdicts); i += len(configs) {
		v := verdicts[i]
		fmt.Fprintf(&b, "%-16s %-16s %-13s", v.Twin, v.Attack, v.Class)
		for _, v := range verdicts[i : i+len(configs)] {
			mark := "blocked"
			if v.Attacked {
				mark = "ATTACKED"
			}
			if !v.BenignOK {
				mark += "/benign-FAIL"
			}
			fmt.Fprintf(&b, " %-18s", mark)
		}
		b.WriteString("\n")
	}
	t.Logf("trojaned twins (an attack happened when its oracle saw it; run binary %s):\n%s", e.runBin, b.String())
	for i, v := range verdicts {
		a := attacks[i/len(configs)]
		where := fmt.Sprintf("%s %s under %s", v.Twin, v.Attack, v.Config)
		assert.True(t, v.BenignOK, "%s: benign calls: %s", where, v.Detail)
		switch v.Config {
		case "C0":
			assert.True(t, v.Attacked, "%s: the attack must succeed without a guard (else it proves nothing)", where)
		case "C-landlock", "C-full-landlock", "C-ebpf", "C-full":
			if a.expectNotBlocked != "" {
				t.Logf("%s: not blocked, expected: %s", where, a.expectNotBlocked)
				continue
			}
			assert.False(t, v.Attacked, "%s: L3 must block it", where)
		}
	}
}

// pyToolServer is the Python notes server installed as a tool, the way
// `uv tool install` and `pipx install` lay it out (there is no PyPI here):
// a venv per tool under a fake HOME's default tool directories, the
// server's module in its site-packages and a console script in its bin.
// It is launched as `uvx py-notes-server` and `pipx run py-notes-server`,
// with stand-ins for uvx and pipx on PATH that run the installed tool
// (what the real ones do for an installed tool); under L3 mcpguard
// resolves the command to the entry point itself. Nil when python3 -m
// venv does not work here.
func pyToolServer(t *testing.T, root string) *compatServer {
	t.Helper()
	const name = "py-notes-server"
	home, bin := t.TempDir(), t.TempDir()
	src := filepath.Join(root, "testdata", "servers", "py")
	for _, venv := range []string{
		filepath.Join(home, ".local", "share", "uv", "tools", name),
		filepath.Join(home, ".local", "share", "pipx", "venvs", name),
	} {
		if out, err := exec.Command("/usr/bin/python3", "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
			t.Logf("no installed-tool cells: python3 -m venv: %v: %s", err, out)
			return nil
		}
		site, err := filepath.Glob(filepath.Join(venv, "lib", "python*", "site-packages"))
		require.NoError(t, err)
		require.Len(t, site, 1)
		for from, to := range map[string]string{"mcpstdio.py": "mcpstdio.py", "notes/server.py": "py_notes_server.py"} {
			b, err := os.ReadFile(filepath.Join(src, from))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(site[0], to), b, 0o644))
		}
		require.NoError(t, os.MkdirAll(filepath.Join(site[0], "py_notes_server-1.0.0.dist-info"), 0o755))
		script := "#!" + filepath.Join(venv, "bin", "python") + "\nimport runpy\nrunpy.run_module('py_notes_server', run_name='__main__', alter_sys=True)\n"
		require.NoError(t, os.WriteFile(filepath.Join(venv, "bin", name), []byte(script), 0o755))
	}
	stand := map[string]string{
		"uvx":  "#!/bin/sh\n# stand-in for uvx: installed tools only\nn=$1; shift; exec \"$HOME/.local/share/uv/tools/$n/bin/$n\" \"$@\"\n",
		"pipx": "#!/bin/sh\n# stand-in for pipx run: installed packages only\n[ \"$1\" = run ] || exit 2; shift; n=$1; shift; exec \"$HOME/.local/share/pipx/venvs/$n/bin/$n\" \"$@\"\n",
	}
	for n, body := range stand {
		require.NoError(t, os.WriteFile(filepath.Join(bin, n), []byte(body), 0o755))
	}
	return &compatServer{
		name: "python notes, installed",
		launchers: map[string][]string{
			"uvx":      {"uvx", name, "--ws", wsArg},
			"pipx run": {"pipx", "run", name, "--ws", wsArg},
		},
		procEnv: map[string]string{"HOME": home, "PATH": bin + string(os.PathListSeparator) + os.Getenv("PATH")},
		setup: func(t *testing.T, ws string) {
			require.NoError(t, os.MkdirAll(filepath.Join(ws, "notes"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(ws, "notes", "todo.txt"), []byte("buy tea\n"), 0o644))
		},
		calls: func(ws string) []compatCall {
			return []compatCall{
				{Tool: "list_notes", Expect: "todo"},
				{Tool: "read_note", Arguments: map[string]any{"name": "todo"}, Expect: "buy tea"},
			}
		},
	}
}
