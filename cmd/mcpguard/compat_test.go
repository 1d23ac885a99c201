package main

import (
	"archive/zip"
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
	"strings"
	"testing"
	"time"

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
}

// Configs that run on a host with Landlock and without BPF LSM.
var compatConfigs = []string{"C0", "C-app", "C-landlock", "C-full-landlock"}

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
	e.bin = filepath.Join(t.TempDir(), "mcpguard")
	out, err := exec.Command("go", "build", "-o", e.bin, ".").CombinedOutput()
	require.NoError(t, err, "build mcpguard: %s", out)
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
	initArgs := []string{"policy", "init", "--out", pol}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		initArgs = append(initArgs, "--env", k+"="+env[k])
	}
	initArgs = append(append(initArgs, "--"), argv...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ic := exec.CommandContext(ctx, e.bin, initArgs...)
	ic.Dir = ws
	ic.Env = os.Environ()
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
	e := newCompatEnv(t)
	root, compat, nm, node, runBin := e.root, e.compat, e.nm, e.node, e.runBin
	goSrv := filepath.Join(t.TempDir(), "mcp-go-filesystem")
	out, err := exec.Command("go", "build", "-o", goSrv, filepath.Join(root, "testdata", "servers", "filesystem")).CombinedOutput()
	require.NoError(t, err, "build the mcp-go server: %s", out)

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
		require.NoError(t, err)
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
	const wsArg = "\x00WS"
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
	// and `.bin` only (no npx), to keep the suite's wall time down.
	servers = append(servers,
		compatServer{
			name:      "git-mcp-server",
			launchers: npmLaunchers("@cyanheads/git-mcp-server", "git-mcp-server", false),
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
			launchers: npmLaunchers("@kazuph/mcp-taskmanager", "mcp-taskmanager", false),
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
			launchers: npmLaunchers("@negokaz/excel-mcp-server", "excel-mcp-server", false),
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

	type cell struct {
		Server, Launcher, Config string
		OK                       bool
		Detail                   string
	}
	var cells []cell
	only := os.Getenv("MCPGUARD_COMPAT_SERVERS") // a regexp: run only the servers it matches
	for _, srv := range servers {
		if only != "" && !regexp.MustCompile(only).MatchString(srv.name) {
			continue
		}
		names := make([]string, 0, len(srv.launchers))
		for n := range srv.launchers {
			names = append(names, n)
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
			out, err := e.policyInit(ws, pol, env, nil, argv)
			if err == nil && srv.edit != nil {
				editPolicy(t, pol, srv.edit)
			}
			for _, cfg := range compatConfigs {
				c := cell{Server: srv.name, Launcher: ln, Config: cfg}
				if err != nil {
					c.Detail = "policy init: " + tail(string(out), 300)
					cells = append(cells, c)
					continue
				}
				if srv.setup != nil {
					srv.setup(t, ws)
				}
				c.OK, c.Detail = compatSession(t, node, compat, runBin, cfg, pol, ws, argv, env, srv.calls(ws))
				cells = append(cells, c)
			}
		}
	}
	// The matrix.
	var b strings.Builder
	fmt.Fprintf(&b, "%-28s %-32s", "server", "launcher")
	for _, c := range compatConfigs {
		fmt.Fprintf(&b, " %-16s", c)
	}
	b.WriteString("\n")
	ok := map[string]int{}
	total := map[string]int{}
	for i := 0; i < len(cells); i += len(compatConfigs) {
		fmt.Fprintf(&b, "%-28s %-32s", cells[i].Server, cells[i].Launcher)
		for _, c := range cells[i : i+len(compatConfigs)] {
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
	for _, c := range compatConfigs {
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
		"timeoutMs": 60000,
		"calls":     calls,
	}
	b, err := json.Marshal(spec)
	require.NoError(t, err)
	f := filepath.Join(t.TempDir(), "spec.json")
	require.NoError(t, os.WriteFile(f, b, 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
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
