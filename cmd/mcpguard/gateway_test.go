package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/gateway"
)

func TestGatewayRefusesRemoteListen(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "gateway.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"servers":{"a":{"config":"C0","command":["true"]}}}`), 0o644))
	code, _, stderr := runIn(t, nil, "gateway", "--config", cfg, "--listen", "0.0.0.0:0")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "--allow-remote")
	code, _, stderr = runIn(t, nil, "gateway", "--config", cfg, "--listen", "0.0.0.0:0", "--allow-remote")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "no tokens")
	code, _, stderr = runIn(t, nil, "gateway")
	assert.Equal(t, 2, code, stderr)
	require.NoError(t, os.WriteFile(cfg, []byte(`{"servers":{"a":{"config":"C0"}}}`), 0o644))
	code, _, stderr = runIn(t, nil, "gateway", "--config", cfg)
	assert.Equal(t, 2, code, stderr)
	assert.Contains(t, stderr, "needs a command or a url")
}

func TestGatewayHashToken(t *testing.T) {
	code, stdout, _ := runIn(t, strings.NewReader("s3cret\n"), "gateway", "hash-token")
	require.Equal(t, 0, code)
	assert.Equal(t, gateway.HashToken("s3cret")+"\n", stdout)
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// `mcpguard run --listen` serves the one server of its command line at
// /mcp, through the layers of --config, until its context ends, and writes
// the CPU profile --cpuprofile asks for when it stops.
func TestRunListen(t *testing.T) {
	argv := buildServer(t, "filesystem")
	ws := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hello over http"), 0o644))
	addr := freePort(t)
	prof := filepath.Join(t.TempDir(), "cpu.out")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &lockedBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, stdio{strings.NewReader(""), &bytes.Buffer{}, stderr},
			append([]string{"run", "--listen", addr, "--grace", "200ms", "--cpuprofile", prof, "--"}, append(argv, "--ws", ws)...))
	}()
	url := "http://" + addr + "/mcp"
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 20*time.Second, 20*time.Millisecond)

	tr, err := transport.NewStreamableHTTP(url)
	require.NoError(t, err)
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
	defer ccancel()
	require.NoError(t, c.Start(cctx))
	_, err = c.Initialize(cctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: mcp.ProtocolVersion20251125}})
	require.NoError(t, err)
	req := mcp.CallToolRequest{}
	req.Params.Name = "read_file"
	req.Params.Arguments = map[string]any{"path": filepath.Join(ws, "a.txt")}
	res, err := c.CallTool(cctx, req)
	require.NoError(t, err)
	require.NotEmpty(t, res.Content)
	assert.Contains(t, fmt.Sprint(res.Content[0]), "hello over http")

	cancel() // SIGTERM: end the sessions, stop the server, return
	select {
	case code := <-done:
		assert.Equal(t, 0, code, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("run --listen did not stop")
	}
	// A CPU profile is a gzipped protocol buffer with the sample types.
	f, err := os.Open(prof)
	require.NoError(t, err, "--cpuprofile under --listen")
	defer f.Close()
	z, err := gzip.NewReader(f)
	require.NoError(t, err)
	b, err := io.ReadAll(z)
	require.NoError(t, err)
	assert.Contains(t, string(b), "nanoseconds", "a CPU profile")
}
