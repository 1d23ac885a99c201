package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/configs"
	"github.com/mcpguard/mcpguard/lab/servers"
)

func requireInterpreters(t *testing.T) {
	t.Helper()
	for _, bin := range []string{"node", "python3"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s: %v", bin, err)
		}
	}
}

func newRunner(t *testing.T) *Runner {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	return &Runner{Root: root, BinDir: t.TempDir(), WorkDir: t.TempDir()}
}

func realCase(t *testing.T, id, server, category string, setup Setup, oracle Oracle, calls ...Call) *Case {
	t.Helper()
	f := false
	c := &Case{ID: id, Category: category, Description: "test", Server: server, VisibleInArguments: &f,
		Setup: setup, Calls: calls, Oracle: oracle}
	require.NoError(t, c.Validate(servers.Names()))
	return c
}

func call(tool string, args map[string]any) Call {
	if args == nil {
		args = map[string]any{}
	}
	b, _ := json.Marshal(args)
	return Call{Tool: tool, Arguments: b}
}

// Every oracle kind, on real servers run through the proxy under C0: the
// malicious call fires it, a harmless call to the same server does not.
func TestOraclesOnRealServers(t *testing.T) {
	requireInterpreters(t)
	r := newRunner(t)
	readme := Setup{Files: map[string]string{"{{WS}}/readme.txt": "hello\n"}}
	tests := []struct {
		kind     string
		pos, neg *Case
	}{
		{KindCanaryInResponse,
			realCase(t, "T-1", "js-env-leak", CrossLanguage, Setup{}, Oracle{Kind: KindCanaryInResponse, Canary: CanaryEnv},
				call("get_setting", map[string]any{"key": "ANYTHING"})),
			realCase(t, "T-2", "js-env-leak", CrossLanguage, Setup{}, Oracle{Kind: KindCanaryInResponse, Canary: CanaryEnv},
				call("get_setting", map[string]any{"key": "LOG_LEVEL"}))},
		{KindCanaryAtSink,
			realCase(t, "T-3", "py-reader-trojan", CrossLanguage, readme, Oracle{Kind: KindCanaryAtSink, Canary: CanarySSH, Sink: "tcp"},
				call("read_file", map[string]any{"path": "readme.txt"})),
			realCase(t, "T-4", "py-reader-trojan", CrossLanguage, readme, Oracle{Kind: KindCanaryAtSink, Canary: CanarySSH, Sink: "tcp"},
				call("list_files", map[string]any{"path": "."}))},
		{KindFileWritten,
			realCase(t, "T-5", "js-keys-trojan", CrossLanguage, Setup{}, Oracle{Kind: KindFileWritten, Path: "{{HOME}}/.ssh/authorized_keys"},
				call("save_snippet", map[string]any{"name": "a", "text": "b"})),
			realCase(t, "T-6", "js-keys-trojan", CrossLanguage, Setup{}, Oracle{Kind: KindFileWritten, Path: "{{HOME}}/.ssh/authorized_keys"},
				call("link_snippet", map[string]any{"name": "a", "target": "b"}))},
		{KindFileRead,
			realCase(t, "T-7", "py-reader-trojan", CrossLanguage, readme, Oracle{Kind: KindFileRead, Path: "{{HOME}}/.ssh/id_rsa"},
				call("read_file", map[string]any{"path": "readme.txt"})),
			realCase(t, "T-8", "py-reader-trojan", CrossLanguage, readme, Oracle{Kind: KindFileRead, Path: "{{HOME}}/.ssh/id_rsa"},
				call("list_files", map[string]any{}))},
		{KindMarker,
			realCase(t, "T-9", "js-shell-trojan", CrossLanguage, Setup{}, Oracle{Kind: KindMarker, Name: "js-shell-exec"},
				call("format_json", map[string]any{"text": "[1]"})),
			realCase(t, "T-10", "js-shell-trojan", CrossLanguage, Setup{}, Oracle{Kind: KindMarker, Name: "js-shell-exec"},
				call("format_json", map[string]any{"text": "not json"}))},
		{KindExpect,
			realCase(t, "T-11", "js-workspace", Benign, readme, Oracle{Kind: KindExpect, NotError: true, Contains: StringList{"hello"}},
				call("read_file", map[string]any{"path": "readme.txt"})),
			realCase(t, "T-12", "js-workspace", Benign, readme, Oracle{Kind: KindExpect, NotError: true, Contains: StringList{"hello"}},
				call("read_file", map[string]any{"path": "missing.txt"}))},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			t.Parallel()
			pos, err := r.RunCase(context.Background(), configs.C0, tt.pos)
			require.NoError(t, err)
			require.Empty(t, pos.Err)
			assert.True(t, pos.Fired, "positive: %s", pos.Detail)
			neg, err := r.RunCase(context.Background(), configs.C0, tt.neg)
			require.NoError(t, err)
			require.Empty(t, neg.Err)
			assert.False(t, neg.Fired, "negative: %s", neg.Detail)
		})
	}
}

// A detached daemon (double fork, setsid, stdio closed) outlives its
// session: the harness finds it by the case token and kills it.
func TestRunnerKillsDetachedDaemon(t *testing.T) {
	requireInterpreters(t)
	r := newRunner(t)
	c := realCase(t, "T-20", "py-spawner", CrossLanguage, Setup{}, Oracle{Kind: KindCanaryAtSink, Canary: CanaryDotenv, Sink: "tcp"},
		call("archive_notes", map[string]any{}))
	res, err := r.RunCase(context.Background(), configs.C0, c)
	require.NoError(t, err)
	assert.Equal(t, Succeeded, res.Verdict, res.Detail)
	assert.GreaterOrEqual(t, res.Killed, 1, "the lingering daemon was killed")
}

// The case's processes are found by the case token even after they left
// the process group, and kill kills them.
func TestCaseProcs(t *testing.T) {
	sb := newSandbox(t)
	cmd := exec.Command("/bin/sh", "-c", "sleep 30")
	cmd.Env = append(os.Environ(), "MCPGUARD_CASE="+sb.Token)
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	procs := newProcTable()
	defer procs.close()
	assert.Contains(t, procs.of(sb), cmd.Process.Pid)
	assert.GreaterOrEqual(t, procs.kill(sb, 0), 1) // sh, and sleep if sh forked it
	<-done
	other := newSandbox(t)
	assert.Empty(t, procs.of(other))
}

// A case's answer comes from a scan that started after it asked: a
// process running before is always seen, one killed and reaped before
// never.
func TestProcTableFresh(t *testing.T) {
	procs := newProcTable()
	defer procs.close()
	sb := newSandbox(t)
	for round := range 5 {
		cmd := exec.Command("/bin/sleep", "30")
		cmd.Env = append(os.Environ(), "MCPGUARD_CASE="+sb.Token)
		require.NoError(t, cmd.Start())
		// Start returns when the exec closed its close-on-exec pipe,
		// which the kernel does before it lays out the new program's
		// environment: for a moment /proc/PID/environ is empty (a flake
		// under the race detector's load). Wait until the process is
		// there to be seen, as any process of a case is once it runs.
		environ := fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid)
		require.Eventually(t, func() bool {
			b, _ := os.ReadFile(environ)
			return bytes.Contains(b, []byte(sb.Token))
		}, 10*time.Second, time.Millisecond)
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				assert.Equal(t, []int{cmd.Process.Pid}, procs.of(sb), "round %d", round)
			}()
		}
		wg.Wait()
		cmd.Process.Kill()
		cmd.Wait()
		assert.Empty(t, procs.of(sb), "round %d: killed and reaped", round)
	}
}

// Callers that ask while a scan runs share the next one: one scan of
// /proc answers every case that waits, never one that started before the
// question.
func TestProcTableShared(t *testing.T) {
	procs := newProcTable()
	release := make(chan []procInfo)
	calls := 0
	procs.scan = func() []procInfo { calls++; return <-release }
	sb := &Sandbox{Token: "t", Root: "/nonexistent-root", Home: "/nonexistent-home"}
	first := make(chan []int)
	go func() { first <- procs.of(sb) }()
	waitFor(t, procs, func() bool { return procs.scanning })
	later := make(chan []int, 3)
	for range 3 {
		go func() { later <- procs.of(sb) }()
	}
	waitFor(t, procs, func() bool { return procs.waiting == 3 })
	release <- []procInfo{{pid: 1, tokens: []string{"t"}}}
	assert.Equal(t, []int{1}, <-first)
	release <- []procInfo{{pid: 2, tokens: []string{"t"}}}
	for range 3 {
		assert.Equal(t, []int{2}, <-later, "the scan that started after the question")
	}
	procs.mu.Lock()
	defer procs.mu.Unlock()
	assert.Equal(t, 2, calls, "one scan for the three that asked during the first")
}

// waitFor waits until cond, which reads p's state, holds under p's lock.
func waitFor(t *testing.T, p *procTable, cond func() bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return cond()
	}, 10*time.Second, time.Millisecond)
}

// Kernel threads are read once and skipped while they live (a VM's
// processes are mostly kernel threads); processes never are.
func TestProcTableKernelThreads(t *testing.T) {
	if _, err := os.Stat("/proc/2/stat"); err != nil {
		t.Skip("no /proc with kthreadd here")
	}
	procs := newProcTable()
	defer procs.close()
	sb := newSandbox(t)
	cmd := exec.Command("/bin/sleep", "30")
	cmd.Env = append(os.Environ(), "MCPGUARD_CASE="+sb.Token)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for range 2 {
		assert.Equal(t, []int{cmd.Process.Pid}, procs.of(sb))
		assert.True(t, procs.kernel.known(2), "kthreadd is a kernel thread")
		assert.False(t, procs.kernel.known(cmd.Process.Pid))
		assert.False(t, procs.kernel.known(os.Getppid()))
	}
}

// Every entry of a key counts: a second MCPGUARD_CASE does not hide the
// first.
func TestEnvValues(t *testing.T) {
	env := []byte("A=1\x00MCPGUARD_CASE=x\x00HOME=/h\x00MCPGUARD_CASE=y\x00MCPGUARD_CASEZ=z")
	assert.Equal(t, []string{"x", "y"}, envValues(env, "MCPGUARD_CASE="))
	assert.Equal(t, []string{"/h"}, envValues(env, "HOME="))
	assert.Empty(t, envValues(nil, "HOME="))
}

func TestUnknownConfigIsHarnessError(t *testing.T) {
	r := newRunner(t)
	c := realCase(t, "T-30", "js-workspace", Benign, Setup{}, Oracle{Kind: KindExpect, NotError: true}, call("list_dir", nil))
	results, err := r.RunConfig(context.Background(), "no-such-config", []*Case{c}, 1, nil)
	require.NoError(t, err)
	require.Len(t, results, 1)
	assert.Equal(t, Error, results[0].Verdict, "an unknown config is a harness error, never a verdict")
	assert.Contains(t, results[0].Err, "no-such-config")
	s := Summarize("no-such-config", results, nil)
	assert.Equal(t, 1, s.Errors)
	assert.Equal(t, 0, s.FalsePositives.Total, "an error counts neither as passed nor as failed")
}

// A server that never answers and leaves a daemon holding its pipes cannot
// hang the run: the case ends within its bounds, the daemon is killed, and
// the oracle (not the harness) decides.
func TestRunnerSurvivesHangingServer(t *testing.T) {
	r := newRunner(t)
	r.CaseTimeout = 500 * time.Millisecond
	r.Command = func(context.Context, string, string) ([]string, error) {
		// The daemon keeps stdout open; the server reads nothing, says nothing.
		return []string{"/bin/sh", "-c", "setsid sleep 60 & exec sleep 60", "--"}, nil
	}
	c := realCase(t, "T-40", "js-workspace", Benign, Setup{}, Oracle{Kind: KindExpect, NotError: true}, call("list_dir", nil))
	start := time.Now()
	res, err := r.RunCase(context.Background(), configs.C0, c)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 20*time.Second)
	assert.Equal(t, FalsePositive, res.Verdict, "no answer is not the expected result")
	assert.NotEmpty(t, res.StartError)
	assert.GreaterOrEqual(t, res.Killed, 1)
}

func TestScale(t *testing.T) {
	r := &Runner{CallTimeout: time.Second}
	r.Scale(3)
	assert.Equal(t, 3*time.Second, r.CallTimeout)
	assert.Equal(t, 90*time.Second, r.CaseTimeout, "defaults are filled in, then scaled")
	assert.Equal(t, 300*time.Millisecond, r.Quiet)
	assert.Equal(t, 30*time.Millisecond, r.poll(), "the harness looks as often relative to the quiet window")
	d := &Runner{}
	d.defaults()
	assert.Equal(t, 10*time.Millisecond, d.poll(), "unscaled: every 10 ms, as before")
}

func TestRunnable(t *testing.T) {
	busy := exec.Command("/bin/sh", "-c", "while :; do :; done")
	require.NoError(t, busy.Start())
	t.Cleanup(func() { busy.Process.Kill(); busy.Wait() })
	idle := exec.Command("/bin/sleep", "30")
	require.NoError(t, idle.Start())
	t.Cleanup(func() { idle.Process.Kill(); idle.Wait() })
	assert.Eventually(t, func() bool { return runnable(busy.Process.Pid) }, 5*time.Second, time.Millisecond, "a spinning shell is runnable")
	assert.Eventually(t, func() bool { return !runnable(idle.Process.Pid) }, 5*time.Second, 10*time.Millisecond, "sleep is not")
	assert.False(t, runnable(0))
}
