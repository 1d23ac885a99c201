package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// jsonWindow is how long a request whose client accepts both JSON and SSE
// waits for its response before the gateway opens an SSE stream for it. A
// response that comes first, within the window, goes back as plain JSON; a
// message that comes before it (progress, a log, the server's own request)
// or the window running out opens the stream, whose first event primes
// the client to resume it if the connection breaks.
const jsonWindow = 100 * time.Millisecond

// retryMillis is the SSE retry field: how long a client waits before it
// reconnects to a stream it lost.
const retryMillis = 1000

// primingVersion is the first protocol version whose clients take an SSE
// event with an id and no data (older ones fail on the empty data).
const primingVersion = "2025-11-25"

func (g *Gateway) post(q *request) {
	r := q.r
	if ct := r.Header.Get("Content-Type"); ct != "application/json" && !isJSONType(ct) {
		q.deny(http.StatusUnsupportedMediaType, "request", "Content-Type must be application/json")
		return
	}
	sse := accepts(r, "text/event-stream")
	plain := accepts(r, "application/json")
	if !sse && !plain {
		q.deny(http.StatusNotAcceptable, "request", "Accept must admit application/json or text/event-stream")
		return
	}
	body, ok := g.readBody(q)
	if !ok {
		return
	}
	h, body, ok := parseBody(q, body)
	if !ok {
		return
	}
	if g.audit != nil { // what the gateway's audit log says of the request
		q.event.Reason += " " + h.Method
		if h.Method == "tools/call" {
			q.event.Tool = toolName(body)
		}
	}
	if h.Kind == jsonrpc.KindRequest && h.Method == "initialize" && r.Header.Get(HeaderSession) == "" {
		g.initialize(q, h, body, sse, plain)
		return
	}
	s := g.session(q)
	if s == nil {
		return
	}
	if err := g.admit(s); err != nil {
		q.rpcError(http.StatusTooManyRequests, h.ID, jsonrpc.CodeInternalError, "mcpguard: "+err.Error())
		return
	}
	defer g.release(s)
	s.touch()
	if h.Kind != jsonrpc.KindRequest {
		if err := s.handle(h, body); err != nil {
			q.deny(http.StatusNotFound, "session", "session ended: "+err.Error())
			return
		}
		q.allow("")
		q.w.WriteHeader(http.StatusAccepted)
		return
	}
	st, w, ok := s.out.open(canonID(h.ID), progressToken(body, false), sse)
	if !ok {
		if s.ended() {
			q.deny(http.StatusNotFound, "session", "session not found")
			return
		}
		q.rpcError(http.StatusBadRequest, h.ID, jsonrpc.CodeInvalidRequest, "mcpguard: a request with this id is already in flight")
		return
	}
	q.allow("")
	if err := s.handle(h, body); err != nil {
		b, _ := jsonrpc.NewError(h.ID, jsonrpc.CodeServerExited, "mcpguard: "+err.Error(), nil).Marshal()
		s.out.respond(st.reqID, b)
	}
	mode := modeJSONFirst
	switch {
	case !sse:
		mode = modeJSON
	case !plain:
		mode = modeSSE
	}
	g.relay(q, s, st, w, mode)
}

// isJSONType reports whether a Content-Type is application/json, with
// parameters (a charset) or not.
func isJSONType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// readBody reads a POST's body within max_message and body_timeout: a body
// declared too large is refused before it is read, and one that trickles
// in gets 408 when the time is up (the deadline is the connection's, for
// this body only, so that it does not cut the stream that follows).
func (g *Gateway) readBody(q *request) ([]byte, bool) {
	limit := g.cfg.Limits.maxMessage()
	tooBig := func() {
		q.rpcError(http.StatusRequestEntityTooLarge, nil, jsonrpc.CodeTooLarge, fmt.Sprintf("mcpguard: message over %d bytes", limit))
	}
	if q.r.ContentLength > limit {
		tooBig()
		return nil, false
	}
	rc := q.rc()
	rc.SetReadDeadline(time.Now().Add(g.cfg.Limits.bodyTimeout()))
	var buf bytes.Buffer
	if n := q.r.ContentLength; n > 0 {
		buf.Grow(int(n) + 1)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(q.w, q.r.Body, limit))
	var maxErr *http.MaxBytesError
	switch {
	case err == nil:
		q.bodyRead = true
		rc.SetReadDeadline(time.Time{}) // no deadline on what follows: the stream
		return buf.Bytes(), true
	case errors.As(err, &maxErr):
		tooBig()
	case errors.Is(err, os.ErrDeadlineExceeded):
		q.deny(http.StatusRequestTimeout, "request", "the body did not come within "+g.cfg.Limits.bodyTimeout().String())
	default:
		q.deny(http.StatusBadRequest, "request", "read body: "+err.Error())
	}
	return nil, false
}

// parseBody checks that body is one JSON-RPC message and returns it on one
// line: a pretty-printed body is compacted for the server's stdio framing,
// which changes whitespace only.
func parseBody(q *request, body []byte) (jsonrpc.Header, []byte, bool) {
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		q.rpcError(http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "mcpguard: JSON-RPC batches are not supported")
		return jsonrpc.Header{}, nil, false
	}
	h, err := jsonrpc.Peek(body)
	if err != nil {
		q.rpcError(http.StatusBadRequest, h.ID, jsonrpc.ErrorCode(err), "mcpguard: invalid message: "+err.Error())
		return h, nil, false
	}
	if bytes.ContainsAny(body, "\r\n") {
		var c bytes.Buffer
		if err := json.Compact(&c, body); err != nil {
			q.rpcError(http.StatusBadRequest, h.ID, jsonrpc.CodeParseError, "mcpguard: invalid message: "+err.Error())
			return h, nil, false
		}
		body = c.Bytes()
	}
	return h, body, true
}

// relayMode is how a stream's connection answers.
type relayMode int

const (
	modeJSONFirst relayMode = iota // JSON if the response comes first, else SSE
	modeJSON                       // the client takes JSON only: the response alone
	modeSSE                        // SSE at once, primed (a POST that takes SSE only)
	modeResume                     // SSE at once, not primed (GET, or a resumed stream)
)

// conn writes one stream to one HTTP response.
type conn struct {
	q   *request
	s   *session
	st  *stream
	w   *waiter
	rc  *http.ResponseController
	sse bool // the SSE headers went out
	evs []event
	buf []byte
}

// relay writes what arrives on st until its response went out, the client
// left, the session ended or another connection took the stream over.
func (g *Gateway) relay(q *request, s *session, st *stream, w *waiter, mode relayMode) {
	c := &conn{q: q, s: s, st: st, w: w, rc: q.rc()}
	defer s.out.detach(st, w)
	var window <-chan time.Time
	switch mode {
	case modeJSONFirst:
		t := time.NewTimer(jsonWindow)
		defer t.Stop()
		window = t.C
	case modeSSE, modeResume:
		c.startSSE(mode == modeSSE)
	}
	var tick *time.Ticker
	var ticks <-chan time.Time
	sessionDone, over := s.done, false
	defer func() {
		if tick != nil {
			tick.Stop()
		}
	}()
	for {
		evs, final, lost := s.out.take(st, w, c.evs[:0])
		c.evs = evs
		if lost {
			return
		}
		if len(evs) > 0 {
			if !c.sse && mode != modeJSON {
				if final && len(evs) == 1 {
					c.writeJSON(evs[0].data)
					return
				}
				c.startSSE(true)
			}
			if mode == modeJSON {
				c.writeJSON(evs[len(evs)-1].data)
				return
			}
			if err := c.writeEvents(evs); err != nil {
				return
			}
		}
		if final || over {
			return
		}
		if c.sse && tick == nil {
			tick = time.NewTicker(keepAlive)
			ticks = tick.C
		}
		select {
		case <-w.wake:
		case <-window:
			window = nil
			c.startSSE(true)
		case <-ticks:
			if _, err := io.WriteString(q.w, ": keep-alive\n\n"); err != nil {
				return
			}
			c.rc.Flush()
		case <-q.r.Context().Done():
			return
		case <-sessionDone:
			// What the session's end queued (errors for the requests in
			// flight) is there: one more turn writes it.
			sessionDone, over = nil, true
		}
	}
}

// writeJSON answers with data alone (net/http adds the Content-Length of a
// body written in one piece before the handler returns).
func (c *conn) writeJSON(data []byte) {
	c.q.w.Header()["Content-Type"] = jsonType
	c.q.w.Write(data)
}

var (
	jsonType = []string{"application/json"}
	sseType  = []string{"text/event-stream"}
	noCache  = []string{"no-cache"}
)

// startSSE sends the stream's headers and, for a new stream of a client
// that takes it, the priming event: an id with no data, and the retry
// field, so that the client can resume from the start.
func (c *conn) startSSE(prime bool) {
	if c.sse {
		return
	}
	c.sse = true
	h := c.q.w.Header()
	h["Content-Type"] = sseType
	h["Cache-Control"] = noCache
	c.q.w.WriteHeader(http.StatusOK)
	c.s.out.markResumable(c.st)
	if prime && c.s.version() >= primingVersion {
		b := append(c.buf[:0], "id: "...)
		b = eventID(b, c.st.no, 0)
		b = append(b, "\nretry: "...)
		b = strconv.AppendInt(b, retryMillis, 10)
		b = append(b, "\ndata: \n\n"...)
		c.buf = b
		c.q.w.Write(b)
	}
	c.rc.Flush()
}

// writeEvents writes evs as SSE events with their ids.
func (c *conn) writeEvents(evs []event) error {
	for _, e := range evs {
		b := append(c.buf[:0], "id: "...)
		b = eventID(b, c.st.no, e.seq)
		b = append(b, "\nevent: message\ndata: "...)
		c.buf = b
		if _, err := c.q.w.Write(b); err != nil {
			return err
		}
		if _, err := c.q.w.Write(e.data); err != nil {
			return err
		}
		if _, err := c.q.w.Write(sseEnd); err != nil {
			return err
		}
	}
	return c.rc.Flush()
}

var sseEnd = []byte("\n\n")

// initialize starts a session: its server (or servers) start, the client's
// initialize goes through, and the session's id goes back with a result. A
// failed initialize ends the session at once.
func (g *Gateway) initialize(q *request, h jsonrpc.Header, body []byte, sse, plain bool) {
	s := g.newSession(q.server, q.identity)
	names := []string{q.server}
	if q.server == "" {
		names = g.granted(q.who)
	}
	if err := g.addSession(s, names); err != nil {
		q.rpcError(http.StatusServiceUnavailable, h.ID, jsonrpc.CodeInternalError, "mcpguard: "+err.Error())
		return
	}
	var err error
	if q.server == "" {
		err = s.startAggregate(names)
	} else {
		err = s.startDirect()
	}
	if err != nil {
		s.end(err.Error())
		g.wg.Done()
		q.rpcError(http.StatusInternalServerError, h.ID, jsonrpc.CodeInternalError, "mcpguard: start server: "+err.Error())
		return
	}
	s.busy.Add(1)
	defer s.busy.Add(-1)
	defer s.touch()
	// Wait for the answer before writing anything: the session id goes in
	// a header, and only with a result. Anything else the server sends
	// meanwhile waits for the GET stream.
	st, w, _ := s.out.open(canonID(h.ID), "", false)
	defer s.out.detach(st, w)
	if err := s.handle(h, body); err != nil {
		b, _ := jsonrpc.NewError(h.ID, jsonrpc.CodeServerExited, "mcpguard: "+err.Error(), nil).Marshal()
		s.out.respond(st.reqID, b)
	}
	var resp []byte
	for resp == nil {
		evs, final, _ := s.out.take(st, w, nil)
		if final && len(evs) > 0 {
			resp = evs[len(evs)-1].data
			break
		}
		select {
		case <-w.wake:
		case <-q.r.Context().Done():
			s.end("client left during initialize")
			return
		}
	}
	g.answerInitialize(q, s, resp, sse && !plain)
}

// answerInitialize sends initialize's response: with the session's id when
// it is a result, else the error, ending the session.
func (g *Gateway) answerInitialize(q *request, s *session, resp []byte, sse bool) {
	var m struct {
		Result *struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	ok := json.Unmarshal(resp, &m) == nil && m.Result != nil
	if !ok {
		s.end("initialize failed")
		q.event.Decision = audit.Deny
		q.event.Reason += " initialize failed"
	} else {
		v := m.Result.ProtocolVersion
		s.protocol.Store(&v)
		q.allow("new session " + s.String())
		q.w.Header().Set(HeaderSession, s.id)
	}
	if !sse {
		q.w.Header().Set("Content-Type", "application/json")
		q.w.Write(resp)
		return
	}
	q.w.Header().Set("Content-Type", "text/event-stream")
	q.w.Header().Set("Cache-Control", "no-cache")
	q.w.WriteHeader(http.StatusOK)
	fmt.Fprintf(q.w, "event: message\ndata: %s\n\n", resp)
}

// get opens the session's stream for server-initiated messages, or, with
// Last-Event-ID, resumes a stream the client lost (the GET stream or a
// request's) after the event it names.
func (g *Gateway) get(q *request) {
	if !accepts(q.r, "text/event-stream") {
		q.deny(http.StatusNotAcceptable, "request", "Accept must admit text/event-stream")
		return
	}
	s := g.session(q)
	if s == nil {
		return
	}
	if err := g.admit(s); err != nil {
		q.rpcError(http.StatusTooManyRequests, nil, jsonrpc.CodeInternalError, "mcpguard: "+err.Error())
		return
	}
	defer g.release(s)
	st, w, err := s.out.get, (*waiter)(nil), error(nil)
	if last := q.r.Header.Get("Last-Event-ID"); last != "" {
		no, seq, ok := parseEventID(last)
		if !ok {
			q.deny(http.StatusBadRequest, "session", "Last-Event-ID is not an event id of this gateway")
			return
		}
		st, w, err = s.out.resume(no, seq)
	} else {
		w, err = s.out.openGet(false, 0)
	}
	switch {
	case errors.Is(err, errConflict):
		q.deny(http.StatusConflict, "session", err.Error())
		return
	case errors.Is(err, errUnknownEvent):
		q.deny(http.StatusBadRequest, "session", err.Error())
		return
	case err != nil:
		q.deny(http.StatusNotFound, "session", "session not found")
		return
	}
	q.allow(fmt.Sprintf("stream %d", st.no))
	g.relay(q, s, st, w, modeResume)
}

// delete ends the session.
func (g *Gateway) delete(q *request) {
	s := g.session(q)
	if s == nil {
		return
	}
	q.allow("session " + s.String())
	s.end("session ended by the client")
	q.w.WriteHeader(http.StatusOK)
}
