package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/landlock/ruleset"
	_ "github.com/mcpguard/mcpguard/internal/testenv"
)

func runIn(t *testing.T, stdin io.Reader, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	// Several goroutines write stderr (the server's relay, the denial
	// echo, the explainer), as they do os.Stderr: a bare bytes.Buffer
	// lost lines to the race.
	var out, errb syncBuffer
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code = run(ctx, stdio{stdin, &out, &errb}, args)
	return code, out.String(), errb.String()
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"nosuchcommand"},
		{"run"},
		{"run", "--config", "C-nope", "--", "true"},
		{"call", "--", "true"},
		{"call", "--tool", "x", "--args", "[1]", "--", "true"},
		{"gate", "onlyone.txt"},
		{"report"},
	} {
		code, _, stderr := runIn(t, nil, args...)
		assert.Equal(t, 2, code, "%v: %s", args, stderr)
		assert.NotEmpty(t, stderr, "%v says why", args)
	}
	code, _, stderr := runIn(t, nil, "run", "-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, stderr, `"command": "mcpguard"`, "run -h shows a client config snippet")
}

// `mcpguard run` relays a whole session over stdio; stdout carries only JSON-RPC.
func TestRunSession(t *testing.T) {
	argv := buildServer(t, "filesystem")
	ws := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hello from a"), 0o644))
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":%q}}}`, filepath.Join(ws, "a.txt")),
	}, "\n") + "\n"
	code, stdout, stderr := runIn(t, strings.NewReader(in), append([]string{"run", "--grace", "200ms", "--"}, append(argv, "--ws", ws)...)...)
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Len(t, lines, 2, "one response per request, nothing else on stdout: %q", stdout)
	byID := map[float64]string{}
	for _, l := range lines {
		var m struct{ ID float64 }
		require.NoError(t, json.Unmarshal([]byte(l), &m), "stdout line is JSON-RPC: %q", l)
		byID[m.ID] = l
	}
	require.Len(t, byID, 2, "each request answered once")
	assert.Contains(t, byID[2], "hello from a")
}

// A server that exits on its own makes `run` exit 3.
func TestRunServerExited(t *testing.T) {
	r, w := io.Pipe() // the client never closes its side
	defer w.Close()
	code, _, stderr := runIn(t, r, "run", "--", "sh", "-c", "exit 5")
	assert.Equal(t, exitServerExited, code)
	assert.Contains(t, stderr, "exit status 5")
}

func TestCallPrintsResultAndDenies(t *testing.T) {
	argv := buildServer(t, "filesystem")
	ws := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hello from a"), 0o644))
	args := fmt.Sprintf(`{"path":%q}`, filepath.Join(ws, "a.txt"))
	server := append(argv, "--ws", ws)

	code, stdout, stderr := runIn(t, nil, append([]string{"call", "--tool", "read_file", "--args", args, "--"}, server...)...)
	require.Equal(t, 0, code, stderr)
	var res struct {
		Content []struct{ Text string } `json:"content"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &res), stdout)
	require.NotEmpty(t, res.Content)
	assert.Equal(t, "hello from a", res.Content[0].Text)

	// C-app with the corpus policy (workspace = ws): reading outside is denied, exit 4.
	policyFile, err := filepath.Abs("../../testdata/policies/filesystem.json")
	require.NoError(t, err)
	code, stdout, stderr = runIn(t, nil, append([]string{"call", "--config", "C-app", "--policy", policyFile,
		"--var", "WS=" + ws, "--tool", "read_file", "--args", `{"path":"/etc/shadow"}`, "--"}, server...)...)
	assert.Equal(t, exitDenied, code, stderr)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "mcpguard: denied by ")
}

// TestRunEchoesDenials: `run` prints each refusal on stderr as well as
// answering the client with it (a client that hides tool errors left the
// user with nothing: issue 33's matrix), with where to find what would
// allow it; the same refusal twice is printed once.
func TestRunEchoesDenials(t *testing.T) {
	server := buildServer(t, "filesystem")
	ws := t.TempDir()
	policyFile, err := filepath.Abs("../../testdata/policies/filesystem.json")
	require.NoError(t, err)
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	call := `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/etc/shadow"}}}`
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		fmt.Sprintf(call, 2), fmt.Sprintf(call, 3),
	}, "\n") + "\n"
	code, stdout, stderr := runIn(t, strings.NewReader(in), append([]string{"run", "--grace", "200ms", "--config", "C-app", "--policy", policyFile,
		"--var", "WS=" + ws, "--audit", auditFile, "--"}, append(server, "--ws", ws)...)...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "-32010", "the client gets the refusal")
	assert.Equal(t, 1, strings.Count(stderr, "mcpguard: denied tools/call read_file: mcpguard: denied by L1 rule path.outside_roots"), stderr)
	assert.Contains(t, stderr, "what would allow it: mcpguard audit --file "+auditFile)
}

// TestDenialEchoNotInC0: the echo joins a chain of layers and never makes
// one: C0 (no stage) stays the unguarded relay, not judged or
// canonicalised.
func TestDenialEchoNotInC0(t *testing.T) {
	assert.Empty(t, withDenialEcho(nil, io.Discard, ""))
	got := withDenialEcho([]guard.Stage{nopStage{}}, io.Discard, "")
	require.Len(t, got, 2)
	assert.IsType(t, &denialEcho{}, got[0])
}

type nopStage struct{}

func (nopStage) Request(context.Context, *guard.Request) *guard.Response { return nil }
func (nopStage) Response(_ context.Context, _ *guard.Request, r *guard.Response) *guard.Response {
	return r
}

func TestGateExitCodes(t *testing.T) {
	dir := t.TempDir()
	file := func(name string, vals ...float64) string {
		var b strings.Builder
		for _, v := range vals {
			fmt.Fprintf(&b, "BenchmarkGuard/C0-2 \t 100\t %g p50-ns\n", v)
		}
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(b.String()), 0o644))
		return p
	}
	base := file("base.txt", 100, 101, 99, 100, 102, 98)
	same := file("same.txt", 101, 99, 100, 100, 98, 102)
	slow := file("slow.txt", 150, 151, 149, 150, 152, 148)
	empty := file("empty.txt")

	code, stdout, _ := runIn(t, nil, "gate", base, same)
	assert.Equal(t, 0, code, stdout)
	code, stdout, stderr := runIn(t, nil, "gate", "--threshold", "10", base, slow)
	assert.Equal(t, 1, code)
	assert.Contains(t, stdout, "REGRESSION")
	assert.Contains(t, stderr, "significantly worse")
	code, _, stderr = runIn(t, nil, "gate", base, empty)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, empty, "the error names the file")

	// Another model shape is another experiment: refused, not compared.
	small := filepath.Join(dir, "small.txt")
	medium := filepath.Join(dir, "medium.txt")
	b, err := os.ReadFile(same)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(small, append([]byte("model-shape: small\ncpu: one\n"), b...), 0o644))
	require.NoError(t, os.WriteFile(medium, append([]byte("model-shape: medium\ncpu: other\n"), b...), 0o644))
	code, _, stderr = runIn(t, nil, "gate", small, medium)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `model-shape: "small" vs "medium"`)
	assert.NotContains(t, stderr, "cpu", "the machine may differ")
	code, _, _ = runIn(t, nil, "gate", "--ignore-config", "model-shape", small, medium)
	assert.Equal(t, 0, code)

	// A slowdown measured on a machine four times as loaded is inconclusive.
	loaded := func(name string, load float64, vals ...float64) string {
		var b strings.Builder
		for _, v := range vals {
			fmt.Fprintf(&b, "BenchmarkGuard/C0-2 \t 100\t %g p50-ns\t %g loadavg\n", v, load)
		}
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(b.String()), 0o644))
		return p
	}
	quietBase := loaded("qb.txt", 4, 100, 101, 99, 100, 102, 98, 100, 101)
	busySlow := loaded("bs.txt", 16, 150, 151, 149, 150, 152, 148, 150, 151)
	quietSlow := loaded("qs.txt", 5, 150, 151, 149, 150, 152, 148, 150, 151)
	code, stdout, stderr = runIn(t, nil, "gate", quietBase, busySlow)
	assert.Equal(t, 3, code, stdout)
	assert.Contains(t, stderr, "inconclusive")
	assert.Contains(t, stdout, "base 4.0, new 16.0")
	code, _, _ = runIn(t, nil, "gate", quietBase, quietSlow)
	assert.Equal(t, 1, code, "comparable load: a regression")
	code, _, _ = runIn(t, nil, "gate", "--load-ratio", "0", quietBase, busySlow)
	assert.Equal(t, 1, code, "check turned off")
}

// A server that dies at start under Landlock: stderr names the backend,
// what was denied and the policy line that would allow it.
func TestRunExplainsEarlyExit(t *testing.T) {
	if abi, err := ruleset.KernelABI(); err != nil || abi < 1 {
		t.Skipf("Landlock not available here: %v", err)
	}
	dir := t.TempDir()
	secret := filepath.Join(dir, "private", "settings.ini")
	require.NoError(t, os.MkdirAll(filepath.Dir(secret), 0o755))
	require.NoError(t, os.WriteFile(secret, []byte("x"), 0o644))
	pol := filepath.Join(dir, "policy.json")
	require.NoError(t, os.WriteFile(pol, []byte(`{"server":"sh","tools":{}}`), 0o644))
	// The client stays connected (its stdin never ends): the server exits first.
	in, w := io.Pipe()
	defer w.Close()
	code, _, stderr := runIn(t, in, "run", "--config", "C-landlock", "--policy", pol, "--",
		"/bin/sh", "-c", "read x < "+secret+"; exit 1")
	assert.Equal(t, exitServerExited, code, stderr)
	assert.Contains(t, stderr, "the server exited under L3 (landlock)")
	assert.Contains(t, stderr, secret)
	assert.Contains(t, stderr, `allow: "filesystem": {"read": ["`+filepath.Dir(secret)+`"]}`)
}

func TestSpareProcs(t *testing.T) {
	require.Equal(t, 3, spareProcs("", 2), "one P more than the runtime's default")
	require.Equal(t, 2, spareProcs("2", 2), "an explicit GOMAXPROCS is kept")
}

// TestRunServerDir: the server runs in the directory relative paths are
// judged against (the policy's workdir, or --cwd), not in the client's:
// read_file("secret.txt") reads the workspace's file, never the one where
// the client happens to be.
func TestRunServerDir(t *testing.T) {
	argv := buildServer(t, "careless")
	ws := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "secret.txt"), []byte("the workspace's file"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "sub", "secret.txt"), []byte("sub's file"), 0o644))
	policyFile, err := filepath.Abs("../../testdata/policies/careless.json")
	require.NoError(t, err)
	call := func(extra ...string) (int, string, string) {
		// TMP is a write root of the policy: its own directory, so a
		// checkout under /tmp is not inside it (the guard refuses a write
		// root holding its policy).
		args := append([]string{"call", "--config", "C-app", "--policy", policyFile, "--var", "WS=" + ws, "--var", "TMP=" + t.TempDir()}, extra...)
		args = append(args, "--tool", "read_file", "--args", `{"path":"secret.txt"}`, "--")
		return runIn(t, nil, append(args, append(argv, "--ws", ws)...)...)
	}
	code, stdout, stderr := call()
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "the workspace's file")
	code, stdout, stderr = call("--cwd", filepath.Join(ws, "sub"))
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "sub's file")
}
