package gateway

import (
	"encoding/json"
	"fmt"
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
	bodyRead bool        // the whole body was read
	ctl      *http.ResponseController
}

// rc is the response's controller (deadlines, flushes).
func (q *request) rc() *http.ResponseController {
	if q.ctl == nil {
		q.ctl = http.NewResponseController(q.w)
	}
	return q.ctl
}

// anonymous is the caller when gateway.json lists no tokens.
var anonymous = &principal{name: "anonymous", servers: []string{"*"}}

// serve checks who is asking and from where before anything reaches a
// server: a foreign Origin and a server the token does not grant get 403,
// a missing or unknown token 401.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, server string) {
	q := &request{w: w, r: r, server: server, bodyRead: r.Body == nil || r.Body == http.NoBody}
	q.event = audit.Event{Server: server, Rule: "http", Reason: r.Method}
	defer func() { g.event(q.event) }()
	if !g.checkOrigin(q) {
		return
	}
	if r.Method == http.MethodOptions {
		g.preflight(q)
		return
	}
	who, ok := g.checkAuth(q)
	if !ok {
		return
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
		w.Header().Set("Allow", "GET, POST, DELETE, OPTIONS")
		q.deny(http.StatusMethodNotAllowed, "method", "method "+r.Method+" not allowed")
	}
}

// checkOrigin refuses what a page of another site could send (one Origin,
// allowed; a Host of this machine on loopback) and gives an origin listed
// in allowed_origins the CORS headers that let it read the answer.
func (g *Gateway) checkOrigin(q *request) bool {
	r := q.r
	origins := r.Header.Values("Origin")
	if len(origins) > 1 {
		q.deny(http.StatusForbidden, "origin", "more than one Origin header")
		return false
	}
	o := r.Header.Get("Origin")
	if !g.originAllowed(o) {
		q.deny(http.StatusForbidden, "origin", fmt.Sprintf("origin %q is not allowed", o))
		return false
	}
	if !g.hostAllowed(r.Host) {
		q.deny(http.StatusForbidden, "origin", fmt.Sprintf("host %q is not allowed", r.Host))
		return false
	}
	if o != "" && g.origins[canonOrigin(o)] {
		h := q.w.Header()
		h.Set("Access-Control-Allow-Origin", o)
		h.Set("Access-Control-Expose-Headers", HeaderSession+", "+HeaderProtocol+", WWW-Authenticate")
		h.Add("Vary", "Origin")
	}
	return true
}

// corsHeaders are the request headers a browser may send with CORS.
const corsHeaders = "Authorization, Content-Type, Accept, Last-Event-ID, " + HeaderSession + ", " + HeaderProtocol

// preflight answers a CORS preflight: yes for an origin in
// allowed_origins, no for any other (a page the gateway does not know
// gets nothing it could not send without CORS).
func (g *Gateway) preflight(q *request) {
	o := q.r.Header.Get("Origin")
	if o == "" {
		q.w.Header().Set("Allow", "GET, POST, DELETE, OPTIONS")
		q.allow("")
		q.w.WriteHeader(http.StatusNoContent)
		return
	}
	if !g.origins[canonOrigin(o)] {
		q.deny(http.StatusForbidden, "origin", fmt.Sprintf("origin %q is not in allowed_origins", o))
		return
	}
	h := q.w.Header()
	h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
	h.Set("Access-Control-Allow-Headers", corsHeaders)
	h.Set("Access-Control-Max-Age", "600")
	q.allow("preflight")
	q.w.WriteHeader(http.StatusNoContent)
}

// checkAuth finds the caller: with tokens or OAuth configured, the bearer
// token of the one Authorization header (scheme in any case, RFC 6750),
// and its grant of the server asked for.
func (g *Gateway) checkAuth(q *request) (*principal, bool) {
	if !g.cfg.Authenticated() {
		return anonymous, true
	}
	r := q.r
	var who *principal
	reason := "no valid bearer token"
	if vals := r.Header.Values("Authorization"); len(vals) == 1 {
		scheme, secret, _ := strings.Cut(strings.TrimSpace(vals[0]), " ")
		if strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(secret) != "" {
			var err error
			if who, err = g.authenticate(r.Context(), strings.TrimSpace(secret)); err != nil {
				reason = err.Error()
			}
		}
	} else if len(vals) > 1 {
		reason = "more than one Authorization header"
	}
	if who == nil {
		q.w.Header().Set("WWW-Authenticate", g.challenge())
		q.deny(http.StatusUnauthorized, "auth", reason)
		return nil, false
	}
	if c, ok := r.Context().Value(connKey{}).(*countedConn); ok {
		c.authenticated()
	}
	q.event.Identity = who.name
	if q.server != "" && !who.grants(q.server) {
		q.deny(http.StatusForbidden, "grant", fmt.Sprintf("%s may not reach server %s", who.name, q.server))
		return nil, false
	}
	if q.server == "" && len(g.granted(who)) == 0 {
		q.deny(http.StatusForbidden, "grant", fmt.Sprintf("%s may reach no server", who.name))
		return nil, false
	}
	return who, true
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

// deny answers with an HTTP error and records why. A refused caller's
// connection is closed, and so is one whose body was not read: it cannot
// be kept to send more.
func (q *request) deny(status int, rule, reason string) {
	q.event.Decision = audit.Deny
	q.event.Rule = rule
	q.event.Reason = fmt.Sprintf("%s: %d %s", q.event.Reason, status, reason)
	if !q.bodyRead || status == http.StatusUnauthorized || status == http.StatusForbidden {
		q.closeConn()
	}
	http.Error(q.w, reason, status)
}

// rpcError answers with a JSON-RPC error in an HTTP error status.
func (q *request) rpcError(status int, id json.RawMessage, code int, msg string) {
	q.event.Decision = audit.Deny
	q.event.Reason = fmt.Sprintf("%s: %d %s", q.event.Reason, status, msg)
	if !q.bodyRead {
		q.closeConn()
	}
	b, _ := jsonrpc.NewError(id, code, msg, nil).Marshal()
	q.w.Header().Set("Content-Type", "application/json")
	q.w.WriteHeader(status)
	q.w.Write(b)
}

// closeConn closes the connection after this response, without reading
// what is left of the body first (net/http would wait for up to 256 KiB
// of it, at whatever pace the client sends).
func (q *request) closeConn() {
	q.w.Header().Set("Connection", "close")
	if !q.bodyRead {
		q.rc().SetReadDeadline(time.Now())
	}
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
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			mt = strings.TrimSpace(mt)
			if strings.EqualFold(mt, t) || mt == "*/*" {
				return true
			}
			if major, ok := strings.CutSuffix(mt, "/*"); ok && len(t) > len(major) && strings.EqualFold(t[:len(major)+1], major+"/") {
				return true
			}
		}
	}
	return false
}

// checkProtocol refuses a request whose MCP-Protocol-Version the gateway
// does not speak, or that is newer than the version its session agreed on:
// the client claims what the session did not negotiate (the
// specification's 400 for an invalid version). An older version is served,
// as the reference server serves it (the conformance suite sends
// 2025-03-26, what a request without the header means, on sessions that
// agreed on a newer one); none means the session's.
func checkProtocol(q *request, s *session) bool {
	vals := q.r.Header.Values(HeaderProtocol)
	if len(vals) == 0 {
		return true
	}
	v := vals[0]
	switch {
	case len(vals) > 1:
		q.deny(http.StatusBadRequest, "protocol", "more than one MCP-Protocol-Version header")
	case !supportedProtocol(v):
		q.deny(http.StatusBadRequest, "protocol", fmt.Sprintf("unsupported MCP-Protocol-Version %q", v))
	case s.version() != "" && v > s.version():
		q.deny(http.StatusBadRequest, "protocol", fmt.Sprintf("MCP-Protocol-Version %q is newer than the session's %q", v, s.version()))
	default:
		return true
	}
	return false
}

// session finds the request's session: 400 without the header, 404 for an
// unknown or ended one (the client then starts a new session), 403 when it
// belongs to another identity.
func (g *Gateway) session(q *request) *session {
	ids := q.r.Header.Values(HeaderSession)
	if len(ids) > 1 {
		q.deny(http.StatusBadRequest, "session", "more than one Mcp-Session-Id header")
		return nil
	}
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
	if !checkProtocol(q, s) {
		return nil
	}
	return s
}
