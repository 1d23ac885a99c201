package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
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
		return e.checkContent(t, map[string]any{"uri": *p.URI}, nil)
	case "prompts/get":
		var p struct {
			Arguments map[string]any `json:"arguments"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return &Violation{Layer: LayerL1, Rule: RuleParamsMalformed, Target: method,
				Reason: "prompts/get params are not an object"}
		}
		return e.checkLoose(ctx, t, p.Arguments, keysOf(p.Arguments, nil))
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
		keys := append(keysOf(p.Context.Arguments, nil), p.Argument.Name)
		keys = keysOf(p.Argument.Value, keys)
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
		return e.checkLoose(ctx, t, args, keys)
	}
	return nil
}

// keysOf appends the member names of every object in v to out, sorted at
// each level: prompt and completion arguments are named by the caller.
func keysOf(v any, out []string) []string {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(x) {
			out = keysOf(x[k], append(out, k))
		}
	case []any:
		for _, it := range x {
			out = keysOf(it, out)
		}
	}
	return out
}

// checkResourceURI confines one resource URI: what it names (a file, a
// destination, a server's own scheme) and every component of its query
// and fragment (uriParts), which a server that reads resources may honour
// as well ("notes://x?file=/etc/passwd").
func (e *Engine) checkResourceURI(ctx context.Context, t *tool, uri string) *Violation {
	read := &argRule{name: "uri", Arg: Arg{Kind: KindPath, Access: Read}}
	if validate.IsFileURI(uri) || !strings.Contains(uri, ":") {
		if bad := e.checkPath(t, read, uri); bad != nil {
			return bad
		}
		return e.checkURIParts(ctx, t, read, uri)
	}
	scheme, _, _ := strings.Cut(uri, ":")
	switch strings.ToLower(scheme) {
	case "http", "https", "ws", "wss", "ftp":
		d, err := validate.ParseURL(uri, []string{"http", "https", "ws", "wss", "ftp"})
		if err != nil {
			return urlViolation("uri", err)
		}
		if bad := e.checkDest(ctx, t, d, RuleURLHost); bad != nil {
			return bad
		}
		return e.checkURIParts(ctx, t, read, uri)
	}
	// A scheme of the server's own ("notes://", "repo://"): many servers
	// map it onto files, so traversal in it is refused, raw or encoded,
	// and an absolute path in it is judged as the path it is.
	return e.checkSchemeURI(ctx, t, read, uri)
}

// uriParts returns the components of a URI's query (each name and each
// value, "a=1&b" and ";"-separated alike) and its fragment, as sent: a
// server that reads a URI may use any of them, decoded (the caller judges
// the decoded forms too).
func uriParts(uri string) []string {
	rest, frag, _ := strings.Cut(uri, "#")
	var out []string
	if _, q, ok := strings.Cut(rest, "?"); ok {
		for kv := range strings.FieldsFuncSeq(q, func(r rune) bool { return r == '&' || r == ';' }) {
			k, v, _ := strings.Cut(kv, "=")
			out = append(out, k, v)
		}
	}
	out = append(out, frag)
	return slices.DeleteFunc(out, func(s string) bool { return s == "" })
}

// checkURIParts judges each component of uri's query and fragment as a
// value the argument model reads (a path with a's access, a URL, a URI;
// free text otherwise), in every form a server may decode it to.
func (e *Engine) checkURIParts(ctx context.Context, t *tool, a *argRule, uri string) *Violation {
	for _, part := range uriParts(uri) {
		bad := e.inForms(part, func(f string) *Violation {
			r := readValue(f, false)
			if r == valueNone {
				return nil
			}
			pa := *a
			return e.judgeAs(ctx, t, &pa, f, r)
		})
		if bad != nil {
			bad.Reason += fmt.Sprintf(" (a component of the URI %q)", uri)
			return bad
		}
	}
	return nil
}

// checkLoose checks argument values that no schema types (prompt and
// completion arguments): a value that reads as a file (absolute, "~", a
// file: URI, or one with a ".." segment) is confined to the read roots, a
// value that reads as an http(s) URL to the network allow-list; then
// the content checks run over all of them. keys (the argument names the
// caller chose) are judged the same way.
func (e *Engine) checkLoose(ctx context.Context, t *tool, args map[string]any, keys []string) *Violation {
	for _, k := range keys {
		if bad := e.checkLooseValue(ctx, t, "a key", k); bad != nil {
			bad.Arg = "a key"
			return bad
		}
	}
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
	return e.checkContent(t, args, keys)
}

func (e *Engine) checkLooseValue(ctx context.Context, t *tool, name, s string) *Violation {
	return e.inForms(s, func(v string) *Violation { return e.checkLooseOne(ctx, t, name, v) })
}

func (e *Engine) checkLooseOne(ctx context.Context, t *tool, name, s string) *Violation {
	r := readValue(s, false)
	if r == valueNone {
		return nil
	}
	return e.judgeAs(ctx, t, &argRule{name: name, Arg: Arg{Kind: KindPath, Access: Read}}, s, r)
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
