package gateway

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// maxQueued bounds the messages waiting for one stream (or for a GET
// stream that is not open); past it the oldest are dropped and logged.
const maxQueued = 4096

// stream is one HTTP response that carries messages to the client: the SSE
// or JSON answer to a POSTed request, or the GET stream.
type stream struct {
	reqID    string // canonical id of the request it answers ("" for GET)
	sse      bool   // may carry messages other than the response
	progress string // the request's progress token, if any

	// Guarded by the outbox's mutex.
	queue  [][]byte
	closed bool

	wake chan struct{} // capacity 1: something was queued
}

func newStream(reqID string, sse bool) *stream {
	return &stream{reqID: reqID, sse: sse, wake: make(chan struct{}, 1)}
}

// outbox routes messages bound for the client to the stream that should
// carry them. Every push happens under mu, so a stream sees messages in the
// order the server sent them, and nothing is queued on a stream after the
// response that ends it.
type outbox struct {
	mu      sync.Mutex
	pending map[string]*stream // by canonical request id
	posts   []*stream          // open SSE streams of requests in flight
	get     *stream
	orphans [][]byte // for a GET stream not open yet
	ended   bool
	dropped int
	logf    func(format string, args ...any)
}

func newOutbox(logf func(string, ...any)) *outbox {
	return &outbox{pending: map[string]*stream{}, logf: logf}
}

// open registers a stream for a request; false when a request with the same
// id is already in flight (ids must be unique within a session) or the
// session ended.
func (o *outbox) open(s *stream) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ended || o.pending[s.reqID] != nil {
		return false
	}
	o.pending[s.reqID] = s
	if s.sse {
		o.posts = append(o.posts, s)
	}
	return true
}

// openGet registers the GET stream and hands it what waited for it; false
// when one is already open.
func (o *outbox) openGet(s *stream) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ended || (o.get != nil && !o.get.closed) {
		return false
	}
	o.get = s
	for _, m := range o.orphans {
		o.push(s, m)
	}
	o.orphans = nil
	return true
}

// drop unregisters s: its handler is returning.
func (o *outbox) drop(s *stream) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s.closed = true
	if s.reqID != "" && o.pending[s.reqID] == s {
		delete(o.pending, s.reqID)
	}
	o.removePost(s)
	if o.get == s {
		o.get = nil
	}
}

func (o *outbox) removePost(s *stream) {
	for i, p := range o.posts {
		if p == s {
			o.posts = append(o.posts[:i:i], o.posts[i+1:]...)
			return
		}
	}
}

// respond delivers a response to the request waiting for it; false when no
// request with that id is waiting (its client went away).
func (o *outbox) respond(id string, line []byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.pending[id]
	if s == nil {
		return false
	}
	delete(o.pending, id)
	o.removePost(s) // nothing may follow the response on its stream
	o.push(s, line)
	return true
}

// send delivers a server-initiated request or notification: progress to the
// stream of the request it reports on, anything else to the newest request
// stream in flight (what a server sends mid-request belongs to it, as a
// sampling request during a tool call), else to the GET stream, else it
// waits for one.
func (o *outbox) send(line []byte, progress string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ended {
		return
	}
	if progress != "" {
		for _, s := range o.posts {
			if s.progress == progress {
				o.push(s, line)
				return
			}
		}
	}
	if n := len(o.posts); n > 0 {
		o.push(o.posts[n-1], line)
		return
	}
	if o.get != nil && !o.get.closed {
		o.push(o.get, line)
		return
	}
	if len(o.orphans) >= maxQueued {
		o.orphans = o.orphans[1:]
		o.dropped++
		o.logf("no GET stream: dropped a server message (%d so far)", o.dropped)
	}
	o.orphans = append(o.orphans, line)
}

// push queues line on s; called under mu.
func (o *outbox) push(s *stream, line []byte) {
	if s.closed {
		return
	}
	if len(s.queue) >= maxQueued {
		s.queue = s.queue[1:]
		o.dropped++
		o.logf("slow client: dropped a message (%d so far)", o.dropped)
	}
	s.queue = append(s.queue, line)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// takeFinal returns what is queued on s, and whether that is all s will
// carry: its response is among it, or (the GET stream) the session ended.
func (o *outbox) takeFinal(s *stream) ([][]byte, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	q := s.queue
	s.queue = nil
	if s.reqID == "" {
		return q, o.ended
	}
	return q, o.pending[s.reqID] != s
}

// end marks the session over and answers every request still waiting with
// a JSON-RPC error (code, msg).
func (o *outbox) end(code int, msg string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ended {
		return
	}
	o.ended = true
	for id, s := range o.pending {
		b, _ := jsonrpc.NewError(rawID(id), code, msg, nil).Marshal()
		o.push(s, b)
		delete(o.pending, id)
	}
	o.posts = nil
	if o.get != nil {
		select {
		case o.get.wake <- struct{}{}:
		default:
		}
	}
}

// inFlight reports the number of requests waiting for a response.
func (o *outbox) inFlight() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.pending)
}

// canonID is a request id's key: JSON-RPC ids match by value, so 1 and 1.0
// are one id and "1" is another.
func canonID(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return "s" + s
		}
		return "r" + string(raw)
	}
	if f, err := strconv.ParseFloat(string(raw), 64); err == nil {
		return "n" + strconv.FormatFloat(f, 'g', -1, 64)
	}
	return "r" + string(raw)
}

// rawID turns a canonical id back into JSON, for errors the gateway writes.
func rawID(id string) json.RawMessage {
	if id == "" {
		return nil
	}
	switch id[0] {
	case 's':
		b, _ := json.Marshal(id[1:])
		return b
	default:
		return json.RawMessage(id[1:])
	}
}

// progressToken is params._meta.progressToken of a request, or params.
// progressToken of a notifications/progress, as a canonical key.
func progressToken(line []byte, notification bool) string {
	var m struct {
		Params struct {
			Token json.RawMessage `json:"progressToken"`
			Meta  struct {
				Token json.RawMessage `json:"progressToken"`
			} `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil {
		return ""
	}
	if notification {
		return canonID(m.Params.Token)
	}
	return canonID(m.Params.Meta.Token)
}
