package landlock_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/landlock"
	"github.com/mcpguard/mcpguard/guard/policy"
	"github.com/mcpguard/mcpguard/internal/testenv"
)

const samplePolicy = `{
  "server": "sample",
  "tools": {
    "read_file": {"args": {"path": {"kind": "path", "access": "read"}}},
    "fetch": {"hosts": [{"host": "api.example.com", "ports": [443]}], "read": ["${HOME}/.config/sample"]}
  },
  "filesystem": {"read": ["${WS}/../docs", "/srv/data"], "write": ["${WS}", "${TMP}/gone"]},
  "network": {"allow": [{"host": "127.0.0.2", "ports": [8080, 8080, 9090]}]},
  "exec": {"allow": ["/usr/bin/git"]}
}`

// TestCompileGolden pins what a policy compiles to: the runtime set, the
// roots by access, tool-scoped grants, ports without hosts, notes.
func TestCompileGolden(t *testing.T) {
	p, err := policy.Parse([]byte(samplePolicy), map[string]string{"WS": "/ws", "HOME": "/home/u", "TMP": "/tmp/case"})
	require.NoError(t, err)
	missing := map[string]bool{"/tmp/case/gone": true}
	r, err := landlock.Compile(p, func(path string) bool { return !missing[path] })
	require.NoError(t, err)
	assert.Equal(t, []uint16{443, 8080, 9090}, r.ConnectTCP)
	assert.False(t, r.AnyConnect)
	assert.Empty(t, r.BindTCP, "no listen rules: every TCP bind is denied")

	golden := filepath.Join("testdata", "compile.golden")
	got := r.Describe()
	if testenv.Update() {
		require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "run with -update to create it")
	assert.Equal(t, string(want), got)
}

func TestCompileRejects(t *testing.T) {
	for name, p := range map[string]policy.Policy{
		"relative root": {Filesystem: policy.Filesystem{Read: []string{"ws"}}},
		"port 0":        {Network: policy.Network{Allow: []policy.NetRule{{Host: "h", Ports: []int{0}}}}},
		"port too big":  {Network: policy.Network{Allow: []policy.NetRule{{Host: "h", Ports: []int{65536}}}}},
	} {
		_, err := landlock.Compile(&p, nil)
		assert.ErrorIs(t, err, landlock.ErrBadRules, name)
	}
}

func TestDecodeRoundTrip(t *testing.T) {
	r := &landlock.Rules{
		Paths:      []landlock.PathRule{{Path: "/ws", Access: landlock.Write}, {Path: "/usr", Access: landlock.Read, Optional: true}},
		ConnectTCP: []uint16{80},
	}
	enc, err := r.Encode()
	require.NoError(t, err)
	back, err := landlock.Decode(enc)
	require.NoError(t, err)
	assert.Equal(t, r, back)

	for _, bad := range []string{
		``, `{`, `[]`, `{"paths":[{"path":"rel","access":"read"}]}`,
		`{"paths":[{"path":"/x","access":"admin"}]}`, `{"paths":[],"extra":1}`,
		`{"paths":[]} {}`, `{"connect_tcp":[70000]}`,
	} {
		_, err := landlock.Decode(bad)
		assert.ErrorIs(t, err, landlock.ErrBadRules, "%q", bad)
	}
}

// FuzzDecode: the wrapper's argument parser never panics, and what it
// accepts survives a round trip (compared encoded: an empty and a nil list
// mean the same).
func FuzzDecode(f *testing.F) {
	f.Add(`{"paths":[{"path":"/ws","access":"write"}],"connect_tcp":[443]}`)
	f.Add(`{"paths":[{"path":"/usr","access":"read","optional":true}],"any_connect":true}`)
	f.Add(`{"paths":null}`)
	f.Fuzz(func(t *testing.T, s string) {
		r, err := landlock.Decode(s)
		if err != nil {
			return
		}
		enc, err := r.Encode()
		require.NoError(t, err)
		back, err := landlock.Decode(enc)
		require.NoError(t, err)
		again, err := back.Encode()
		require.NoError(t, err)
		assert.Equal(t, enc, again)
	})
}
