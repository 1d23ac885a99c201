package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// BridgeHeadersEnv carries a remote server's HTTP headers (JSON object) to
// the bridge process, out of its argv, which any local user can read.
const BridgeHeadersEnv = "MCPGUARD_BRIDGE_HEADERS"

// ErrSessionGone is returned by Bridge when the remote server forgot the
// session (404) or refused the client.
var ErrSessionGone = errors.New("remote session ended")

func bridgeEnv(headers map[string]string) func(*exec.Cmd) error {
	return func(cmd *exec.Cmd) error {
		if len(headers) == 0 {
			return nil
		}
		b, err := json.Marshal(headers)
		if err != nil {
			return fmt.Errorf("bridge headers: %w", err)
		}
		if cmd.Env == nil {
			cmd.Env = os.Environ()
		}
		cmd.Env = append(cmd.Env, BridgeHeadersEnv+"="+string(b))
		return nil
	}
}

// HeadersFromEnv reads the headers bridgeEnv passed.
func HeadersFromEnv() (map[string]string, error) {
	v := os.Getenv(BridgeHeadersEnv)
	if v == "" {
		return nil, nil
	}
	var h map[string]string
	if err := json.Unmarshal([]byte(v), &h); err != nil {
		return nil, fmt.Errorf("%s: %w", BridgeHeadersEnv, err)
	}
	return h, nil
}

// bridge is a Streamable HTTP client that speaks stdio on its other side,
// so that a guard.Proxy can run it as the server of a remote upstream and
// its layers see the remote server's messages like any other's.
type bridge struct {
	url     string
	headers map[string]string
	client  *http.Client
	out     *jsonrpc.Writer

	mu       sync.Mutex
	session  string
	protocol string

	wg sync.WaitGroup
}

// Bridge relays newline-delimited JSON-RPC between in/out and the Streamable
// HTTP server at url until in ends (the session is then DELETEd) or the
// server ends the session.
func Bridge(ctx context.Context, url string, headers map[string]string, in io.Reader, out io.Writer) error {
	b := &bridge{url: url, headers: headers, client: &http.Client{}, out: jsonrpc.NewWriter(out)}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := jsonrpc.NewReader(in)
	var gone error
	var goneOnce sync.Once
	fail := func(err error) {
		goneOnce.Do(func() { gone = err; cancel() })
	}
	getStarted := false
	for ctx.Err() == nil {
		line, err := r.Next()
		if err != nil {
			break
		}
		line = append([]byte(nil), line...)
		h, err := jsonrpc.Peek(line)
		if err != nil {
			continue
		}
		if h.Kind == jsonrpc.KindRequest && h.Method == "initialize" {
			// Synchronous: everything after it needs the session id.
			b.post(ctx, line, h, fail)
			continue
		}
		if h.Kind == jsonrpc.KindNotification && h.Method == "notifications/initialized" && !getStarted {
			getStarted = true
			b.wg.Go(func() { b.listen(ctx) })
		}
		if h.Kind != jsonrpc.KindRequest {
			b.post(ctx, line, h, fail)
			continue
		}
		// Requests run side by side: a tool call may wait on the client's
		// answer to a sampling request, which comes in a later POST.
		b.wg.Go(func() { b.post(ctx, line, h, fail) })
	}
	cancel()
	b.wg.Wait()
	b.end()
	return gone
}

func (b *bridge) newRequest(ctx context.Context, method string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, b.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range b.headers {
		req.Header.Set(k, v)
	}
	b.mu.Lock()
	if b.session != "" {
		req.Header.Set(HeaderSession, b.session)
	}
	if b.protocol != "" {
		req.Header.Set(HeaderProtocol, b.protocol)
	}
	b.mu.Unlock()
	return req, nil
}

// post sends one message and relays what comes back.
func (b *bridge) post(ctx context.Context, line []byte, h jsonrpc.Header, fail func(error)) {
	req, err := b.newRequest(ctx, http.MethodPost, line)
	if err != nil {
		b.replyError(h, err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := b.client.Do(req)
	if err != nil {
		b.replyError(h, err)
		return
	}
	defer resp.Body.Close()
	if sid := resp.Header.Get(HeaderSession); sid != "" && h.Method == "initialize" {
		b.mu.Lock()
		b.session = sid
		b.mu.Unlock()
	}
	switch {
	case resp.StatusCode == http.StatusAccepted:
		return
	case resp.StatusCode == http.StatusNotFound && b.sessionID() != "":
		b.replyError(h, ErrSessionGone)
		fail(fmt.Errorf("%w: 404", ErrSessionGone))
		return
	case resp.StatusCode/100 != 2:
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		// A JSON-RPC error in the body is the server's answer; anything
		// else becomes one.
		if m, err := jsonrpc.Parse(bytes.TrimSpace(msg)); err == nil && m.Kind() == jsonrpc.KindResponse {
			b.relay(bytes.TrimSpace(msg), h)
			return
		}
		b.replyError(h, fmt.Errorf("remote server: %s: %s", resp.Status, strings.TrimSpace(string(msg))))
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			fail(fmt.Errorf("%w: %s", ErrSessionGone, resp.Status))
		}
		return
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "text/event-stream" {
		readSSE(resp.Body, func(data []byte) { b.relay(data, h) })
		return
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.replyError(h, err)
		return
	}
	if body = bytes.TrimSpace(body); len(body) > 0 {
		b.relay(body, h)
	}
}

// relay writes one message from the server to stdout, as one line.
func (b *bridge) relay(msg []byte, h jsonrpc.Header) {
	if bytes.ContainsAny(msg, "\r\n") {
		var c bytes.Buffer
		if json.Compact(&c, msg) != nil {
			return
		}
		msg = c.Bytes()
	}
	if h.Method == "initialize" {
		var m struct {
			Result struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"result"`
		}
		if json.Unmarshal(msg, &m) == nil && m.Result.ProtocolVersion != "" {
			b.mu.Lock()
			b.protocol = m.Result.ProtocolVersion
			b.mu.Unlock()
		}
	}
	b.out.Write(msg)
}

// replyError answers request h with err, so it is not left waiting.
func (b *bridge) replyError(h jsonrpc.Header, err error) {
	if h.Kind != jsonrpc.KindRequest {
		return
	}
	b.out.WriteMessage(jsonrpc.NewError(h.ID, jsonrpc.CodeInternalError, "mcpguard bridge: "+err.Error(), nil))
}

// listen holds the GET stream for the server's own messages, if it offers one.
func (b *bridge) listen(ctx context.Context) {
	req, err := b.newRequest(ctx, http.MethodGet, nil)
	if err != nil {
		return
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := b.client.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return // 405: the server has no such stream
	}
	readSSE(resp.Body, func(data []byte) { b.relay(data, jsonrpc.Header{}) })
}

func (b *bridge) sessionID() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.session
}

// end deletes the remote session.
func (b *bridge) end() {
	if b.sessionID() == "" {
		return
	}
	req, err := b.newRequest(context.Background(), http.MethodDelete, nil)
	if err != nil {
		return
	}
	if resp, err := b.client.Do(req); err == nil {
		resp.Body.Close()
	}
}

// readSSE calls fn with the data of each event of an SSE stream.
func readSSE(r io.Reader, fn func(data []byte)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 64<<20)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if len(data) > 0 {
				fn(data)
			}
			data = nil
		case bytes.HasPrefix(line, []byte("data:")):
			d := bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, d...)
		}
	}
	if len(data) > 0 {
		fn(data)
	}
}
