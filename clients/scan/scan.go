// Package scan judges the definitions the MCP servers of a machine's
// clients offer (tools, prompts, resources, resource templates, the
// instructions of initialize) before a model reads them: each one with L2's
// checks (package validate: poisoning, hidden Unicode, secrets), all of
// them together for what one server says about another's tools and for
// tool names that look alike across servers, and against the digests
// pinned by the scan before (a rug pull between sessions).
package scan

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/mcpguard/mcpguard/guard/validate"
)

// Kinds of definitions.
const (
	Tool         = "tool"
	Prompt       = "prompt"
	Resource     = "resource"
	Template     = "resource template"
	Instructions = "instructions"
)

// Definition is one item a server lists, as it sent it.
type Definition struct {
	Kind string          `json:"kind"`
	Name string          `json:"name"`
	Raw  json.RawMessage `json:"-"`
}

// Server is what one configured server offered.
type Server struct {
	// ID names the server across scans: its client, file and entry.
	ID string `json:"id"`
	// Name is the entry's name in its client's configuration.
	Name string `json:"name"`
	// Group is the client whose model sees this server's definitions
	// beside the others of the group: cross-server checks stay within it.
	Group string       `json:"group"`
	Defs  []Definition `json:"-"`
}

// Severities.
const (
	High   = "high"
	Medium = "medium"
	Info   = "info"
)

// Rules of findings.
const (
	RulePoisoned    = "poisoning"
	RuleHidden      = "hidden_unicode"
	RuleSecret      = "secret"
	RuleCrossServer = "cross_server_reference"
	RuleConfusable  = "confusable_name"
	RuleSameName    = "same_name"
	RuleRugPull     = "rug_pull"
	RuleAdded       = "added"
	RuleRemoved     = "removed"
)

// Finding is one thing the scan found.
type Finding struct {
	Severity string `json:"severity"`
	Rule     string `json:"rule"`
	Server   string `json:"server"`
	Kind     string `json:"kind,omitempty"`
	Name     string `json:"name,omitempty"`
	Detail   string `json:"detail"`
}

// Rank orders severities: high first.
func Rank(sev string) int {
	switch sev {
	case High:
		return 0
	case Medium:
		return 1
	}
	return 2
}

// Judge returns the findings for what the servers offered, given the pins
// of the scan before (nil: a first scan), and the pins to keep: a changed
// definition keeps its old pin until accept is set, so that every scan
// reports it until someone looks.
func Judge(servers []Server, old Pins, accept bool) ([]Finding, Pins) {
	var out []Finding
	for _, s := range servers {
		for _, d := range s.Defs {
			out = append(out, judgeOne(s, d)...)
		}
	}
	groups := map[string][]Server{}
	var order []string
	for _, s := range servers {
		if _, ok := groups[s.Group]; !ok {
			order = append(order, s.Group)
		}
		groups[s.Group] = append(groups[s.Group], s)
	}
	for _, g := range order {
		out = append(out, crossServer(groups[g])...)
	}
	pinned, changes := compare(servers, old, accept)
	out = append(out, changes...)
	sort.SliceStable(out, func(i, j int) bool {
		if a, b := Rank(out[i].Severity), Rank(out[j].Severity); a != b {
			return a < b
		}
		return out[i].Server < out[j].Server
	})
	return out, pinned
}

// text is every string of a definition (keys too), one per line: what the
// model reads of it.
func text(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch t := v.(type) {
		case string:
			b.WriteString(t)
			b.WriteByte('\n')
		case map[string]any:
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				b.WriteString(k)
				b.WriteByte('\n')
				walk(t[k])
			}
		case []any:
			for _, x := range t {
				walk(x)
			}
		}
	}
	walk(v)
	return b.String()
}

// judgeOne applies L2's checks to one definition.
func judgeOne(s Server, d Definition) []Finding {
	t := text(d.Raw)
	f := func(sev, rule, detail string) Finding {
		return Finding{Severity: sev, Rule: rule, Server: s.ID, Kind: d.Kind, Name: d.Name, Detail: detail}
	}
	var out []Finding
	if h, ok := validate.FindHidden(t); ok {
		out = append(out, f(High, RuleHidden, fmt.Sprintf("%s at %q", h.Kind, excerpt(t, h.Start, h.End))))
	}
	// Hidden characters are reported above; what they hide is judged
	// without them.
	v := validate.StripHidden(t)
	if p, ok := validate.FindPoisoning(v); ok {
		out = append(out, f(High, RulePoisoned, fmt.Sprintf("%s: %q", p.Kind, excerpt(v, p.Start, p.End))))
	} else if p, prose, ok := validate.FindCredentialPointer(d.Raw); ok {
		out = append(out, f(High, RulePoisoned, fmt.Sprintf("%s: %q", p.Kind, excerpt(prose, p.Start, p.End))))
	}
	if sec, ok := validate.FindSecretDeep(t); ok {
		out = append(out, f(High, RuleSecret, fmt.Sprintf("a %s in the definition", sec.Kind)))
	}
	return out
}

// excerpt is up to 60 bytes of s around [start, end), on valid UTF-8
// boundaries, hidden characters shown as escapes.
func excerpt(s string, start, end int) string {
	if start < 0 || end > len(s) || start > end {
		start, end = 0, min(len(s), 60)
	}
	a, b := max(0, start-20), min(len(s), end+40)
	for a > 0 && a < len(s) && !isBoundary(s[a]) {
		a--
	}
	for b < len(s) && !isBoundary(s[b]) {
		b++
	}
	return strings.ReplaceAll(s[a:b], "\n", " ")
}

func isBoundary(c byte) bool { return c&0xC0 != 0x80 }

// identifier matches names worth looking for in another server's text:
// with a separator or a case change inside, so that ordinary words
// ("search", "read") do not count.
var identifier = regexp.MustCompile(`^[A-Za-z0-9]+(?:[_\-.][A-Za-z0-9]+)+$|^[a-z0-9]+(?:[A-Z][a-z0-9]*)+$`)

// crossServer finds, among the servers one client loads together, a
// definition that names another server's tool (which its own server does
// not have: tool shadowing), two servers whose tool names differ but look
// alike (validate.Skeleton), and tool names two servers share with
// different definitions (the same server configured twice is not a
// finding).
func crossServer(servers []Server) []Finding {
	var out []Finding
	type owner struct{ server, name, digest string }
	tools := map[string][]owner{} // skeleton -> tools
	own := map[string]map[string]bool{}
	for _, s := range servers {
		own[s.ID] = map[string]bool{}
		for _, d := range s.Defs {
			if d.Kind == Tool {
				own[s.ID][d.Name] = true
				k := validate.Skeleton(strings.ToLower(d.Name))
				tools[k] = append(tools[k], owner{s.ID, d.Name, validate.DefinitionDigest(d.Raw)})
			}
		}
	}
	for _, owners := range tools {
		for i := range owners {
			for j := i + 1; j < len(owners); j++ {
				a, b := owners[i], owners[j]
				if a.server == b.server || a.name == b.name && a.digest == b.digest {
					continue
				}
				if a.name != b.name {
					out = append(out, Finding{High, RuleConfusable, b.server, Tool, b.name,
						fmt.Sprintf("looks like %s's tool %q", a.server, a.name)})
				} else {
					out = append(out, Finding{Info, RuleSameName, b.server, Tool, b.name,
						fmt.Sprintf("%s offers a tool of the same name", a.server)})
				}
			}
		}
	}
	for _, s := range servers {
		for _, d := range s.Defs {
			out = append(out, mentions(s, d, servers, own)...)
		}
	}
	return out
}

// mentions reports the other servers' tools that d's text names, each
// name once.
func mentions(s Server, d Definition, servers []Server, own map[string]map[string]bool) []Finding {
	t := text(d.Raw)
	owners := map[string][]string{}
	var names []string
	for _, o := range servers {
		if o.ID == s.ID {
			continue
		}
		for name := range own[o.ID] {
			if own[s.ID][name] || !identifier.MatchString(name) {
				continue
			}
			re := regexp.MustCompile(`(?:^|[^A-Za-z0-9_])` + regexp.QuoteMeta(name) + `(?:$|[^A-Za-z0-9_])`)
			if !re.MatchString(t) {
				continue
			}
			if _, ok := owners[name]; !ok {
				names = append(names, name)
			}
			owners[name] = append(owners[name], o.ID)
		}
	}
	slices.Sort(names)
	var out []Finding
	for _, name := range names {
		out = append(out, Finding{High, RuleCrossServer, s.ID, d.Kind, d.Name,
			fmt.Sprintf("names the tool %q of %s (a definition that steers the use of another server's tools)", name, strings.Join(owners[name], ", "))})
	}
	return out
}
