package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/gateway"
)

// rawConfig serves the line-by-line test server as "raw".
func rawConfig(t testing.TB) *gateway.Config {
	return &gateway.Config{Servers: map[string]*gateway.ServerConfig{"raw": testServerConfig(t, "raw")}}
}

// 100 client sessions at once on loopback, each with its own server
// process, each making concurrent calls: every call is answered exactly
// once, by its own session's server, with its own id, within the bound.
func TestLoad100Sessions(t *testing.T) {
	const sessions, calls = 100, 10
	cfg := rawConfig(t)
	cfg.Limits.MaxSessions = sessions
	g, srv := startGateway(t, cfg)
	url := srv.URL + "/servers/raw/mcp"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: sessions * calls}}

	var answered, wrong atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, sessions*calls)
	for i := range sessions {
		wg.Go(func() {
			sid, err := initSession(ctx, client, url)
			if err != nil {
				errs <- fmt.Errorf("session %d: %w", i, err)
				return
			}
			var cwg sync.WaitGroup
			for j := range calls {
				cwg.Go(func() {
					tag := fmt.Sprintf("s%d-c%d", i, j)
					id := fmt.Sprintf(`"%s"`, tag)
					msgs, err := postCtx(ctx, client, url, sid, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`+tag+`"}}}`)
					if err != nil {
						errs <- fmt.Errorf("%s: %w", tag, err)
						return
					}
					var responses int
					for _, m := range msgs {
						var r struct {
							ID     json.RawMessage `json:"id"`
							Result *struct {
								Content []struct{ Text string } `json:"content"`
							} `json:"result"`
						}
						if json.Unmarshal([]byte(m), &r) != nil || r.Result == nil {
							continue
						}
						responses++
						if string(r.ID) != id || len(r.Result.Content) != 1 || r.Result.Content[0].Text != "done "+tag {
							wrong.Add(1)
						}
					}
					if responses != 1 {
						errs <- fmt.Errorf("%s: %d responses on its stream", tag, responses)
					}
					answered.Add(int64(responses))
				})
			}
			cwg.Wait()
			req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, url, nil)
			req.Header.Set(gateway.HeaderSession, sid)
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.EqualValues(t, sessions*calls, answered.Load(), "every call answered once")
	assert.Zero(t, wrong.Load(), "no answer went to another call or session")
	assert.EqualValues(t, sessions, g.Started(), "one server process per session")
	require.Eventually(t, func() bool { return g.Sessions() == 0 }, 30*time.Second, 50*time.Millisecond)
}

func initSession(ctx context.Context, c *http.Client, url string) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(initBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	sid := resp.Header.Get(gateway.HeaderSession)
	if resp.StatusCode != http.StatusOK || sid == "" {
		return "", fmt.Errorf("initialize: %s", resp.Status)
	}
	if _, err := postCtx(ctx, c, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		return "", err
	}
	return sid, nil
}

// postCtx posts one message and returns the messages of the answer.
func postCtx(ctx context.Context, c *http.Client, url, sid, body string) ([]string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(gateway.HeaderSession, sid)
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusAccepted:
		return nil, nil
	case http.StatusOK:
	default:
		return nil, fmt.Errorf("POST: %s", resp.Status)
	}
	return parseSSE(resp.Body), nil
}

// FuzzHTTPRequest sends arbitrary methods, headers and bodies to both
// endpoints of a gateway with a live session: the gateway answers every one
// with an HTTP status and keeps serving.
func FuzzHTTPRequest(f *testing.F) {
	cfg := rawConfig(f)
	cfg.Tokens = []gateway.Token{{Name: "t", SHA256: gateway.HashToken("secret"), Servers: []string{"*"}}}
	cfg.Limits.MaxSessions = 3
	cfg.Limits.MaxMessage = 1 << 16
	g, srv := startGateway(f, cfg)
	auth := map[string]string{"Authorization": "Bearer secret"}
	sid := rawSession(f, srv.URL+"/servers/raw/mcp", auth)
	h := g.Handler()

	f.Add(uint8(0), "/servers/raw/mcp", "secret", sid, "", "2025-11-25", "application/json", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`)
	f.Add(uint8(0), "/mcp", "secret", "", "http://localhost", "", "application/json", initBody)
	f.Add(uint8(0), "/servers/raw/mcp", "secret", sid, "", "", "application/json", `{"jsonrpc":"2.0","id":"a","result":{}}`)
	f.Add(uint8(1), "/servers/raw/mcp", "secret", sid, "", "", "", "")
	f.Add(uint8(2), "/servers/raw/mcp", "bad", sid, "http://evil", "x", "text/plain", `[1,2]`)
	f.Add(uint8(0), "/servers/raw/mcp", "secret", sid, "", "", "application/json", `{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`)
	f.Add(uint8(0), "/servers/%2e%2e/mcp", "secret", sid, "", "", "application/json; charset=utf-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\n\"method\":\"ping\"}")
	methods := []string{http.MethodPost, http.MethodGet, http.MethodDelete, http.MethodPut, http.MethodOptions}
	f.Fuzz(func(t *testing.T, method uint8, path, token, session, origin, version, ctype, body string) {
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req := httptest.NewRequest(methods[int(method)%len(methods)], "http://127.0.0.1"+sanitizePath(path), strings.NewReader(body))
		setHeader(req, "Authorization", "Bearer "+token)
		setHeader(req, gateway.HeaderSession, session)
		setHeader(req, "Origin", origin)
		setHeader(req, gateway.HeaderProtocol, version)
		setHeader(req, "Content-Type", ctype)
		req.Header.Set("Accept", "application/json")
		ctx, cancel := context.WithTimeout(req.Context(), 2*time.Second)
		defer cancel()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req.WithContext(ctx))
		if w.Code < 200 || w.Code > 599 {
			t.Fatalf("status %d", w.Code)
		}
	})
}

// setHeader sets a header the way a client could send it: net/http's
// client refuses values with control characters, so those are dropped.
func setHeader(r *http.Request, k, v string) {
	if v == "" || strings.ContainsAny(v, "\r\n\x00") {
		return
	}
	r.Header.Set(k, v)
}

func sanitizePath(p string) string {
	var b strings.Builder
	for _, r := range p {
		if r > ' ' && r < 0x7f && r != '?' && r != '#' && r != '%' {
			b.WriteRune(r)
		}
	}
	return b.String()
}
