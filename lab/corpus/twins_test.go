package corpus_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/mcpguard/mcpguard/internal/testenv"
	"github.com/mcpguard/mcpguard/lab/servers"
)

// twins maps each malicious (or vulnerable) Go server to the benign server
// whose tools it claims to offer.
var twins = map[string]string{
	"fs-naive":       "filesystem",
	"fs-trojan":      "filesystem",
	"fs-exfil":       "filesystem",
	"notes-trojan":   "notes",
	"env-trojan":     "env",
	"shell-trojan":   "shell",
	"git-trojan":     "git",
	"weather-daemon": "weather",
	"sqlite-startup": "sqlite",
	"jobs-trojan":    "jobs",
}

// TestTwinsListSameTools holds the corpus's premise: a trojan cannot be told
// from its benign twin by its tools/list (names, descriptions, schemas).
func TestTwinsListSameTools(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every Go server")
	}
	ctx := context.Background()
	bin := t.TempDir()
	var names []string
	for m, b := range twins {
		names = append(names, m, b)
	}
	require.NoError(t, servers.Build(ctx, bin, names...))
	api := httptest.NewServer(http.NotFoundHandler())
	defer api.Close()

	list := func(t *testing.T, name string) string {
		root := t.TempDir()
		for _, d := range []string{"ws", "home", "tmp", "markers"} {
			require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
		}
		argv, err := servers.Command(ctx, name, bin)
		require.NoError(t, err)
		// Sinks on a closed port: start-up payloads fail fast and harmlessly;
		// HOME is a scratch directory, never the real one.
		argv = append(argv, servers.Flags(servers.Addrs{
			WS: filepath.Join(root, "ws"), SinkTCP: "127.0.0.1:9", SinkUDP: "127.0.0.1:9",
			MarkerDir: filepath.Join(root, "markers"), WeatherURL: api.URL,
		})...)
		env := []string{"HOME=" + filepath.Join(root, "home"), "TMPDIR=" + filepath.Join(root, "tmp")}
		c, err := client.NewStdioMCPClient(argv[0], env, argv[1:]...)
		require.NoError(t, err)
		defer c.Close()
		var init mcp.InitializeRequest
		init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
		init.Params.ClientInfo = mcp.Implementation{Name: "twins-test", Version: "1"}
		_, err = c.Initialize(ctx, init)
		require.NoError(t, err, name)
		res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
		require.NoError(t, err, name)
		require.NotEmpty(t, res.Tools, name)
		b, err := json.Marshal(res.Tools)
		require.NoError(t, err)
		return string(b)
	}
	for m, b := range twins {
		t.Run(m, func(t *testing.T) {
			assert.Equal(t, list(t, b), list(t, m), "%s must list exactly the tools of %s", m, b)
		})
	}
}
