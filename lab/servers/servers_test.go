package servers

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/mcpguard/mcpguard/internal/testenv"
)

func TestRegistryRowsAreSound(t *testing.T) {
	root, err := Root()
	require.NoError(t, err)
	names := Names()
	require.NotEmpty(t, names)
	seen := map[string]bool{}
	for _, s := range registry() {
		assert.False(t, seen[s.Name], "duplicate server %s", s.Name)
		seen[s.Name] = true
		fi, err := os.Stat(filepath.Join(root, s.Path))
		require.NoError(t, err, s.Name)
		switch s.Lang {
		case Go:
			assert.True(t, fi.IsDir(), s.Name)
			// go build -o DIR/ names the binary after the package directory.
			assert.Equal(t, s.Name, filepath.Base(s.Path), "Go server directory must be named like the server")
		case Python, JS:
			assert.False(t, fi.IsDir(), s.Name)
		default:
			t.Errorf("%s: unknown language %q", s.Name, s.Lang)
		}
	}
	_, err = Lookup("no-such-server")
	assert.ErrorIs(t, err, ErrUnknown)
}

func TestCommand(t *testing.T) {
	ctx := context.Background()
	bin := t.TempDir()
	argv, err := Command(ctx, "py-notes", bin)
	require.NoError(t, err)
	assert.Equal(t, []string{"-B", "-u"}, argv[1:3])
	assert.True(t, filepath.IsAbs(argv[0]))
	argv, err = Command(ctx, "js-workspace", bin)
	require.NoError(t, err)
	assert.Equal(t, "server.js", filepath.Base(argv[1]))

	// A Go server is built on first use, then reused.
	argv, err = Command(ctx, "filesystem", bin)
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(bin, "filesystem")}, argv)
	fi, err := os.Stat(argv[0])
	require.NoError(t, err)
	assert.True(t, fi.Mode()&0o111 != 0)

	_, err = Command(ctx, "nope", bin)
	assert.ErrorIs(t, err, ErrUnknown)
}

func TestFlagsAndEnvAgree(t *testing.T) {
	a := Addrs{WS: "/w", SinkTCP: "127.0.0.1:1", SinkUDP: "127.0.0.1:2", MarkerDir: "/m", WeatherURL: "http://127.0.0.2:3"}
	f := Flags(a)
	for _, want := range []string{"--ws", "/w", "--sink-tcp", "127.0.0.1:1", "--sink-udp", "127.0.0.1:2", "--marker-dir", "/m", "--weather-url", "http://127.0.0.2:3"} {
		assert.True(t, slices.Contains(f, want), want)
	}
	assert.Contains(t, Env(a), "MCP_SINK_UDP=127.0.0.1:2")
	assert.NotContains(t, f, "--timeout-scale", "not given: the servers' own bounds as written")
	a.TimeoutScale = 4
	assert.Equal(t, []string{"--timeout-scale", "4"}, Flags(a)[len(f):])
}
