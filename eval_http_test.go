package mcpguard_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/gateway"
	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/configs"
	"github.com/mcpguard/mcpguard/lab/eval"
	"github.com/mcpguard/mcpguard/lab/servers"
)

// httpSession is an eval session whose client reaches the guarded server
// over Streamable HTTP, through a gateway of its own.
type httpSession struct {
	*client.Client
	g    *gateway.Gateway
	srv  *http.Server
	init *mcp.InitializeResult
}

// Instructions implements eval.Instructed: oracles read initialize's
// instructions as they come through the gateway.
func (s *httpSession) Instructions() string {
	if s.init == nil {
		return ""
	}
	return s.init.Instructions
}

func (s *httpSession) Close() error {
	s.Client.Close() // DELETE: the gateway ends the session and stops the server
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := s.g.Close(ctx)
	s.srv.Close()
	return err
}

// httpConnect is eval.ProxyConnect with HTTP between the client and the
// proxy: the same proxy and layers, behind the gateway's per-server
// endpoint on a loopback port.
func httpConnect(ctx context.Context, l eval.Launch) (eval.Session, error) {
	p := eval.NewProxy(l)
	var once sync.Once
	cfg := &gateway.Config{Servers: map[string]*gateway.ServerConfig{"case": {Config: l.Config, Command: l.Argv}}}
	g, err := gateway.New(cfg, gateway.Options{Stderr: l.Stderr, Grace: l.Grace, Loopback: true,
		NewProxy: func(string, string) (*guard.Proxy, error) {
			var out *guard.Proxy
			once.Do(func() { out = p })
			if out == nil {
				return nil, errors.New("one session per case")
			}
			return out, nil
		}})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		g.Close(ctx)
		return nil, err
	}
	srv := &http.Server{Handler: g.Handler()}
	go srv.Serve(ln)
	s := &httpSession{g: g, srv: srv}
	fail := func(err error) (eval.Session, error) {
		s.Close()
		return nil, err
	}
	tr, err := transport.NewStreamableHTTP("http://" + ln.Addr().String() + "/servers/case/mcp")
	if err != nil {
		return fail(err)
	}
	s.Client = client.NewClient(tr, client.WithProtocolVersion(guard.ProtocolVersion))
	if err := s.Client.Start(context.WithoutCancel(ctx)); err != nil {
		return fail(err)
	}
	init, err := s.Client.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: guard.ProtocolVersion,
		ClientInfo:      mcp.Implementation{Name: "mcpguard-eval-http", Version: "dev"},
	}})
	if err != nil {
		return fail(fmt.Errorf("initialize: %w", err))
	}
	s.init = init
	return s, nil
}

// TestCorpusOverHTTP runs the corpus with the client on Streamable HTTP
// through the gateway, under the configs that run on this host without the
// VM, and holds the verdicts to the same golden files as TestEvalCases (over
// stdio): the transport changes no verdict. -short runs the smoke subset.
// (Not named TestEvalCases*: scripts/test.sh selects those by pattern for the VM.)
func TestCorpusOverHTTP(t *testing.T) {
	ctx := context.Background()
	cases, err := eval.LoadCases("testdata/cases", servers.Names())
	require.NoError(t, err)
	if testing.Short() {
		cases = eval.Smoke(cases)
	}
	root, err := filepath.Abs(".")
	require.NoError(t, err)
	binDir := os.Getenv("MCPGUARD_SERVER_BIN") // as in TestEvalCases
	if binDir == "" {
		binDir = t.TempDir()
		require.NoError(t, servers.Build(ctx, binDir, serverNames(cases)...))
	}
	r := &eval.Runner{Root: root, BinDir: binDir, WorkDir: t.TempDir(), Connect: httpConnect}
	for _, cfg := range []string{configs.C0, configs.CAB, configs.CApp, configs.CFullLandlock} {
		t.Run(cfg, func(t *testing.T) {
			results, err := r.RunConfig(ctx, cfg, cases, eval.DefaultParallel(), nil)
			if errors.Is(err, configs.ErrUnavailable) {
				t.Skipf("config %s unavailable here: %v", cfg, err)
			}
			require.NoError(t, err)
			golden := readGolden(t, filepath.Join("testdata/golden/eval", cfg+".golden"))
			compared, blocked := 0, 0
			for i, c := range cases {
				res := results[i]
				if res.NoPolicy {
					continue
				}
				want, ok := golden[c.ID]
				if !ok {
					continue // TestEvalCases reports a missing verdict
				}
				assert.Equal(t, want, res.Verdict, "%s over HTTP: %s (denied %v, call errors %v, start error %q)",
					c.ID, res.Detail, res.Denied, res.CallErrors, res.StartError)
				compared++
				if res.Verdict == eval.Blocked {
					blocked++
				}
			}
			require.Positive(t, compared, "no case had a golden verdict")
			t.Logf("%s over HTTP: %d cases against the stdio golden verdicts, %d blocked", cfg, compared, blocked)
		})
	}
}
