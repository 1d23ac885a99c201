package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/mcpguard/mcpguard/guard/validate"
)

// Rule ids of requests other than tools/call.
const (
	RuleResourceTraversal = "resource.traversal"
	RuleParamsMalformed   = "params.malformed"
)

// CheckedMethods are the client requests other than tools/call that carry
// a path, URL or command to the server, and that CheckRequest judges.
var CheckedMethods = []string{
	"resources/read", "resources/subscribe", "resources/unsubscribe",
	"prompts/get", "completion/complete",
}

// Checks reports whether CheckRequest judges method.
func Checks(method string) bool {
	for _, m := range CheckedMethods {
		if m == method {
			return true
		}
	}
	return false
}

// CheckRequest decides a request other than tools/call against the
// server-wide grants: a resource URI is a file inside the read roots (any
// file: form), a URL inside the network allow-list, or another scheme
// with no traversal in it; a prompt's or a completion's argument values
// that name a file or a URL are confined the same way, and with L2 they
// are scanned for secrets and environment references as tool arguments
// are. It returns nil when the request may go ahead.
func (e *Engine) CheckRequest(ctx context.Context, method string, params json.RawMessage) *Violation {
	t := e.server
	switch method {
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		var p struct {
			URI *string `json:"uri"`
		}
		if err := json.Unmarshal(params, &p); err != nil || p.URI == nil {
			return &Violation{Layer: LayerL1, Rule: RuleParamsMalformed, Target: method,
				Reason: method + " needs params.uri"}
		}
		if v := e.checkResourceURI(ctx, t, *p.URI); v != nil {
			return v
		}
		return e.checkContent(t, map[string]any{"uri": *p.URI})
	case "prompts/get":
		var p struct {
			Arguments map[string]any `json:"arguments"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return &Violation{Layer: LayerL1, Rule: RuleParamsMalformed, Target: method,
				Reason: "prompts/get params are not an object"}
		}
		return e.checkLoose(ctx, t, p.Arguments)
	case "completion/complete":
		var p struct {
			Ref struct {
				Type string `json:"type"`
				URI  string `json:"uri"`
			} `json:"ref"`
			Argument struct {
				Name  string `json:"name"`
				Value any    `json:"value"`
			} `json:"argument"`
			Context struct {
				Arguments map[string]any `json:"arguments"`
			} `json:"context"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return &Violation{Layer: LayerL1, Rule: RuleParamsMalformed, Target: method,
				Reason: "completion/complete params are not an object"}
		}
		args := map[string]any{}
		for k, v := range p.Context.Arguments {
			args["context."+k] = v
		}
		args["argument:"+p.Argument.Name] = p.Argument.Value
		if v, ok := p.Argument.Value.(string); ok && p.Ref.Type == "ref/resource" && p.Ref.URI != "" {
			// The server completes the value inside the template's URI
			// ("file:///{path}" with "etc/passwd" is file:///etc/passwd).
			if uri, ok := expandTemplate(p.Ref.URI, p.Argument.Name, v); ok {
				if bad := e.checkResourceURI(ctx, t, uri); bad != nil {
					bad.Arg = p.Argument.Name
					return bad
				}
			}
		}
		return e.checkLoose(ctx, t, args)
	}
	return nil
}

// checkResourceURI confines one resource URI.
func (e *Engine) checkResourceURI(ctx context.Context, t *tool, uri string) *Violation {
	read := &argRule{name: "uri", Arg: Arg{Kind: KindPath, Access: Read}}
	if validate.IsFileURI(uri) || !strings.Contains(uri, ":") {
		return e.checkPath(t, read, uri)
	}
	scheme, rest, _ := strings.Cut(uri, ":")
	switch strings.ToLower(scheme) {
	case "http", "https", "ws", "wss", "ftp":
		d, err := validate.ParseURL(uri, []string{"http", "https", "ws", "wss", "ftp"})
		if err != nil {
			return urlViolation("uri", err)
		}
		return e.checkDest(ctx, t, d, RuleURLHost)
	}
	// A scheme of the server's own ("notes://", "repo://"): many servers
	// map it onto files, so traversal in it is refused, raw or encoded.
	dec := rest
	for range 3 {
		u, err := url.PathUnescape(dec)
		if err != nil || u == dec {
			break
		}
		dec = u
	}
	for _, s := range []string{rest, dec} {
		s = strings.ReplaceAll(s, `\`, "/")
		for seg := range strings.SplitSeq(s, "/") {
			if seg == ".." {
				return &Violation{Layer: LayerL2, Rule: RuleResourceTraversal, Target: uri,
					Reason: fmt.Sprintf("resource URI %q climbs out of its tree with ..", uri)}
			}
		}
		if strings.IndexByte(s, 0) >= 0 {
			return &Violation{Layer: LayerL2, Rule: RulePathNUL, Target: uri,
				Reason: fmt.Sprintf("resource URI %q carries a NUL byte", uri)}
		}
	}
	return nil
}

// checkLoose checks argument values that no schema types (prompt and
// completion arguments): a value that reads as a file (absolute, "~", a
// file: URI, or one with a ".." segment) is confined to the read roots, a
// value that reads as an http(s) URL to the network allow-list; then
// the content checks run over all of them.
func (e *Engine) checkLoose(ctx context.Context, t *tool, args map[string]any) *Violation {
	names := make([]string, 0, len(args))
	for k := range args {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		var bad *Violation
		walk(args[name], func(s string) bool {
			bad = e.checkLooseValue(ctx, t, name, s)
			return bad == nil
		})
		if bad != nil {
			bad.Arg = name
			return bad
		}
	}
	return e.checkContent(t, args)
}

func (e *Engine) checkLooseValue(ctx context.Context, t *tool, name, s string) *Violation {
	s = strings.TrimSpace(s)
	low := strings.ToLower(s)
	switch {
	case validate.IsFileURI(s), strings.HasPrefix(s, "/"), strings.HasPrefix(s, "~"), hasDotDotSeg(s):
		return e.checkPath(t, &argRule{name: name, Arg: Arg{Kind: KindPath, Access: Read}}, s)
	case strings.HasPrefix(low, "http://"), strings.HasPrefix(low, "https://"):
		d, err := validate.ParseURL(s, e.schemes)
		if err != nil {
			return urlViolation(name, err)
		}
		return e.checkDest(ctx, t, d, RuleURLHost)
	}
	return nil
}

func hasDotDotSeg(s string) bool {
	s = strings.ReplaceAll(s, `\`, "/")
	for seg := range strings.SplitSeq(s, "/") {
		if seg == ".." {
			return true
		}
	}
	return false
}

// expandTemplate substitutes value for the variable name in an RFC 6570
// URI template ({name}, {+name}, {/name}, {#name}); false when the
// template does not use it.
func expandTemplate(tmpl, name, value string) (string, bool) {
	for _, op := range []string{"", "+", "/", "#"} {
		v := "{" + op + name + "}"
		if strings.Contains(tmpl, v) {
			if op == "/" {
				value = "/" + value
			}
			return strings.ReplaceAll(tmpl, v, value), true
		}
	}
	return "", false
}
