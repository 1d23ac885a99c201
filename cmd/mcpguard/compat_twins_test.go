package main

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
	attacks := twinAttacks(sk)
	// A twin's workspace, HOME and policy are made once and serve all its
	// attacks: policy init ignores the --twin-* arguments (they select an
	// attack, not a tool), and the memory twin's policy names its state
	// directory.
	worlds := map[string]*twinWorld{}
	var verdicts []twinVerdict
	for _, a := range attacks {
		w := worlds[a.twin]
		if w == nil {
			w = &twinWorld{twin: twinSpecs[a.twin], ws: t.TempDir(), home: t.TempDir(), sink: sk}
			worlds[a.twin] = w
		}
		verdicts = append(verdicts, e.runTwinAttack(t, w, a, configs)...)
	}
	t.Logf("trojaned twins (an attack happened when its oracle saw it; run binary %s):\n%s", e.runBin, twinMatrix(verdicts, configs))
	judgeTwins(t, attacks, verdicts, configs)
}

const (
	twinPlanted = "mcpguard-twin-planted"
	sshCanary   = "CANARY-SSH-7f3a91"
	envCanary   = "CANARY-ENV-c02b64"
)

// twinAttack is one attack a twin makes when its command names it.
type twinAttack struct {
	twin, name, class string
	// hit reports whether the attack happened, from outside the guard.
	hit func(ws, home string) bool
	// expectNotBlocked, when set, says why this machine's L3 cannot
	// stop the attack: it is then reported, not asserted.
	expectNotBlocked string
}

// twinAttacks are the twins' attacks and their oracles: the sink saw a
// canary, or a file holds the planted marker.
func twinAttacks(sk *sink) []twinAttack {
	sent := func(canary string) func(ws, home string) bool {
		return func(ws, home string) bool { return sk.has(canary) }
	}
	plantedAt := func(rel func(ws, home string) string) func(ws, home string) bool {
		return func(ws, home string) bool {
			b, err := os.ReadFile(rel(ws, home))
			return err == nil && bytes.Contains(b, []byte(twinPlanted))
		}
	}
	attacks := []twinAttack{
		{twin: "filesystem-twin", name: "ssh-at-start", class: "exfiltration", hit: sent(sshCanary)},
		{twin: "filesystem-twin", name: "child-env", class: "exfiltration", hit: sent(envCanary)},
		{twin: "filesystem-twin", name: "hook-on-call", class: "persistence",
			hit: plantedAt(func(ws, home string) string { return filepath.Join(ws, ".git", "hooks", "pre-commit") })},
		{twin: "memory-twin", name: "env-on-call", class: "exfiltration", hit: sent(envCanary)},
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
	return attacks
}

// twinSpec is how a twin is launched beyond its entry module and attack,
// and the benign calls it shares with its real twin.
type twinSpec struct {
	args  func(ws string) []string
	env   func(ws string) map[string]string
	calls func(ws string) []compatCall
}

var twinSpecs = map[string]twinSpec{
	"filesystem-twin": {
		args:  func(ws string) []string { return []string{ws} },
		env:   func(string) map[string]string { return map[string]string{} },
		calls: filesystemCalls,
	},
	"memory-twin": {
		args:  func(string) []string { return nil },
		env:   stateFileEnv("MEMORY_FILE_PATH", "memory.jsonl"),
		calls: memoryCalls,
	},
}

// twinWorld is a twin's workspace and HOME, with the canaries and the
// files its attacks aim at; reset before every session.
type twinWorld struct {
	twin     twinSpec
	ws, home string
	sink     *sink
	policy   string // made on first use
}

func (w *twinWorld) reset(t *testing.T) {
	t.Helper()
	ws, home := w.ws, w.home
	w.sink.reset()
	require.NoError(t, os.RemoveAll(filepath.Join(ws, ".git")))
	require.NoError(t, os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755))
	hello(t, ws)
	freshState("memory.jsonl")(t, ws)
	require.NoError(t, os.WriteFile(filepath.Join(home, ".bashrc"), []byte("# the user's\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".ssh"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".ssh", "id_rsa"), []byte(sshCanary+"\n"), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(home, "project"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(home, "project", ".env"), []byte("API_KEY="+envCanary+"\n"), 0o644))
}

// twinVerdict is one attack under one config.
type twinVerdict struct {
	Twin, Attack, Class, Config string
	Attacked, BenignOK          bool
	Detail                      string
}

// runTwinAttack runs the twin with one attack under every config, the
// world reset before each session, and asks the attack's oracle.
func (e compatEnv) runTwinAttack(t *testing.T, w *twinWorld, a twinAttack, configs []string) []twinVerdict {
	t.Helper()
	w.reset(t)
	argv := append([]string{e.node, filepath.Join(e.compat, "trojans", a.twin, "index.mjs"),
		"--twin-attack=" + a.name, "--twin-sink=" + w.sink.port()}, w.twin.args(w.ws)...)
	env := w.twin.env(w.ws)
	if w.policy == "" {
		// The user's policy step runs the twin unconfined, as it would for
		// the real server; the fake HOME keeps its attack off this machine.
		w.policy = filepath.Join(t.TempDir(), "policy.json")
		out, err := e.policyInit(w.ws, w.policy, env, map[string]string{"HOME": w.home}, nil, argv)
		require.NoError(t, err, "policy init %s: %s", a.twin, tail(string(out), 500))
	}
	sessEnv := maps.Clone(env)
	sessEnv["HOME"] = w.home
	var out []twinVerdict
	for _, cfg := range configs {
		w.reset(t)
		ok, detail := compatSession(t, e.node, e.compat, e.runBin, cfg, w.policy, w.ws, argv, sessEnv, w.twin.calls(w.ws), nil)
		hit := false
		// Attacks on a tool result or in a child may land just after
		// the session: wait a little.
		for deadline := time.Now().Add(time.Second); ; time.Sleep(50 * time.Millisecond) {
			if hit = a.hit(w.ws, w.home); hit || time.Now().After(deadline) {
				break
			}
		}
		out = append(out, twinVerdict{a.twin, a.name, a.class, cfg, hit, ok, detail})
	}
	return out
}

// twinMatrix lays the verdicts out a row per attack, a column per config.
func twinMatrix(verdicts []twinVerdict, configs []string) string {
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
	return b.String()
}

// judgeTwins asserts the verdicts: benign calls work everywhere, every
// attack happens under C0 and none under a config with L3.
func judgeTwins(t *testing.T, attacks []twinAttack, verdicts []twinVerdict, configs []string) {
	t.Helper()
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
