package validate

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
)

// redactListing replaces the secrets in a listing the client's model will
// read (tools/list, prompts/list, resources/list, resources/templates/list:
// descriptions, schemas and their defaults and examples, URIs, any field)
// with [REDACTED:kind], as in results (response.secret, one rewrite event
// naming the kinds). A listing none of whose bytes can hold a secret is
// passed as it is, unread.
func (s *session) redactListing(req *guard.Request, resp *guard.Response) *guard.Response {
	if resp == nil || resp.Error != nil || len(resp.Result) == 0 || !riskyBytes(resp.Result) && !resultAnchors.inFold(resp.Result) {
		return resp
	}
	var v any
	if json.Unmarshal(resp.Result, &v) != nil {
		return resp
	}
	var kinds []string
	v = mapStrings(v, func(str string) string {
		red, k := RedactSecrets(str)
		for _, x := range k {
			if !slices.Contains(kinds, x) {
				kinds = append(kinds, x)
			}
		}
		return red
	})
	if len(kinds) == 0 {
		return resp
	}
	out, err := json.Marshal(v)
	if err != nil {
		return resp
	}
	s.log(req, audit.Rewrite, RuleResponseSecret, req.Method,
		"secrets ("+strings.Join(kinds, ", ")+") redacted from "+req.Method)
	r := *resp
	r.Result = out
	return &r
}

// mapStrings returns v with f applied to every string value (keys are
// names, not text the rules look at).
func mapStrings(v any, f func(string) string) any {
	switch t := v.(type) {
	case string:
		return f(t)
	case map[string]any:
		for k, x := range t {
			t[k] = mapStrings(x, f)
		}
	case []any:
		for i, x := range t {
			t[i] = mapStrings(x, f)
		}
	}
	return v
}
