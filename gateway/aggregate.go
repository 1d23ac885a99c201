package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// askTimeout bounds the gateway's own requests to a server on the aggregate
// endpoint (initialize, list pages, logging/setLevel).
const askTimeout = 30 * time.Second

// maxPages bounds the pages of one list read from one server.
const maxPages = 100

// aggregate is the server side of an aggregate-endpoint session: one
// guarded session of every server the caller may reach, presented as one
// server. It answers initialize, ping and the lists itself (see merge for
// how names are kept, prefixed or left out) and routes every other request
// to the one server that listed the name, URI or template it names;
// server-to-client requests get ids unique across servers and their
// answers are mapped back.
type aggregate struct {
	s        *session
	backends map[string]*backend
	names    []string
	prefix   string // of the gateway's own ids, unguessable by the client
	n        atomic.Int64

	mu         sync.Mutex
	asks       map[string]chan []byte // the gateway's own requests, by id
	serverReqs map[string]serverReq   // server-to-client requests, by the id the client sees
	clientIDs  map[serverKey]string   // the same, by server and the server's id
	tokens     map[string]*backend    // progress tokens of server-to-client requests
	calls      map[string]*backend    // client requests in flight, for cancellation
	caps       map[string]map[string]json.RawMessage
	views      map[*kind]*view
	gen        map[*kind]int // bumped by list_changed: a view built before is stale
	building   map[*kind]*sync.Mutex
}

type serverReq struct {
	b  *backend
	id json.RawMessage
}

type serverKey struct {
	b  *backend
	id string
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
		clientIDs:  map[serverKey]string{},
		tokens:     map[string]*backend{},
		calls:      map[string]*backend{},
		caps:       map[string]map[string]json.RawMessage{},
		views:      map[*kind]*view{},
		gen:        map[*kind]int{},
		building:   map[*kind]*sync.Mutex{},
	}
	for _, k := range kinds {
		a.building[k] = &sync.Mutex{}
	}
	stopAll := func() {
		for _, b := range a.backends {
			b.close()
		}
	}
	for _, name := range names {
		b, err := s.g.backend(name, s.identity)
		if err != nil {
			stopAll()
			return fmt.Errorf("server %s: %w", name, err)
		}
		a.backends[name] = b
		s.addBackend(b)
		b.attach(func(line []byte) { a.fromServer(b, line) })
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

// live lists the session's servers that serve: not ended, and not stopped
// (a server that failed initialize is stopped at once, and gone later).
func (a *aggregate) live() []*backend {
	var out []*backend
	for _, n := range a.names {
		if b := a.backends[n]; !b.ended() && !b.stopped.Load() {
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

func (a *aggregate) fail(id json.RawMessage, code int, format string, args ...any) {
	a.reply(id, nil, &jsonrpc.Error{Code: code, Message: "mcpguard: " + fmt.Sprintf(format, args...)})
}

// handle takes one message from the client.
func (a *aggregate) handle(h jsonrpc.Header, line []byte) error {
	switch h.Kind {
	case jsonrpc.KindRequest:
		a.request(h, line)
	case jsonrpc.KindNotification:
		a.notification(h, line)
	case jsonrpc.KindResponse:
		a.mu.Lock()
		sr, ok := a.serverReqs[canonID(h.ID)]
		delete(a.serverReqs, canonID(h.ID))
		if ok {
			delete(a.clientIDs, serverKey{sr.b, canonID(sr.id)})
		}
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

// request answers or routes one client request.
func (a *aggregate) request(h jsonrpc.Header, line []byte) {
	switch h.Method {
	case "initialize":
		go a.initialize(h.ID, line)
	case "ping":
		a.reply(h.ID, struct{}{}, nil)
	case "tools/list":
		a.list(h.ID, line, kindTools)
	case "prompts/list":
		a.list(h.ID, line, kindPrompts)
	case "resources/list":
		a.list(h.ID, line, kindResources)
	case "resources/templates/list":
		a.list(h.ID, line, kindTemplates)
	case "tools/call":
		a.byName(h.ID, line, kindTools, "name")
	case "prompts/get":
		a.byName(h.ID, line, kindPrompts, "name")
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		a.byURI(h.ID, line)
	case "completion/complete":
		a.complete(h.ID, line)
	case "logging/setLevel":
		go a.setLevel(h.ID, line)
	default:
		a.fail(h.ID, jsonrpc.CodeMethodNotFound, "method %s is not served on the aggregate endpoint", h.Method)
	}
}

// notification passes a client notification to the servers it concerns.
func (a *aggregate) notification(h jsonrpc.Header, line []byte) {
	switch h.Method {
	case "notifications/cancelled":
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
	case "notifications/progress":
		// Progress on a server's request (sampling) goes to that server.
		a.mu.Lock()
		b := a.tokens[progressToken(line, true)]
		a.mu.Unlock()
		if b != nil {
			b.send(line)
		}
	default:
		for _, b := range a.live() {
			b.send(line)
		}
	}
}

// send forwards a client request to b under the client's id.
func (a *aggregate) send(b *backend, id json.RawMessage, line []byte) {
	key := canonID(id)
	a.mu.Lock()
	a.calls[key] = b
	a.mu.Unlock()
	if err := b.send(line); err != nil {
		a.mu.Lock()
		delete(a.calls, key)
		a.mu.Unlock()
		a.fail(id, jsonrpc.CodeServerExited, "server %s: %v", b.name, err)
	}
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
		if a.calls[id] == b {
			delete(a.calls, id)
		}
		a.mu.Unlock()
		if mine {
			ch <- line
			return
		}
		if !a.s.out.respond(id, line) {
			a.s.g.logf("session %s: dropped a response from %s to id %s: its client left", a.s, b.name, h.ID)
		}
	case jsonrpc.KindRequest:
		a.serverRequest(b, h, line)
	case jsonrpc.KindNotification:
		a.serverNotification(b, h, line)
	}
}

// serverRequest passes a server's request to the client under an id the
// gateway made unique: servers number their requests independently.
func (a *aggregate) serverRequest(b *backend, h jsonrpc.Header, line []byte) {
	id := fmt.Sprintf("%ss%d", a.prefix, a.n.Add(1))
	raw, _ := json.Marshal(id)
	out, err := withID(line, raw)
	if err != nil {
		return
	}
	a.mu.Lock()
	a.serverReqs[canonID(raw)] = serverReq{b: b, id: h.ID}
	a.clientIDs[serverKey{b, canonID(h.ID)}] = id
	if tok := progressToken(line, false); tok != "" {
		a.tokens[tok] = b
	}
	a.mu.Unlock()
	a.s.out.send(out, "")
}

// serverNotification passes a server's notification to the client: a list
// change drops the merged list (it is built again when next asked for), a
// cancellation names the request by the id the client saw, a resource
// update the URI the client knows.
func (a *aggregate) serverNotification(b *backend, h jsonrpc.Header, line []byte) {
	tok := ""
	switch h.Method {
	case "notifications/progress":
		tok = progressToken(line, true)
	case "notifications/tools/list_changed":
		a.stale(kindTools)
	case "notifications/prompts/list_changed":
		a.stale(kindPrompts)
	case "notifications/resources/list_changed":
		a.stale(kindResources)
		a.stale(kindTemplates)
	case "notifications/cancelled":
		var err error
		if line, err = a.mapField(line, "requestId", func(raw json.RawMessage) (json.RawMessage, bool) {
			a.mu.Lock()
			defer a.mu.Unlock()
			id, ok := a.clientIDs[serverKey{b, canonID(raw)}]
			out, _ := json.Marshal(id)
			return out, ok
		}); err != nil {
			return
		}
	case "notifications/resources/updated":
		var err error
		if line, err = a.mapField(line, "uri", func(raw json.RawMessage) (json.RawMessage, bool) {
			var uri string
			if json.Unmarshal(raw, &uri) != nil {
				return nil, false
			}
			a.mu.Lock()
			v := a.views[kindResources]
			a.mu.Unlock()
			if v == nil {
				return nil, false
			}
			shown, ok := v.back[target{server: b.name, name: uri}]
			out, _ := json.Marshal(shown)
			return out, ok && shown != uri
		}); err != nil {
			return
		}
	}
	a.s.out.send(line, tok)
}

// mapField rewrites params.field of line with fn; unchanged when fn says
// so, dropped (an error) when the value cannot be read.
func (a *aggregate) mapField(line []byte, field string, fn func(json.RawMessage) (json.RawMessage, bool)) ([]byte, error) {
	var m struct {
		Params map[string]json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(line, &m); err != nil || m.Params[field] == nil {
		return nil, errors.New("no " + field)
	}
	v, ok := fn(m.Params[field])
	if !ok {
		return line, nil
	}
	return withParam(line, field, v)
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

// withParam returns line with params.field set to v.
func withParam(line []byte, field string, v json.RawMessage) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, fmt.Errorf("rewrite %s: %w", field, err)
	}
	params, err := withRaw(m["params"], field, v)
	if err != nil {
		return nil, err
	}
	m["params"] = params
	return json.Marshal(m)
}

// withRaw returns the object raw with field set to v.
func withRaw(raw json.RawMessage, field string, v json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("rewrite %s: %w", field, err)
	}
	m[field] = v
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
