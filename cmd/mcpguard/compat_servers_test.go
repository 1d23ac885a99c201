package main

import (
	"archive/zip"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// compatServers are the compatibility matrix's rows (docs/compat.md's
// table of servers and calls), in the matrix's order. Adding a server is
// adding a row: how it is found and launched, what its workspace needs,
// its benign calls and the text their results must hold.
var compatServers = []compatServer{
	{
		name:   "server-filesystem",
		launch: official("server-filesystem", "mcp-server-filesystem", wsArg),
		setup:  hello,
		calls:  filesystemCalls,
	},
	{
		name:   "server-memory",
		launch: official("server-memory", "mcp-server-memory"),
		env:    stateFileEnv("MEMORY_FILE_PATH", "memory.jsonl"),
		setup:  freshState("memory.jsonl"),
		calls:  memoryCalls,
	},
	{
		name:   "server-everything",
		launch: official("server-everything", "mcp-server-everything"),
		calls: func(ws string) []compatCall {
			return []compatCall{
				{Tool: "echo", Arguments: map[string]any{"message": "hi compat"}, Expect: "hi compat"},
				{Tool: "get-sum", Arguments: map[string]any{"a": 2, "b": 3}, Expect: "5"},
			}
		},
	},
	{
		name:   "server-sequential-thinking",
		launch: official("server-sequential-thinking", "mcp-server-sequential-thinking"),
		calls: func(ws string) []compatCall {
			return []compatCall{{Tool: "sequentialthinking", Arguments: map[string]any{
				"thought": "one step", "nextThoughtNeeded": false, "thoughtNumber": 1, "totalThoughts": 1}, Expect: "thoughtNumber"}}
		},
	},
	{
		name:   "mcp-go filesystem",
		launch: goFilesystemServer,
		setup:  hello,
		calls: func(ws string) []compatCall {
			return []compatCall{{Tool: "read_text_file", Arguments: map[string]any{"path": filepath.Join(ws, "hello.txt")}, Expect: "hello compat"}}
		},
	},
	{
		name:   "git-mcp-server",
		launch: more("@cyanheads/git-mcp-server", "git-mcp-server"),
		setup:  gitRepo,
		// Documented edit: git-mcp-server runs git, a program the
		// resolver cannot see from the command: runtime.exec.
		edit: func(t *testing.T, p map[string]any) { addRuntimeExec(t, p, "git") },
		calls: func(ws string) []compatCall {
			return []compatCall{
				{Tool: "git_status", Arguments: map[string]any{"path": ws}, Expect: "notes.txt"},
				{Tool: "git_log", Arguments: map[string]any{"path": ws}, Expect: "first commit"},
			}
		},
	},
	{
		name:   "mcp-taskmanager",
		launch: more("@kazuph/mcp-taskmanager", "mcp-taskmanager"),
		env:    stateFileEnv("TASK_MANAGER_FILE_PATH", "tasks.json"),
		setup:  freshState("tasks.json"),
		calls: func(ws string) []compatCall {
			return []compatCall{
				{Tool: "request_planning", Arguments: map[string]any{"originalRequest": "brew tea",
					"tasks": []any{map[string]any{"title": "boil water", "description": "kettle"}}}, Expect: "req-1"},
				{Tool: "list_requests", Expect: "brew tea"},
			}
		},
	},
	{
		name:   "excel-mcp-server",
		launch: more("@negokaz/excel-mcp-server", "excel-mcp-server"),
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
	{
		// Its full tool list, start_search among them (its description
		// names .env among the files it finds, which an earlier rule
		// took for poisoning and removed, silently).
		name:   "desktop-commander",
		launch: more("@wonderwhy-er/desktop-commander", "desktop-commander"),
		// It keeps its configuration and history in $HOME.
		env: func(ws string) map[string]string {
			return map[string]string{"HOME": filepath.Join(ws, ".home")}
		},
		setup: func(t *testing.T, ws string) {
			hello(t, ws)
			require.NoError(t, os.MkdirAll(filepath.Join(ws, ".home"), 0o755))
		},
		policy: listedPolicy("desktop-commander"),
		tools: []string{"create_directory", "edit_block", "force_terminate", "get_config", "get_file_info",
			"get_more_search_results", "get_prompts", "get_recent_tool_calls", "get_usage_stats",
			"give_feedback_to_desktop_commander", "interact_with_process", "kill_process", "list_directory",
			"list_processes", "list_searches", "list_sessions", "move_file", "read_file", "read_multiple_files",
			"read_process_output", "set_config_value", "start_process", "start_search", "stop_search",
			"write_file", "write_pdf"},
		calls: func(ws string) []compatCall {
			return []compatCall{
				{Tool: "read_file", Arguments: map[string]any{"path": filepath.Join(ws, "hello.txt")}, Expect: "hello compat"},
				{Tool: "list_directory", Arguments: map[string]any{"path": ws}, Expect: "hello.txt"},
				{Tool: "write_file", Arguments: map[string]any{"path": filepath.Join(ws, "out.txt"), "content": "tea", "mode": "rewrite"}, Expect: "Successfully wrote"},
			}
		},
	},
	{
		// A code runner (issue 33's matrix): it writes the code to a
		// file in os.tmpdir() (under L3 the server's own TMPDIR) and
		// runs it through a shell. Documented edit: runtime.exec
		// /bin/sh, the line mcpguard prints when the shell is refused.
		name:   "code-runner",
		launch: more("mcp-server-code-runner", "mcp-server-code-runner"),
		edit:   func(t *testing.T, p map[string]any) { addRuntimeExec(t, p, "/bin/sh") },
		calls: func(ws string) []compatCall {
			return []compatCall{{Tool: "run-code", Arguments: map[string]any{"languageId": "javascript", "code": "console.log('js' + 6*7)"}, Expect: "js42"}}
		},
	},
	{
		name:   "python stdlib notes",
		launch: pythonNotes,
		setup:  notesDir,
		calls:  notesCalls,
	},
	{
		name:   "python notes, installed",
		launch: installedPythonNotes,
		setup:  notesDir,
		calls:  notesCalls,
	},
}

// listedPolicy is the policy of a server policy init cannot start: its
// listing, made direct, written as init writes it (each listed tool with
// its schema), the workspace to read and write and the environment it is
// given. desktop-commander creates ~/.claude-server-commander and writes
// its configuration there as it starts, which init's confined run (the
// working directory read-only, a scratch directory the only one to write)
// refuses: it exits before it answers initialize (docs/compat.md).
func listedPolicy(server string) func(t *testing.T, e compatEnv, ws, pol string, argv []string, env map[string]string) {
	return func(t *testing.T, e compatEnv, ws, pol string, argv []string, env map[string]string) {
		t.Helper()
		l := listWith(t, e, ws, env, argv)
		writeListedPolicy(t, pol, server, l, map[string]any{"read": []string{"${WS}"}, "write": []string{"${WS}"}},
			slices.Sorted(maps.Keys(env)))
	}
}

// The benign calls and workspaces a real server shares with its trojaned
// twin (TestCompatTwins) or with another way to run the same server.

func filesystemCalls(ws string) []compatCall {
	return []compatCall{
		{Tool: "list_directory", Arguments: map[string]any{"path": ws}, Expect: "hello.txt"},
		{Tool: "read_text_file", Arguments: map[string]any{"path": filepath.Join(ws, "hello.txt")}, Expect: "hello compat"},
	}
}

func memoryCalls(ws string) []compatCall {
	return []compatCall{
		{Tool: "create_entities", Arguments: map[string]any{"entities": []any{map[string]any{"name": "alice", "entityType": "person", "observations": []any{"likes tea"}}}}, Expect: "alice"},
		{Tool: "read_graph", Expect: "likes tea"},
	}
}

func notesCalls(ws string) []compatCall {
	return []compatCall{
		{Tool: "list_notes", Expect: "todo"},
		{Tool: "read_note", Arguments: map[string]any{"name": "todo"}, Expect: "buy tea"},
	}
}

func hello(t *testing.T, ws string) {
	require.NoError(t, os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hello compat\n"), 0o644))
}

func notesDir(t *testing.T, ws string) {
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "notes"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "notes", "todo.txt"), []byte("buy tea\n"), 0o644))
}

// stateFileEnv gives a server that keeps its state at a path named by an
// environment variable a file in the workspace's state directory.
func stateFileEnv(name, file string) func(ws string) map[string]string {
	return func(ws string) map[string]string {
		return map[string]string{name: filepath.Join(ws, "state", file)}
	}
}

// freshState makes the state directory and removes the state file: every
// session starts with none.
func freshState(file string) func(t *testing.T, ws string) {
	return func(t *testing.T, ws string) {
		require.NoError(t, os.MkdirAll(filepath.Join(ws, "state"), 0o755))
		os.Remove(filepath.Join(ws, "state", file))
	}
}

// npmPackage's launchers are those of a package testdata/compat installs:
// `node <entry>`, `node_modules/.bin/NAME` and, with npx (on PATH, and
// MCPGUARD_COMPAT_NPX is not 0), `npx -y PKG@VERSION` (the version
// testdata/compat pins).
func npmPackage(t *testing.T, e compatEnv, pkg, binName string, npx bool, args ...string) launchers {
	t.Helper()
	dir := filepath.Join(e.nm, filepath.FromSlash(pkg))
	var m struct {
		Version string            `json:"version"`
		Bin     map[string]string `json:"bin"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	require.NoError(t, err, "%s not installed: run scripts/deps.sh", pkg)
	require.NoError(t, json.Unmarshal(b, &m))
	l := launchers{argv: map[string][]string{
		"node <entry>":      append([]string{e.node, filepath.Join(dir, m.Bin[binName])}, args...),
		"node_modules/.bin": append([]string{filepath.Join(e.nm, ".bin", binName)}, args...),
	}}
	if _, err := exec.LookPath("npx"); err == nil && npx && os.Getenv("MCPGUARD_COMPAT_NPX") != "0" {
		l.argv["npx -y"] = append([]string{"npx", "-y", pkg + "@" + m.Version}, args...)
	}
	return l
}

// official is one of @modelcontextprotocol's servers: every launcher.
func official(pkg, binName string, args ...string) func(*testing.T, compatEnv) launchers {
	return func(t *testing.T, e compatEnv) launchers {
		return npmPackage(t, e, "@modelcontextprotocol/"+pkg, binName, true, args...)
	}
}

// more is a server beyond @modelcontextprotocol's: launched by `node
// <entry>` only (MCPGUARD_COMPAT_ALL_LAUNCHERS=1 adds `.bin`), to keep
// the suite's wall time down; `.bin` and npx are covered by the official
// servers, through the same resolver.
func more(pkg, binName string) func(*testing.T, compatEnv) launchers {
	return func(t *testing.T, e compatEnv) launchers {
		l := npmPackage(t, e, pkg, binName, false)
		if os.Getenv("MCPGUARD_COMPAT_ALL_LAUNCHERS") != "1" {
			delete(l.argv, "node_modules/.bin")
		}
		return l
	}
}

// goFilesystemServer is testdata/servers/filesystem's binary: prebuilt by
// scripts/vmtest (MCPGUARD_SERVER_BIN), else built here.
func goFilesystemServer(t *testing.T, e compatEnv) launchers {
	t.Helper()
	bin := filepath.Join(os.Getenv("MCPGUARD_SERVER_BIN"), "filesystem")
	if os.Getenv("MCPGUARD_SERVER_BIN") == "" {
		bin = filepath.Join(t.TempDir(), "mcp-go-filesystem")
		out, err := exec.Command("go", "build", "-o", bin, filepath.Join(e.root, "testdata", "servers", "filesystem")).CombinedOutput()
		require.NoError(t, err, "build the mcp-go server: %s", out)
	}
	return launchers{argv: map[string][]string{"binary": {bin, "--ws", wsArg}}}
}

// pythonNotes is testdata/servers/py/notes launched by the system's
// python3, from a venv in another directory, and through a version
// manager's shim where python3 on PATH is one.
func pythonNotes(t *testing.T, e compatEnv) launchers {
	t.Helper()
	script := filepath.Join(e.root, "testdata", "servers", "py", "notes", "server.py")
	l := launchers{argv: map[string][]string{}}
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		l.argv["/usr/bin/python3"] = []string{"/usr/bin/python3", "-B", script, "--ws", wsArg}
		venv := filepath.Join(t.TempDir(), "venv")
		if out, err := exec.Command("/usr/bin/python3", "-m", "venv", "--without-pip", venv).CombinedOutput(); err == nil {
			l.argv["venv elsewhere"] = []string{filepath.Join(venv, "bin", "python"), "-B", script, "--ws", wsArg}
		} else {
			t.Logf("no venv cell: python3 -m venv: %v: %s", err, out)
		}
	}
	if p, err := exec.LookPath("python3"); err == nil && strings.Contains(p, "/shims/") {
		l.argv["python3 (version manager shim)"] = []string{"python3", "-B", script, "--ws", wsArg}
	}
	return l
}

// installedPythonNotes is the Python notes server installed as a tool, the way
// `uv tool install` and `pipx install` lay it out (there is no PyPI here):
// a venv per tool under a fake HOME's default tool directories, the
// server's module in its site-packages and a console script in its bin.
// It is launched as `uvx py-notes-server` and `pipx run py-notes-server`,
// with stand-ins for uvx and pipx on PATH that run the installed tool
// (what the real ones do for an installed tool); under L3 mcpguard
// resolves the command to the entry point itself. None when python3 -m
// venv does not work here.
func installedPythonNotes(t *testing.T, e compatEnv) launchers {
	t.Helper()
	const name = "py-notes-server"
	home, bin := t.TempDir(), t.TempDir()
	src := filepath.Join(e.root, "testdata", "servers", "py")
	for _, venv := range []string{
		filepath.Join(home, ".local", "share", "uv", "tools", name),
		filepath.Join(home, ".local", "share", "pipx", "venvs", name),
	} {
		if out, err := exec.Command("/usr/bin/python3", "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
			t.Logf("no installed-tool cells: python3 -m venv: %v: %s", err, out)
			return launchers{}
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
	return launchers{
		argv: map[string][]string{
			"uvx":      {"uvx", name, "--ws", wsArg},
			"pipx run": {"pipx", "run", name, "--ws", wsArg},
		},
		procEnv: map[string]string{"HOME": home, "PATH": bin + string(os.PathListSeparator) + os.Getenv("PATH")},
	}
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
