package validate

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// RuleClientFetch: a URL the client fetches or opens for the server (an
// icon's src, which clients that show icons fetch unasked; a URL-mode
// elicitation's url, which the client opens once the user agrees) is a
// network destination of the server's, reached from the client's side:
// a server that the policy, or the kernel, keeps off the network would
// otherwise send what it read there in the URL. An icon whose src is not
// a data: URI or a URL the policy admits (Options.Fetch) is removed from
// what the client gets, and said on stderr; an elicitation whose url is
// outside the policy is refused.
const RuleClientFetch = "server_message.client_fetch"

// fetchReason says why the client may not fetch uri for the server, or ""
// when it may: a data: URI is no fetch; http(s) and file: URIs are judged
// by o.Fetch (nil: admitted); any other scheme is refused.
func (o *Options) fetchReason(ctx context.Context, uri string) string {
	scheme, _, ok := strings.Cut(uri, ":")
	switch strings.ToLower(scheme) {
	case "data":
		return ""
	case "http", "https", "file":
		if !ok || o.Fetch == nil {
			return ""
		}
		return o.Fetch(ctx, uri)
	}
	return fmt.Sprintf("%q is not a data:, http(s) or file: URI", uri)
}

// withoutForeignIcons returns v (a JSON value the Scanner accepted) with
// every icon the client may not fetch removed: each element of an "icons"
// array, at any depth, whose "src" fetchReason refuses. It returns v
// itself when none is, and the src and reason of each one removed.
func (o *Options) withoutForeignIcons(ctx context.Context, v []byte) ([]byte, []string) {
	var removed []string
	out := o.rewriteIcons(ctx, v, &removed)
	return out, removed
}

func (o *Options) rewriteIcons(ctx context.Context, v []byte, removed *[]string) []byte {
	var parts []jsonrpc.Span // the spans replaced, in order
	var repl [][]byte
	visit := func(key string, val jsonrpc.Span) {
		in := val.In(v)
		var out []byte
		if key == "icons" && in[0] == '[' {
			out, _, _ = jsonrpc.FilterMember(wrapIcons(in), "icons", func(icon []byte) bool {
				src := jsonrpc.Member(icon, "src")
				if !src.Present() || icon[src.Off] != '"' {
					return true // no URL to fetch
				}
				uri := jsonrpc.Unquote(src.In(icon))
				if reason := o.fetchReason(ctx, uri); reason != "" {
					*removed = append(*removed, uri+" ("+reason+")")
					return false
				}
				return true
			})
			out = out[len(`{"icons":`) : len(out)-1]
		} else if in[0] == '{' || in[0] == '[' {
			out = o.rewriteIcons(ctx, in, removed)
		}
		if out != nil && string(out) != string(in) {
			parts, repl = append(parts, val), append(repl, out)
		}
	}
	switch {
	case len(v) > 0 && v[0] == '{':
		jsonrpc.Members(v, func(k string, val jsonrpc.Span) bool { visit(k, val); return true })
	case len(v) > 0 && v[0] == '[':
		jsonrpc.Elements(v, func(el jsonrpc.Span) bool { visit("", el); return true })
	}
	if len(parts) == 0 {
		return v
	}
	out := make([]byte, 0, len(v))
	at := 0
	for i, p := range parts {
		out = append(append(out, v[at:p.Off]...), repl[i]...)
		at = p.End
	}
	return append(out, v[at:]...)
}

// iconsKey is the member whose elements are icons (what the layers judge
// is canonical: the key is not escaped).
var iconsKey = []byte(`"icons"`)

// wrapIcons makes an icons array an object's member, for FilterMember.
func wrapIcons(arr []byte) []byte {
	return append(append([]byte(`{"icons":`), arr...), '}')
}

// icons removes from a result the icons the client may not fetch, said on
// stderr and in the audit log.
func (s *session) icons(ctx context.Context, req *guard.Request, resp *guard.Response) *guard.Response {
	if resp == nil || resp.Error != nil || !bytes.Contains(resp.Result, iconsKey) {
		return resp
	}
	out, removed := s.o.withoutForeignIcons(ctx, resp.Result)
	if len(removed) == 0 {
		return resp
	}
	for _, r := range removed {
		reason := fmt.Sprintf("icon %s removed from %s: the client would fetch it for the server", r, resultName(req))
		s.log(req, audit.Rewrite, RuleClientFetch, req.Method, reason)
		guard.Logf(ctx, "L2 rule %s: %s", RuleClientFetch, reason)
	}
	c := *resp
	c.Result = out
	return &c
}

// fetchesInMessage judges what the server's own message makes the client
// fetch: a URL-mode elicitation's url (refused, with the reason, when the
// policy does not admit it), and icons (removed). It returns the message,
// rewritten or not, or a refusal reason.
func (o *Options) fetchesInMessage(ctx context.Context, m *guard.ServerMessage) (*guard.ServerMessage, string) {
	if m.Method == "elicitation/create" {
		if u := jsonrpc.Member(m.Params, "url"); u.Present() && m.Params[u.Off] == '"' {
			uri := jsonrpc.Unquote(u.In(m.Params))
			if reason := o.fetchReason(ctx, uri); reason != "" {
				return m, fmt.Sprintf("the server's elicitation asks the client to open %s: %s", uri, reason)
			}
		}
	}
	if !bytes.Contains(m.Params, iconsKey) {
		return m, ""
	}
	out, removed := o.withoutForeignIcons(ctx, m.Params)
	if len(removed) == 0 {
		return m, ""
	}
	for _, r := range removed {
		reason := fmt.Sprintf("icon %s removed from the server's %s: the client would fetch it for the server", r, m.Method)
		o.Audit.Log(audit.Event{Server: o.Server, Config: o.Config, Layer: Layer, Rule: RuleClientFetch,
			Decision: audit.Rewrite, Target: m.Method, Reason: reason})
		guard.Logf(ctx, "L2 rule %s: %s", RuleClientFetch, reason)
	}
	c := *m
	c.Params = out
	return &c, ""
}
