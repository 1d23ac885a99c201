package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// Header names of the Streamable HTTP transport.
const (
	HeaderSession  = "Mcp-Session-Id"
	HeaderProtocol = "Mcp-Protocol-Version"
)

// supportedProtocol reports whether the gateway speaks MCP version v's
// Streamable HTTP; a request naming another in MCP-Protocol-Version gets 400.
func supportedProtocol(v string) bool {
	switch v {
	case "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25":
		return true
	}
	return false
}

// keepAlive is how often an idle SSE stream gets a comment, so that
// intermediaries do not time it out.
const keepAlive = 25 * time.Second

// Handler serves /servers/<name>/mcp for each server and /mcp, the
// aggregate endpoint.
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/servers/{name}/mcp", func(w http.ResponseWriter, r *http.Request) {
		g.serve(w, r, r.PathValue("name"))
	})
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) { g.serve(w, r, g.opt.Direct) })
	if g.cfg.OAuth != nil {
		mux.HandleFunc("GET "+metadataPath, g.metadata)
	}
	return mux
}

// request is what the gateway knows of one HTTP request once it is let in.
type request struct {
	w        http.ResponseWriter
	r        *http.Request
	server   string // "" for the aggregate endpoint
	identity string
	who      *principal
	event    audit.Event // the audit record, filled as the request goes
}

// serve checks who is asking and from where before anything reaches a
// server: a foreign Origin and a server the token does not grant get 403,
// a missing or unknown token 401.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, server string) {
	q := &request{w: w, r: r, server: server}
	q.event = audit.Event{Server: server, Rule: "http", Reason: r.Method}
	defer func() { g.event(q.event) }()

	if o := r.Header.Get("Origin"); !g.originAllowed(o) {
		q.deny(http.StatusForbidden, "origin", fmt.Sprintf("origin %q is not allowed", o))
		return
	}
	if !g.hostAllowed(r.Host) {
		q.deny(http.StatusForbidden, "origin", fmt.Sprintf("host %q is not allowed", r.Host))
		return
	}
	who := &principal{name: "anonymous", servers: []string{"*"}}
	if g.cfg.Authenticated() {
		secret, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		var err error
		who = nil
		if ok {
			who, err = g.authenticate(r.Context(), strings.TrimSpace(secret))
		}
		if who == nil {
			reason := "no valid bearer token"
			if err != nil {
				reason = err.Error()
			}
			w.Header().Set("WWW-Authenticate", g.challenge())
			q.deny(http.StatusUnauthorized, "auth", reason)
			return
		}
		q.event.Identity = who.name
		if server != "" && !who.grants(server) {
			q.deny(http.StatusForbidden, "grant", fmt.Sprintf("%s may not reach server %s", who.name, server))
			return
		}
		if server == "" && len(g.granted(who)) == 0 {
			q.deny(http.StatusForbidden, "grant", fmt.Sprintf("%s may reach no server", who.name))
			return
		}
	}
	q.identity, q.who = who.name, who
	q.event.Identity = q.identity
	if server != "" && g.cfg.Servers[server] == nil {
		q.deny(http.StatusNotFound, "route", "no server "+server)
		return
	}
	switch r.Method {
	case http.MethodPost:
		g.post(q)
	case http.MethodGet:
		g.get(q)
	case http.MethodDelete:
		g.delete(q)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		q.deny(http.StatusMethodNotAllowed, "method", "method "+r.Method+" not allowed")
	}
}

// granted lists the servers who may reach.
func (g *Gateway) granted(who *principal) []string {
	var out []string
	for _, name := range g.cfg.names() {
		if who.grants(name) {
			out = append(out, name)
		}
	}
	return out
}

// deny answers with an HTTP error and records why.
func (q *request) deny(status int, rule, reason string) {
	q.event.Decision = audit.Deny
	q.event.Rule = rule
	q.event.Reason = fmt.Sprintf("%s: %d %s", q.event.Reason, status, reason)
	http.Error(q.w, reason, status)
}

// rpcError answers with a JSON-RPC error in an HTTP error status.
func (q *request) rpcError(status int, id json.RawMessage, code int, msg string) {
	q.event.Decision = audit.Deny
	q.event.Reason = fmt.Sprintf("%s: %d %s", q.event.Reason, status, msg)
	b, _ := jsonrpc.NewError(id, code, msg, nil).Marshal()
	q.w.Header().Set("Content-Type", "application/json")
	q.w.WriteHeader(status)
	q.w.Write(b)
}

func (q *request) allow(detail string) {
	q.event.Decision = audit.Allow
	if detail != "" {
		q.event.Reason += " " + detail
	}
}

// accepts reports whether the Accept header admits media type t.
func accepts(r *http.Request, t string) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			if mt == t || mt == "*/*" || (strings.HasSuffix(mt, "/*") && strings.HasPrefix(t, strings.TrimSuffix(mt, "*"))) {
				return true
			}
		}
	}
	return false
}

// session finds the request's session: 400 without the header, 404 for an
// unknown or ended one (the client then starts a new session), 403 when it
// belongs to another identity.
func (g *Gateway) session(q *request) *session {
	id := q.r.Header.Get(HeaderSession)
	if id == "" {
		q.deny(http.StatusBadRequest, "session", "Mcp-Session-Id header is required")
		return nil
	}
	s := g.lookup(id)
	if s == nil || s.server != q.server || s.ended() {
		q.deny(http.StatusNotFound, "session", "session not found")
		return nil
	}
	if s.identity != q.identity {
		q.deny(http.StatusForbidden, "session", "session belongs to another identity")
		return nil
	}
	if v := q.r.Header.Get(HeaderProtocol); v != "" && !supportedProtocol(v) {
		q.deny(http.StatusBadRequest, "protocol", fmt.Sprintf("unsupported MCP-Protocol-Version %q", v))
		return nil
	}
	return s
}

func (g *Gateway) post(q *request) {
	r, w := q.r, q.w
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		q.deny(http.StatusUnsupportedMediaType, "request", "Content-Type must be application/json")
		return
	}
	sse := accepts(r, "text/event-stream")
	if !sse && !accepts(r, "application/json") {
		q.deny(http.StatusNotAcceptable, "request", "Accept must admit application/json or text/event-stream")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.cfg.Limits.maxMessage()))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			q.rpcError(http.StatusRequestEntityTooLarge, nil, jsonrpc.CodeTooLarge,
				fmt.Sprintf("mcpguard: message over %d bytes", tooBig.Limit))
			return
		}
		q.deny(http.StatusBadRequest, "request", "read body: "+err.Error())
		return
	}
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		q.rpcError(http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "mcpguard: JSON-RPC batches are not supported")
		return
	}
	h, err := jsonrpc.Peek(body)
	if err != nil {
		q.rpcError(http.StatusBadRequest, h.ID, jsonrpc.ErrorCode(err), "mcpguard: invalid message: "+err.Error())
		return
	}
	// One message per line on the server's stdio: a pretty-printed body is
	// compacted, which changes whitespace only.
	if bytes.ContainsAny(body, "\r\n") {
		var c bytes.Buffer
		if err := json.Compact(&c, body); err != nil {
			q.rpcError(http.StatusBadRequest, h.ID, jsonrpc.CodeParseError, "mcpguard: invalid message: "+err.Error())
			return
		}
		body = c.Bytes()
	}
	q.event.Reason += " " + h.Method
	if h.Method == "tools/call" {
		q.event.Tool = toolName(body)
	}
	if h.Kind == jsonrpc.KindRequest && h.Method == "initialize" && r.Header.Get(HeaderSession) == "" {
		g.initialize(q, h, body, sse)
		return
	}
	s := g.session(q)
	if s == nil {
		return
	}
	s.busy.Add(1)
	defer s.busy.Add(-1)
	defer s.touch()
	s.touch()
	if h.Kind != jsonrpc.KindRequest {
		if err := s.handle(h, body); err != nil {
			q.deny(http.StatusNotFound, "session", "session ended: "+err.Error())
			return
		}
		q.allow("")
		w.WriteHeader(http.StatusAccepted)
		return
	}
	st := newStream(canonID(h.ID), sse)
	st.progress = progressToken(body, false)
	if !s.out.open(st) {
		if s.ended() {
			q.deny(http.StatusNotFound, "session", "session not found")
			return
		}
		q.rpcError(http.StatusBadRequest, h.ID, jsonrpc.CodeInvalidRequest, "mcpguard: a request with this id is already in flight")
		return
	}
	defer s.out.drop(st)
	q.allow("")
	if err := s.handle(h, body); err != nil {
		b, _ := jsonrpc.NewError(h.ID, jsonrpc.CodeServerExited, "mcpguard: "+err.Error(), nil).Marshal()
		s.out.respond(st.reqID, b)
	}
	g.relay(q, s, st, "")
}

// relay writes what arrives on st until its response went out, the client
// left or the session ended. sessionID, when set, goes in the header.
func (g *Gateway) relay(q *request, s *session, st *stream, sessionID string) {
	w := q.w
	rc := http.NewResponseController(w)
	if sessionID != "" {
		w.Header().Set(HeaderSession, sessionID)
	}
	if st.sse {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		rc.Flush()
	}
	var tick <-chan time.Time
	if st.sse {
		t := time.NewTicker(keepAlive)
		defer t.Stop()
		tick = t.C
	}
	for {
		msgs, final := s.out.takeFinal(st)
		for _, m := range msgs {
			if !st.sse {
				w.Header().Set("Content-Type", "application/json")
				w.Write(m)
				return
			}
			if _, err := fmt.Fprintf(w, "event: message\ndata: %s\n\n", m); err != nil {
				return
			}
		}
		if len(msgs) > 0 {
			rc.Flush()
		}
		if final {
			return
		}
		select {
		case <-st.wake:
		case <-tick:
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
				return
			}
			rc.Flush()
		case <-q.r.Context().Done():
			return
		case <-s.done:
			if st.reqID == "" { // the GET stream: nothing more will come
				msgs, _ := s.out.takeFinal(st)
				for _, m := range msgs {
					fmt.Fprintf(w, "event: message\ndata: %s\n\n", m)
				}
				return
			}
		}
	}
}

// initialize starts a session: its server (or servers) start, the client's
// initialize goes through, and the session's id goes back with a result. A
// failed initialize ends the session at once.
func (g *Gateway) initialize(q *request, h jsonrpc.Header, body []byte, sse bool) {
	s := g.newSession(q.server, q.identity)
	if err := g.addSession(s); err != nil {
		q.rpcError(http.StatusServiceUnavailable, h.ID, jsonrpc.CodeInternalError, "mcpguard: "+err.Error())
		return
	}
	var err error
	if q.server == "" {
		err = s.startAggregate(g.granted(q.who))
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
	// a header, and only with a result.
	st := newStream(canonID(h.ID), false)
	s.out.open(st)
	defer s.out.drop(st)
	if err := s.handle(h, body); err != nil {
		b, _ := jsonrpc.NewError(h.ID, jsonrpc.CodeServerExited, "mcpguard: "+err.Error(), nil).Marshal()
		s.out.respond(st.reqID, b)
	}
	var resp []byte
	for resp == nil {
		msgs, final := s.out.takeFinal(st)
		if final && len(msgs) > 0 {
			resp = msgs[len(msgs)-1]
			break
		}
		select {
		case <-st.wake:
		case <-q.r.Context().Done():
			s.end("client left during initialize")
			return
		}
	}
	var m struct {
		Result *struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if json.Unmarshal(resp, &m) != nil || m.Result == nil {
		s.end("initialize failed")
		q.event.Decision = audit.Deny
		q.event.Reason += " initialize failed"
		q.w.Header().Set("Content-Type", "application/json")
		q.w.Write(resp)
		return
	}
	s.protocol.Store(m.Result.ProtocolVersion)
	q.allow("new session " + s.String())
	q.w.Header().Set(HeaderSession, s.id)
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

// get opens the session's stream for server-initiated messages.
func (g *Gateway) get(q *request) {
	if !accepts(q.r, "text/event-stream") {
		q.deny(http.StatusNotAcceptable, "request", "Accept must admit text/event-stream")
		return
	}
	s := g.session(q)
	if s == nil {
		return
	}
	st := newStream("", true)
	if !s.out.openGet(st) {
		q.deny(http.StatusConflict, "session", "the session already has a GET stream")
		return
	}
	s.busy.Add(1)
	defer s.busy.Add(-1)
	defer s.touch()
	defer s.out.drop(st)
	q.allow("stream")
	g.relay(q, s, st, "")
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

// toolName is params.name of a tools/call.
func toolName(body []byte) string {
	var m struct {
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	json.Unmarshal(body, &m)
	return m.Params.Name
}
