package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// askTimeout bounds the gateway's own requests to a server on the aggregate
// endpoint (initialize, tools/list pages).
const askTimeout = 30 * time.Second

// maxPages bounds the tools/list pages read from one server.
const maxPages = 100

// aggregate is the server side of an aggregate-endpoint session: one
// guarded session of every server the token grants, presented as one
// server whose tools are named <server>__<tool>. Unlike a direct session it
// is not transparent: it answers initialize and tools/list itself and
// renames tools and server-to-client request ids on the way through.
type aggregate struct {
	s        *session
	backends map[string]*backend
	names    []string
	prefix   string // of the gateway's own ids, unguessable by the client
	n        atomic.Int64

	mu         sync.Mutex
	asks       map[string]chan []byte // the gateway's own requests, by id
	serverReqs map[string]serverReq   // server-to-client requests, by the id the client sees
	calls      map[string]*backend    // client requests in flight, for cancellation
}

type serverReq struct {
	b  *backend
	id json.RawMessage
}

// startAggregate starts a session of each server in names.
func (s *session) startAggregate(names []string) error {
	var nonce [6]byte
	rand.Read(nonce[:])
	a := &aggregate{
		s:          s,
		backends:   map[string]*backend{},
		names:      names,
		prefix:     "mcpguard-" + hex.EncodeToString(nonce[:]) + "-",
		asks:       map[string]chan []byte{},
		serverReqs: map[string]serverReq{},
		calls:      map[string]*backend{},
	}
	stopAll := func() {
		for _, b := range a.backends {
			b.close()
		}
	}
	for _, name := range names {
		p, err := s.g.proxy(name, s.identity)
		if err != nil {
			stopAll()
			return fmt.Errorf("server %s: %w", name, err)
		}
		var b *backend
		ready := make(chan struct{})
		b = startBackend(name, p, func(line []byte) {
			<-ready
			a.fromServer(b, line)
		})
		close(ready)
		a.backends[name] = b
	}
	s.handle = a.handle
	s.stop = stopAll
	go func() {
		for _, b := range a.backends {
			<-b.done
		}
		s.end("every server of the session ended")
		s.g.wg.Done()
	}()
	return nil
}

func (a *aggregate) live() []*backend {
	var out []*backend
	for _, n := range a.names {
		b := a.backends[n]
		select {
		case <-b.done:
		default:
			out = append(out, b)
		}
	}
	return out
}

// reply answers the client's request id with a result or an error.
func (a *aggregate) reply(id json.RawMessage, result any, rpcErr *jsonrpc.Error) {
	m := jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: id, Error: rpcErr}
	if rpcErr == nil {
		b, err := json.Marshal(result)
		if err != nil {
			m.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcpguard: " + err.Error()}
		} else {
			m.Result = b
		}
	}
	line, _ := m.Marshal()
	a.s.out.respond(canonID(id), line)
}

// handle takes one message from the client.
func (a *aggregate) handle(h jsonrpc.Header, line []byte) error {
	switch h.Kind {
	case jsonrpc.KindRequest:
		switch h.Method {
		case "initialize":
			go a.initialize(h.ID, line)
		case "ping":
			a.reply(h.ID, struct{}{}, nil)
		case "tools/list":
			go a.listTools(h.ID)
		case "tools/call":
			a.callTool(h.ID, line)
		default:
			a.reply(h.ID, nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
				Message: "mcpguard: the aggregate endpoint serves tools only; " + h.Method + " is not available"})
		}
	case jsonrpc.KindNotification:
		if h.Method == "notifications/cancelled" {
			var n struct {
				Params struct {
					RequestID json.RawMessage `json:"requestId"`
				} `json:"params"`
			}
			json.Unmarshal(line, &n)
			a.mu.Lock()
			b := a.calls[canonID(n.Params.RequestID)]
			a.mu.Unlock()
			if b != nil {
				b.send(line)
			}
			return nil
		}
		for _, b := range a.live() {
			b.send(line)
		}
	case jsonrpc.KindResponse:
		a.mu.Lock()
		sr, ok := a.serverReqs[canonID(h.ID)]
		delete(a.serverReqs, canonID(h.ID))
		a.mu.Unlock()
		if !ok {
			return nil
		}
		out, err := withID(line, sr.id)
		if err != nil {
			return nil
		}
		return sr.b.send(out)
	}
	return nil
}

// fromServer routes one message from server b.
func (a *aggregate) fromServer(b *backend, line []byte) {
	h, err := jsonrpc.Peek(line)
	if err != nil {
		return
	}
	switch h.Kind {
	case jsonrpc.KindResponse:
		id := canonID(h.ID)
		a.mu.Lock()
		ch, mine := a.asks[id]
		delete(a.asks, id)
		delete(a.calls, id)
		a.mu.Unlock()
		if mine {
			ch <- line
			return
		}
		if !a.s.out.respond(id, line) {
			a.s.g.logf("session %s: dropped a response from %s to id %s: its client left", a.s, b.name, h.ID)
		}
	case jsonrpc.KindRequest:
		// Servers number their requests independently: the client sees
		// ids the gateway made unique, and its answers are mapped back.
		id := fmt.Sprintf("%ss%d", a.prefix, a.n.Add(1))
		raw, _ := json.Marshal(id)
		out, err := withID(line, raw)
		if err != nil {
			return
		}
		a.mu.Lock()
		a.serverReqs[canonID(raw)] = serverReq{b: b, id: h.ID}
		a.mu.Unlock()
		a.s.out.send(out, "")
	case jsonrpc.KindNotification:
		tok := ""
		if h.Method == "notifications/progress" {
			tok = progressToken(line, true)
		}
		a.s.out.send(line, tok)
	}
}

// withID returns line with its id replaced.
func withID(line []byte, id json.RawMessage) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, fmt.Errorf("rewrite id: %w", err)
	}
	m["id"] = id
	return json.Marshal(m)
}

var errNoAnswer = errors.New("no answer")

// ask makes the gateway's own request to b and returns the result.
func (a *aggregate) ask(b *backend, method string, params json.RawMessage) (json.RawMessage, error) {
	id, _ := json.Marshal(fmt.Sprintf("%s%d", a.prefix, a.n.Add(1)))
	line, err := (&jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: id, Method: method, Params: params}).Marshal()
	if err != nil {
		return nil, err
	}
	ch := make(chan []byte, 1)
	key := canonID(id)
	a.mu.Lock()
	a.asks[key] = ch
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.asks, key)
		a.mu.Unlock()
	}()
	if err := b.send(line); err != nil {
		return nil, fmt.Errorf("%s %s: %w", b.name, method, err)
	}
	t := time.NewTimer(askTimeout)
	defer t.Stop()
	select {
	case resp := <-ch:
		m, err := jsonrpc.Parse(resp)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", b.name, method, err)
		}
		if m.Error != nil {
			return nil, fmt.Errorf("%s %s: %w", b.name, method, m.Error)
		}
		return m.Result, nil
	case <-b.done:
		return nil, fmt.Errorf("%s %s: %w", b.name, method, errBackendGone)
	case <-a.s.done:
		return nil, fmt.Errorf("%s %s: %w", b.name, method, errBackendGone)
	case <-t.C:
		return nil, fmt.Errorf("%s %s: %w after %v", b.name, method, errNoAnswer, askTimeout)
	}
}

// initialize initializes every server with the client's parameters and
// answers as one server that has tools.
func (a *aggregate) initialize(id json.RawMessage, line []byte) {
	var req struct {
		Params json.RawMessage `json:"params"`
	}
	json.Unmarshal(line, &req)
	type answer struct {
		version string
		err     error
	}
	answers := make([]answer, len(a.names))
	var wg sync.WaitGroup
	for i, name := range a.names {
		wg.Go(func() {
			res, err := a.ask(a.backends[name], "initialize", req.Params)
			if err != nil {
				answers[i].err = err
				return
			}
			var r struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			json.Unmarshal(res, &r)
			answers[i].version = r.ProtocolVersion
		})
	}
	wg.Wait()
	version := ""
	var errs []string
	for i, ans := range answers {
		if ans.err != nil {
			// That server stays out of the session; the others serve.
			a.s.g.logf("session %s: %v", a.s, ans.err)
			errs = append(errs, ans.err.Error())
			a.backends[a.names[i]].close()
			continue
		}
		if version == "" {
			version = ans.version
		}
	}
	if version == "" {
		a.reply(id, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcpguard: no server initialized: " + strings.Join(errs, "; ")})
		return
	}
	a.reply(id, map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{"tools": map[string]any{"listChanged": true}},
		"serverInfo":      map[string]any{"name": "mcpguard-gateway", "version": "1"},
		"instructions":    "Tools of several guarded servers, named <server>" + toolSep + "<tool>.",
	}, nil)
}

// listTools answers tools/list with every server's tools, renamed.
func (a *aggregate) listTools(id json.RawMessage) {
	live := a.live()
	lists := make([][]json.RawMessage, len(live))
	var wg sync.WaitGroup
	for i, b := range live {
		wg.Go(func() {
			tools, err := a.serverTools(b)
			if err != nil {
				a.s.g.logf("session %s: %v", a.s, err)
			}
			lists[i] = tools
		})
	}
	wg.Wait()
	all := []json.RawMessage{}
	for _, l := range lists {
		all = append(all, l...)
	}
	a.reply(id, map[string]any{"tools": all}, nil)
}

// serverTools reads every page of b's tools/list and renames the tools.
func (a *aggregate) serverTools(b *backend) ([]json.RawMessage, error) {
	var out []json.RawMessage
	cursor := ""
	for range maxPages {
		params := json.RawMessage("{}")
		if cursor != "" {
			params, _ = json.Marshal(map[string]string{"cursor": cursor})
		}
		res, err := a.ask(b, "tools/list", params)
		if err != nil {
			return out, err
		}
		var page struct {
			Tools      []map[string]json.RawMessage `json:"tools"`
			NextCursor string                       `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &page); err != nil {
			return out, fmt.Errorf("%s tools/list: %w", b.name, err)
		}
		for _, t := range page.Tools {
			var name string
			if json.Unmarshal(t["name"], &name) != nil || name == "" {
				continue
			}
			t["name"], _ = json.Marshal(b.name + toolSep + name)
			raw, err := json.Marshal(t)
			if err != nil {
				continue
			}
			out = append(out, raw)
		}
		if page.NextCursor == "" {
			return out, nil
		}
		cursor = page.NextCursor
	}
	return out, fmt.Errorf("%s tools/list: over %d pages", b.name, maxPages)
}

// callTool sends a tools/call to the server its name's prefix names, with
// the client's id and the server's own tool name.
func (a *aggregate) callTool(id json.RawMessage, line []byte) {
	var req struct {
		Params map[string]json.RawMessage `json:"params"`
	}
	var name string
	if json.Unmarshal(line, &req) != nil || json.Unmarshal(req.Params["name"], &name) != nil {
		a.reply(id, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "mcpguard: tools/call needs params.name"})
		return
	}
	server, tool, ok := strings.Cut(name, toolSep)
	b := a.backends[server]
	if !ok || b == nil || !slices.Contains(a.names, server) {
		a.reply(id, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("mcpguard: unknown tool %q", name)})
		return
	}
	req.Params["name"], _ = json.Marshal(tool)
	params, _ := json.Marshal(req.Params)
	out, err := (&jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: id, Method: "tools/call", Params: params}).Marshal()
	if err != nil {
		a.reply(id, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcpguard: " + err.Error()})
		return
	}
	a.mu.Lock()
	a.calls[canonID(id)] = b
	a.mu.Unlock()
	if err := b.send(out); err != nil {
		a.mu.Lock()
		delete(a.calls, canonID(id))
		a.mu.Unlock()
		a.reply(id, nil, &jsonrpc.Error{Code: jsonrpc.CodeServerExited, Message: fmt.Sprintf("mcpguard: server %s: %v", server, err)})
	}
}
