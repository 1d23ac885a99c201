package eval

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// The wire client is the harness's own MCP client, for the cases the
// mcp-go client cannot make: a line written byte for byte (framing), a
// call without an id, a method outside the table, and answers to the
// server's requests chosen by the case (what a user types into an
// elicitation form, what the client's model answers a sampling request,
// which roots the client offers). It speaks JSON-RPC over the proxy's
// pipes, reads the initialize answer as a client on encoding/json does
// (keys without regard to case), answers the server's requests from the
// case's Client, and records every line the proxy sends it: each call's
// response text is the lines that arrived while it was made, so a
// notification the server sent on the way (a progress message) is
// evidence too.

// ClientAnswers is how the wire client answers the server's requests.
// Values are templates; canary templates are allowed here (a user may hand
// a secret to a server that asks for it: that is the attack).
type ClientAnswers struct {
	// Sampling answers sampling/createMessage with this text.
	Sampling *SamplingAnswer `json:"sampling,omitempty"`
	// Elicitation answers elicitation/create.
	Elicitation *ElicitationAnswer `json:"elicitation,omitempty"`
	// Roots answers roots/list with these file: URIs.
	Roots []string `json:"roots,omitempty"`
	// FetchIcons: the client shows icons, so it fetches the http(s) src of
	// every icon in what it gets, unasked, as such clients do.
	FetchIcons bool `json:"fetch_icons,omitempty"`
}

// SamplingAnswer is the client model's answer.
type SamplingAnswer struct {
	Text string `json:"text"`
	// Context is what the client's conversation holds (other servers' tool
	// results, what the user said). A client that honours a request's
	// includeContext ("thisServer" or "allServers") puts it before its
	// model, whose answer then repeats it: the answer is Text, a space and
	// Context. With includeContext "none" or absent, the answer is Text.
	Context string `json:"context,omitempty"`
}

// ElicitationAnswer is what the user does with a form. Accepting a
// URL-mode elicitation opens its url (the client fetches it).
type ElicitationAnswer struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content,omitempty"`
}

// UsesWire reports whether the case runs on the wire client: it asks
// for it (wire_client), says how the client answers, or writes a raw line
// or a notification.
func (c *Case) UsesWire() bool {
	if c.WireClient || c.Client != nil {
		return true
	}
	return slices.ContainsFunc(c.Calls, func(call Call) bool { return call.Raw != "" || call.Notify })
}

// wireSession is one session of the wire client with a proxy in process.
type wireSession struct {
	mu      sync.Mutex // writes to the proxy
	w       io.WriteCloser
	lines   chan []byte // what the proxy sent, but the server's requests (answered)
	served  chan error
	answers map[string]any // the case's Client, expanded
	init    string
	seq     int
}

// wireConnect starts l's proxy in process and performs the handshake.
func wireConnect(ctx context.Context, l Launch, answers map[string]any) (*wireSession, error) {
	cr, cw := io.Pipe() // client -> proxy
	pr, pw := io.Pipe() // proxy -> client
	s := &wireSession{w: cw, lines: make(chan []byte, 256), served: make(chan error, 1), answers: answers}
	go func() {
		err := NewProxy(l).Serve(context.WithoutCancel(ctx), cr, pw)
		pw.Close()
		cr.Close()
		s.served <- err
	}()
	go s.read(pr)
	id := s.next()
	init := fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"initialize","params":{"protocolVersion":"2025-11-25",`+
		`"capabilities":{"sampling":{},"elicitation":{},"roots":{"listChanged":true}},"clientInfo":{"name":"mcpguard-eval","version":"1"}}}`, id)
	resp, _, err := s.roundTrip(ctx, []byte(init), quoted(id))
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	var m struct {
		Result struct{ Instructions string } // any case, as encoding/json reads it
		Error  *struct{ Message string }
	}
	if json.Unmarshal(resp, &m) != nil || m.Error != nil {
		s.Close()
		return nil, fmt.Errorf("initialize: %s", truncate(string(resp), 300))
	}
	s.init = m.Result.Instructions
	if err := s.write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *wireSession) next() string {
	s.seq++
	return fmt.Sprintf("c%d", s.seq)
}

func (s *wireSession) write(line []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.w.Write(append(bytes.TrimRight(line, "\n"), '\n')); err != nil {
		return fmt.Errorf("write proxy: %w", err)
	}
	return nil
}

// read delivers the proxy's lines, answering the server's requests.
func (s *wireSession) read(r io.Reader) {
	defer close(s.lines)
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			line = bytes.TrimRight(line, "\r\n")
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					IncludeContext string `json:"includeContext"`
					URL            string `json:"url"`
				} `json:"params"`
			}
			if json.Unmarshal(line, &m) == nil && m.Method != "" && len(m.ID) > 0 {
				s.answer(m.ID, m.Method, m.Params.IncludeContext)
				if m.Method == "elicitation/create" && m.Params.URL != "" && s.accepts() {
					s.fetch(m.Params.URL)
				}
			}
			if b, _ := s.answers["fetch_icons"].(bool); b {
				s.fetchIcons(line)
			}
			s.lines <- line
		}
		if err != nil {
			return
		}
	}
}

// answer answers one request of the server from the case's Client;
// includeContext is a sampling request's.
func (s *wireSession) answer(id json.RawMessage, method, includeContext string) {
	var result any
	switch method {
	case "ping":
		result = map[string]any{}
	case "sampling/createMessage":
		if a, ok := s.answers["sampling"].(map[string]any); ok {
			text, _ := a["text"].(string)
			if c, _ := a["context"].(string); c != "" && (includeContext == "thisServer" || includeContext == "allServers") {
				text += " " + c
			}
			result = map[string]any{"role": "assistant", "model": "eval-model",
				"content": map[string]any{"type": "text", "text": text}}
		}
	case "elicitation/create":
		if a, ok := s.answers["elicitation"].(map[string]any); ok {
			result = a
		}
	case "roots/list":
		if a, ok := s.answers["roots"].([]any); ok {
			var roots []any
			for _, u := range a {
				roots = append(roots, map[string]any{"uri": u})
			}
			result = map[string]any{"roots": roots}
		}
	}
	msg := map[string]any{"jsonrpc": "2.0", "id": id}
	if result == nil {
		msg["error"] = map[string]any{"code": -32601, "message": "the eval client does not answer " + method}
	} else {
		msg["result"] = result
	}
	b, _ := json.Marshal(msg)
	s.write(b)
}

// accepts reports whether the case's user accepts an elicitation.
func (s *wireSession) accepts() bool {
	a, _ := s.answers["elicitation"].(map[string]any)
	return a != nil && a["action"] == "accept"
}

// fetchIcons fetches the http(s) src of every icon in line, at any depth.
func (s *wireSession) fetchIcons(line []byte) {
	var v any
	if json.Unmarshal(line, &v) != nil {
		return
	}
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, x := range t {
				if icons, ok := x.([]any); ok && k == "icons" {
					for _, icon := range icons {
						if m, ok := icon.(map[string]any); ok {
							if src, ok := m["src"].(string); ok {
								s.fetch(src)
							}
						}
					}
				}
				walk(x)
			}
		case []any:
			for _, x := range t {
				walk(x)
			}
		}
	}
	walk(v)
}

// fetch GETs an http(s) URL as the client would, and forgets the answer.
// The bound is generous: the sinks answer at once, and a slow host (a TCG
// VM) must not make a fetch that would happen look like one refused.
func (s *wireSession) fetch(url string) {
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return
	}
	c := &http.Client{Timeout: 15 * time.Second}
	if resp, err := c.Get(url); err == nil {
		resp.Body.Close()
	}
}

func quoted(id string) []byte {
	b, _ := json.Marshal(id)
	return b
}

// roundTrip writes line and collects what arrives until the response to
// id (JSON; the lines before it, then it), or until ctx ends.
func (s *wireSession) roundTrip(ctx context.Context, line []byte, id []byte) (resp []byte, seen []string, err error) {
	if err := s.write(line); err != nil {
		return nil, nil, err
	}
	want, _ := jsonrpc.AppendIDKey(nil, id)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				return nil, seen, errors.New("the proxy closed the session")
			}
			seen = append(seen, string(l))
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(l, &m) == nil && m.Method == "" {
				if k, ok := jsonrpc.AppendIDKey(nil, m.ID); ok && bytes.Equal(k, want) {
					return l, seen, nil
				}
			}
		case <-ctx.Done():
			return nil, seen, ctx.Err()
		}
	}
}

// quiet collects what arrives after line was written, until nothing has
// for settle, or ctx ends.
func (s *wireSession) quiet(ctx context.Context, line []byte, settle time.Duration) ([]string, error) {
	if err := s.write(line); err != nil {
		return nil, err
	}
	var seen []string
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				return seen, nil
			}
			seen = append(seen, string(l))
		case <-time.After(settle):
			return seen, nil
		case <-ctx.Done():
			return seen, nil
		}
	}
}

// call makes one of the case's calls; it returns the text the client got
// and whether the call failed.
func (s *wireSession) call(ctx context.Context, call Call, raw string, args map[string]any, settle time.Duration) (string, bool, error) {
	if call.Raw != "" {
		// A raw message with an id is answered (by the server or the
		// guard) under it; one without is waited out.
		if id := jsonrpc.PeekID([]byte(raw)); id != nil && string(id) != "null" {
			_, seen, err := s.roundTrip(ctx, []byte(raw), id)
			return strings.Join(seen, "\n"), hasError(seen), err
		}
		seen, err := s.quiet(ctx, []byte(raw), settle)
		return strings.Join(seen, "\n"), hasError(seen), err
	}
	method, params := call.Method, any(args)
	if method == "" {
		method, params = "tools/call", map[string]any{"name": call.Tool, "arguments": args}
	}
	msg := map[string]any{"jsonrpc": "2.0", "method": method, "params": params}
	if call.Notify {
		b, _ := json.Marshal(msg)
		seen, err := s.quiet(ctx, b, settle)
		return strings.Join(seen, "\n"), hasError(seen), err
	}
	id := s.next()
	msg["id"] = id
	b, _ := json.Marshal(msg)
	resp, seen, err := s.roundTrip(ctx, b, quoted(id))
	text := strings.Join(seen, "\n")
	if err != nil {
		return text, true, err
	}
	return text, hasError([]string{string(resp)}), nil
}

// hasError reports a response that is an error or a result with isError.
func hasError(lines []string) bool {
	for _, l := range lines {
		var m struct {
			Method string           `json:"method"`
			Error  *json.RawMessage `json:"error"`
			Result struct {
				IsError bool `json:"isError"`
			} `json:"result"`
		}
		if json.Unmarshal([]byte(l), &m) == nil && m.Method == "" && (m.Error != nil || m.Result.IsError) {
			return true
		}
	}
	return false
}

// Instructions is what the initialize answer gave the client to read.
func (s *wireSession) Instructions() string { return s.init }

// CallTool is there for Session; the runner makes a wire case's calls
// with call.
func (s *wireSession) CallTool(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return nil, errors.New("harness: the wire client makes calls with call")
}

// wireCalls makes a wire case's calls in order, recording what came back.
func (r *Runner) wireCalls(ctx context.Context, s *wireSession, c *Case, sb *Sandbox, ev *Evidence, res *Result) {
	settle := r.CallTimeout / 20
	for i, call := range c.Calls {
		args, err := sb.ExpandJSON(call.Arguments)
		raw := ""
		if err == nil && call.Raw != "" {
			raw, err = sb.Expand(call.Raw)
		}
		if err != nil {
			ev.Responses = append(ev.Responses, "harness: "+err.Error())
			ev.CallErrors = append(ev.CallErrors, true)
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, r.CallTimeout)
		text, failed, err := s.call(cctx, call, raw, args, settle)
		cancel()
		if err != nil {
			text += "\n" + err.Error()
		}
		if failed || err != nil {
			if res.CallErrors == nil {
				res.CallErrors = map[int]string{}
			}
			res.CallErrors[i] = truncate(text, 300)
			if strings.Contains(text, deniedMark) {
				res.Denied = append(res.Denied, i)
			}
		}
		ev.Responses = append(ev.Responses, text)
		ev.CallErrors = append(ev.CallErrors, failed || err != nil)
	}
}

// deniedMark starts every denial's message (guard.Deny).
const deniedMark = "mcpguard: denied by "

// wireAnswers expands the case's Client into what the wire client sends.
func wireAnswers(c *Case, sb *Sandbox) (map[string]any, error) {
	if c.Client == nil {
		return map[string]any{}, nil
	}
	b, err := json.Marshal(c.Client)
	if err != nil {
		return nil, err
	}
	return sb.ExpandJSON(b)
}

// Close ends the session: the client's side closes, and the proxy stops
// the server.
func (s *wireSession) Close() error {
	s.w.Close()
	for range s.lines {
	}
	return <-s.served
}
