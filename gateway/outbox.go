package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// Bounds on what one session's streams hold.
const (
	// maxQueued bounds the events waiting for one stream's client; past it
	// the oldest are dropped and logged.
	maxQueued = 4096
	// queuedBytes bounds the bytes of the events waiting for a session's
	// clients, over all its streams (a client that never reads a stream of
	// large progress messages held gigabytes under the count alone). Past
	// it the oldest waiting message that is not a response is dropped:
	// responses are never dropped (there is one per request in flight,
	// which max_requests_per_session bounds), so a session holds at most this, its
	// history, and its in-flight requests' responses.
	queuedBytes = 8 << 20
	// historyBytes and historyEvents bound the events a session keeps, after
	// they were written, so that a client that lost its connection can have
	// them again (Last-Event-ID).
	historyBytes  = 4 << 20
	historyEvents = 1024
)

// Errors of a resumption (GET with Last-Event-ID).
var (
	errConflict     = errors.New("the session already has a GET stream")
	errUnknownEvent = errors.New("no stream of this session has that event id")
)

// event is one message on a stream; its SSE id is "<stream>-<seq>".
type event struct {
	seq  int64
	data []byte
	resp bool // the response that ends its stream: never dropped
}

// stream is one sequence of messages for the client: the answer to a
// POSTed request, or the session's GET stream (number 0). Its events are
// numbered from 1 (0 is the priming event); a connection writes them, and
// when the connection breaks another may take the stream over from the
// last event it saw.
type stream struct {
	no       int64
	reqID    string // canonical id of the request it answers ("" for GET)
	progress string // the request's progress token, if any
	sse      bool   // the client accepts SSE: messages other than the response may come on it

	// Guarded by the outbox's mutex.
	events    []event // the kept ones: written (for replay), then waiting
	next      int64   // seq of the next event
	delivered int64   // highest seq handed to a connection
	final     bool    // nothing follows the last event
	resumable bool    // the client was given an event id of this stream
	gone      bool    // forgotten by the outbox
	w         *waiter // the connection writing it, nil when none
	first     waiter  // the first one's, in the same allocation
}

// waiter is one HTTP response writing a stream.
type waiter struct {
	wake   chan struct{} // capacity 1: something was queued, or taken over
	cursor int64         // the last seq written; guarded by the outbox's mutex
	lost   bool          // another connection took the stream over
}

func newWaiter(cursor int64) *waiter {
	return &waiter{wake: make(chan struct{}, 1), cursor: cursor}
}

func (w *waiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// ref is a written event kept in a session's history.
type ref struct {
	st  *stream
	seq int64
	n   int
}

// outbox routes messages bound for the client to the stream that should
// carry them. Every push happens under mu, so a stream sees messages in the
// order the server sent them, and nothing is queued on a stream after the
// response that ends it.
type outbox struct {
	mu      sync.Mutex
	nextNo  int64
	streams map[int64]*stream  // by number: live or replayable
	pending map[string]*stream // by canonical request id: awaiting their response
	posts   []*stream          // request streams in flight that may carry other messages
	get     *stream            // stream 0
	history []ref              // written events kept for replay, oldest first
	histLen int                // their bytes
	queued  int                // bytes of the events not yet written, all streams
	ended   bool
	dropped int
	logf    func(format string, args ...any)
}

func newOutbox(logf func(string, ...any)) *outbox {
	get := &stream{no: 0, sse: true, next: 1}
	return &outbox{
		nextNo:  1,
		streams: map[int64]*stream{0: get},
		pending: map[string]*stream{},
		get:     get,
		logf:    logf,
	}
}

// open registers a stream for a request and attaches a waiter to it; false
// when a request with the same id is already in flight (ids must be unique
// within a session) or the session ended.
func (o *outbox) open(reqID, progress string, sse bool) (*stream, *waiter, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ended || o.pending[reqID] != nil {
		return nil, nil, false
	}
	st := &stream{no: o.nextNo, reqID: reqID, progress: progress, sse: sse, next: 1}
	o.nextNo++
	st.first.wake = make(chan struct{}, 1)
	st.w = &st.first
	o.streams[st.no] = st
	o.pending[reqID] = st
	if sse {
		o.posts = append(o.posts, st)
	}
	return st, st.w, true
}

// openGet attaches a waiter to the GET stream: after the last event written
// to any connection, or, resuming, after seq (taking the stream over from
// the connection that has it). Without resume, a second GET is refused.
func (o *outbox) openGet(resume bool, seq int64) (*waiter, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ended {
		return nil, errBackendGone
	}
	st := o.get
	if !resume {
		if st.w != nil {
			return nil, errConflict
		}
		seq = st.delivered
	}
	return o.attach(st, seq), nil
}

// resume attaches a waiter to stream no after event seq: the client lost
// the connection that carried it (a request's stream, or the GET stream).
func (o *outbox) resume(no, seq int64) (*stream, *waiter, error) {
	if no == 0 {
		w, err := o.openGet(true, seq)
		return o.get, w, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	st := o.streams[no]
	if st == nil || !st.resumable || seq >= st.next {
		return nil, nil, errUnknownEvent
	}
	return st, o.attach(st, seq), nil
}

// attach gives st a new waiter after seq, taking it from the old one.
func (o *outbox) attach(st *stream, seq int64) *waiter {
	if st.w != nil {
		st.w.lost = true
		st.w.signal()
	}
	if len(st.events) > 0 && st.events[0].seq > seq+1 {
		o.logf("stream %d resumed after event %d, kept from %d: events lost", st.no, seq, st.events[0].seq)
	}
	st.w = newWaiter(seq)
	return st.w
}

// detach ends w's hold on st: its connection is done. A stream the client
// cannot resume is forgotten: the response to its request, if it comes, is
// dropped.
func (o *outbox) detach(st *stream, w *waiter) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if st.w != w {
		return
	}
	st.w = nil
	if st.no == 0 || st.resumable {
		o.tidy(st)
		return
	}
	if !st.final && o.pending[st.reqID] == st {
		delete(o.pending, st.reqID)
	}
	o.removePost(st)
	o.forget(st)
}

// forget drops st and what it kept.
func (o *outbox) forget(st *stream) {
	for _, e := range st.events {
		if e.seq > st.delivered {
			o.queued -= len(e.data)
		}
	}
	st.gone = true
	st.events = nil
	delete(o.streams, st.no)
}

// tidy forgets a finished stream nobody holds once nothing of it is kept.
func (o *outbox) tidy(st *stream) {
	if st.no != 0 && st.final && st.w == nil && len(st.events) == 0 {
		o.forget(st)
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
	st := o.pending[id]
	if st == nil {
		return false
	}
	delete(o.pending, id)
	o.removePost(st) // nothing may follow the response on its stream
	o.pushResponse(st, line)
	return true
}

// send delivers a server-initiated request or notification: progress to the
// stream of the request it reports on, anything else to the newest request
// stream in flight (what a server sends mid-request belongs to it, as a
// sampling request during a tool call), else to the GET stream, where it
// waits for a connection if there is none.
func (o *outbox) send(line []byte, progress string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ended {
		return
	}
	if progress != "" {
		for _, st := range o.posts {
			if st.progress == progress {
				o.push(st, line)
				return
			}
		}
	}
	if n := len(o.posts); n > 0 {
		o.push(o.posts[n-1], line)
		return
	}
	o.push(o.get, line)
}

// push queues line on st; called under mu.
func (o *outbox) push(st *stream, line []byte) { o.queue(st, line, false) }

// pushResponse queues the response that ends st; called under mu.
func (o *outbox) pushResponse(st *stream, line []byte) {
	o.queue(st, line, true)
	st.final = true
}

func (o *outbox) queue(st *stream, line []byte, resp bool) {
	if st.final || st.gone {
		return
	}
	if waiting := st.next - 1 - st.delivered; waiting >= maxQueued {
		o.dropOldest(st)
	}
	for o.queued+len(line) > queuedBytes && o.dropOldest(o.victim(st)) {
	}
	st.events = append(st.events, event{seq: st.next, data: line, resp: resp})
	st.next++
	o.queued += len(line)
	if st.w != nil {
		st.w.signal()
	}
}

// victim is the stream whose oldest waiting message goes when the session
// is over its bytes: st's own if it has one that may go, else the one
// with the most waiting bytes; nil when only responses wait.
func (o *outbox) victim(st *stream) *stream {
	if droppable(st) {
		return st
	}
	var best *stream
	most := 0
	for _, s := range o.streams {
		if !droppable(s) {
			continue
		}
		n := 0
		for _, e := range s.events {
			if e.seq > s.delivered {
				n += len(e.data)
			}
		}
		if n > most {
			best, most = s, n
		}
	}
	return best
}

// droppable reports whether st's oldest waiting event may be dropped.
func droppable(st *stream) bool {
	waiting := int(st.next - 1 - st.delivered)
	if st.gone || waiting <= 0 {
		return false
	}
	return !st.events[len(st.events)-waiting].resp
}

// dropOldest drops st's oldest waiting event, if it may go (a response
// never does); false when nothing was dropped.
func (o *outbox) dropOldest(st *stream) bool {
	if st == nil || !droppable(st) {
		return false
	}
	i := len(st.events) - int(st.next-1-st.delivered)
	o.queued -= len(st.events[i].data)
	st.events = append(st.events[:i:i], st.events[i+1:]...)
	st.delivered++ // the dropped one counts as seen: the cursor moves past it
	o.dropped++
	if o.dropped&(o.dropped-1) == 0 { // 1, 2, 4, ...: a slow client cannot flood the log
		o.logf("slow client: dropped a message (%d so far)", o.dropped)
	}
	return true
}

// take appends to buf the events of st after w's cursor and moves the cursor
// past them. final: nothing more will come for w (the stream ended and w
// has all of it, or another connection took the stream over: lost).
func (o *outbox) take(st *stream, w *waiter, buf []event) (evs []event, final, lost bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if w.lost || st.w != w {
		return buf, true, true
	}
	for i, e := range st.events {
		if e.seq > w.cursor {
			buf = append(buf, st.events[i:]...)
			break
		}
	}
	if n := len(buf); n > 0 {
		w.cursor = buf[n-1].seq
	}
	if w.cursor > st.delivered {
		o.delivered(st, w.cursor)
	}
	end := st.final || (st.no == 0 && o.ended)
	return buf, end && w.cursor >= st.next-1, false
}

// delivered records that st's events up to seq were written: a stream the
// client can resume keeps them in the history for replay, any other drops
// them.
func (o *outbox) delivered(st *stream, seq int64) {
	k := 0
	for k < len(st.events) && st.events[k].seq <= seq {
		if e := st.events[k]; e.seq > st.delivered {
			o.queued -= len(e.data)
			if st.resumable {
				o.history = append(o.history, ref{st: st, seq: e.seq, n: len(e.data)})
				o.histLen += len(e.data)
			}
		}
		k++
	}
	st.delivered = seq
	if !st.resumable {
		st.events = st.events[k:]
	}
	o.trimHistory()
}

// trimHistory drops the oldest written events past the session's bounds.
func (o *outbox) trimHistory() {
	drop := 0
	for drop < len(o.history) && (o.histLen > historyBytes || len(o.history)-drop > historyEvents) {
		r := o.history[drop]
		drop++
		o.histLen -= r.n
		if r.st.gone || len(r.st.events) == 0 || r.st.events[0].seq != r.seq {
			continue
		}
		r.st.events = r.st.events[1:]
		o.tidy(r.st)
	}
	if drop > 0 {
		o.history = append(o.history[:0:0], o.history[drop:]...)
	}
}

// markResumable records that the client got an event id of st: from now on
// what it wrote is kept for replay.
func (o *outbox) markResumable(st *stream) {
	o.mu.Lock()
	defer o.mu.Unlock()
	st.resumable = true
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
	for id, st := range o.pending {
		b, _ := jsonrpc.NewError(rawID(id), code, msg, nil).Marshal()
		o.pushResponse(st, b)
		delete(o.pending, id)
	}
	o.posts = nil
	if o.get.w != nil {
		o.get.w.signal()
	}
}

// inFlight reports the number of requests waiting for a response.
func (o *outbox) inFlight() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.pending)
}

// eventID is the SSE id of event seq of stream no.
func eventID(buf []byte, no, seq int64) []byte {
	buf = strconv.AppendInt(buf, no, 10)
	buf = append(buf, '-')
	return strconv.AppendInt(buf, seq, 10)
}

// parseEventID reads an id eventID wrote.
func parseEventID(id string) (no, seq int64, ok bool) {
	a, b, found := bytes.Cut([]byte(id), []byte{'-'})
	if !found {
		return 0, 0, false
	}
	no, err1 := strconv.ParseInt(string(a), 10, 64)
	seq, err2 := strconv.ParseInt(string(b), 10, 64)
	if err1 != nil || err2 != nil || no < 0 || seq < 0 {
		return 0, 0, false
	}
	return no, seq, true
}

// canonID is a request id's key: JSON-RPC ids match by value, so 1, 1.0
// and 1e0 are one id and "1" is another.
func canonID(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	if raw[0] == '"' {
		if n := len(raw); n >= 2 && raw[n-1] == '"' && bytes.IndexByte(raw[1:n-1], '\\') < 0 && utf8.Valid(raw) {
			return "s" + string(raw[1:n-1]) // no escapes: the bytes are the value
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return "s" + s
		}
		return "r" + string(raw)
	}
	if isPlainInt(raw) {
		return "n" + string(raw)
	}
	if f, err := strconv.ParseFloat(string(raw), 64); err == nil {
		if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return "n" + strconv.FormatInt(int64(f), 10)
		}
		return "n" + strconv.FormatFloat(f, 'g', -1, 64)
	}
	return "r" + string(raw)
}

// isPlainInt reports whether raw is an integer written as FormatInt writes
// it (no '+', no leading zero, no "-0"), short enough to be exact.
func isPlainInt(raw []byte) bool {
	d := raw
	if d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 15 || (d[0] == '0' && len(raw) > 1) {
		return false
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
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
