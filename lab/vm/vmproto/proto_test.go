package vmproto

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/mcpguard/mcpguard/internal/testenv"
)

func TestRequestRoundTrip(t *testing.T) {
	in := Request{
		Argv:     []string{"go", "test", "-run", "X Y", "./..."},
		Env:      []string{"PATH=/usr/bin:/bin", "HOME=/root", "WEIRD=a\nb=c\x01"},
		Dir:      "/work/main",
		Tmpfs:    []string{"/var/cache/t"},
		Overlays: []string{"/root"},
		Stdin:    true,
	}
	var buf bytes.Buffer
	require.NoError(t, WriteJSON(&buf, in))
	require.Equal(t, 1, strings.Count(buf.String(), "\n"), "one line, whatever the env holds")
	got, err := ReadRequest(NewScanner(&buf))
	require.NoError(t, err)
	assert.Equal(t, in, *got)
}

func TestRequestRejected(t *testing.T) {
	for name, line := range map[string]string{
		"empty":        "",
		"not json":     "{",
		"no argv":      `{"argv":[],"dir":"/"}`,
		"relative dir": `{"argv":["true"],"dir":"work"}`,
		"relative fs":  `{"argv":["true"],"dir":"/","tmpfs":["tmp"]}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ReadRequest(NewScanner(strings.NewReader(line)))
			require.Error(t, err)
		})
	}
}

func TestParseMessage(t *testing.T) {
	m, err := ParseMessage([]byte(`{"kind":"exit","status":7,"stdout":3,"stderr":4}`))
	require.NoError(t, err)
	assert.Equal(t, Message{Kind: KindExit, Status: 7, Stdout: 3, Stderr: 4}, *m)
	for _, bad := range []string{`{"kind":"exit","status":256}`, `{"kind":"exit","stdout":-1}`, `{"kind":"x"}`, `nope`} {
		_, err := ParseMessage([]byte(bad))
		assert.Error(t, err, bad)
	}
}

// TestExitStatus decodes real wait statuses the way a shell reports them.
func TestExitStatus(t *testing.T) {
	for script, want := range map[string]int{
		"exit 0":      0,
		"exit 7":      7,
		"exit 255":    255,
		"kill -9 $$":  128 + 9,
		"kill -15 $$": 128 + 15,
	} {
		cmd := exec.Command("sh", "-c", script)
		_ = cmd.Run()
		require.NotNil(t, cmd.ProcessState, script)
		assert.Equal(t, want, ProcessStatus(cmd.ProcessState), script)
	}
}
