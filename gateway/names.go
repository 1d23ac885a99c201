package gateway

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/yosida95/uritemplate/v3"

	"github.com/mcpguard/mcpguard/guard/validate"
)

// kind is one of the lists the aggregate endpoint merges: the items each
// server lists, what names them, and how a colliding name is prefixed.
type kind struct {
	method string // the list method
	field  string // the result's array
	key    string // the item's name field
	cap    string // the server capability that offers it
	uri    bool   // names are URIs (prefixed mcpguard:<server>/...)
}

var (
	kindTools     = &kind{method: "tools/list", field: "tools", key: "name", cap: "tools"}
	kindPrompts   = &kind{method: "prompts/list", field: "prompts", key: "name", cap: "prompts"}
	kindResources = &kind{method: "resources/list", field: "resources", key: "uri", cap: "resources", uri: true}
	kindTemplates = &kind{method: "resources/templates/list", field: "resourceTemplates", key: "uriTemplate", cap: "resources", uri: true}
	kinds         = []*kind{kindTools, kindPrompts, kindResources, kindTemplates}
)

// prefixed is the name a client sees for server's name when that name
// collides with another server's: tools and prompts <server>__<name>,
// URIs and URI templates mcpguard:<server>/<uri>.
func (k *kind) prefixed(server, name string) string {
	if k.uri {
		return "mcpguard:" + server + "/" + name
	}
	return server + toolSep + name
}

// confusable is the key under which two names collide: the same letters
// to a reader, whatever their case, their Unicode form or the homoglyphs
// they are written with (guard/validate's skeleton), ASCII's own
// lookalikes included (read_fiIe, read_fi1e, forrnat: Unicode's
// confusables map I, 1 and | to l, 0 to o, rn to m, vv to w), folded
// before the case is (the skeleton folds it too), which would make I an i.
func confusable(name string) string {
	return asciiPairs.Replace(strings.ToLower(validate.Skeleton(asciiLookalikes.Replace(name))))
}

var (
	asciiLookalikes = strings.NewReplacer("I", "l", "1", "l", "|", "l", "0", "o")
	asciiPairs      = strings.NewReplacer("rn", "m", "vv", "w")
)

// target is where a name the client sees goes: a server and the server's
// own name for it.
type target struct {
	server string
	name   string
}

// view is one merged list as the client sees it, and its routes.
type view struct {
	items   []json.RawMessage
	route   map[string]target // the client's name -> the server's
	back    map[target]string // the server's name -> the client's
	refused []string          // names left out as ambiguous
	tmpls   []template        // for URI templates: matchers, in list order
}

// template is a listed URI template and the server behind it.
type template struct {
	t      *uritemplate.Template
	target target
	shown  string // the template as listed
}

// listed is one item a server listed, with its name.
type listed struct {
	server string
	name   string
	raw    json.RawMessage
}

// merge builds the view of the items: a name that only one server lists,
// once, keeps its own; names that collide (equal, or confusable) are
// prefixed with their servers'; and a name that still collides after that
// (a server listing a prefixed form of another's name, or one name twice)
// is left out, so that no name the client sees can mean two servers. The
// result depends only on what the servers list, not on timing.
func (k *kind) merge(items []listed) *view {
	groups := map[string]int{}
	for _, it := range items {
		groups[confusable(it.name)]++
	}
	shown := make([]string, len(items))
	finals := map[string]int{}
	for i, it := range items {
		shown[i] = it.name
		if groups[confusable(it.name)] > 1 {
			shown[i] = k.prefixed(it.server, it.name)
		}
		finals[confusable(shown[i])]++
	}
	v := &view{route: map[string]target{}, back: map[target]string{}}
	for i, it := range items {
		if finals[confusable(shown[i])] > 1 {
			v.refused = append(v.refused, fmt.Sprintf("%s %q of %s", k.key, it.name, it.server))
			continue
		}
		raw := it.raw
		if shown[i] != it.name {
			var err error
			if raw, err = withField(it.raw, k.key, shown[i]); err != nil {
				continue
			}
		}
		tg := target{server: it.server, name: it.name}
		v.items = append(v.items, raw)
		v.route[shown[i]] = tg
		v.back[tg] = shown[i]
		if k == kindTemplates {
			if t, err := uritemplate.New(shown[i]); err == nil {
				v.tmpls = append(v.tmpls, template{t: t, target: tg, shown: shown[i]})
			}
		}
	}
	return v
}

// withField returns the JSON object raw with field set to the string v.
func withField(raw json.RawMessage, field, v string) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("rewrite %s: %w", field, err)
	}
	m[field], _ = json.Marshal(v)
	return json.Marshal(m)
}

// itemName reads the name field of a listed item.
func itemName(raw json.RawMessage, key string) (string, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return "", false
	}
	var s string
	if json.Unmarshal(m[key], &s) != nil || s == "" {
		return "", false
	}
	return s, true
}

// resolveURI finds the server of a resource URI: a listed resource, else
// the one server whose listed templates match it (the URI the server gets
// loses the prefix of a prefixed template). Matches on templates of two
// servers are ambiguous and refused.
func resolveURI(resources, templates *view, uri string) (target, error) {
	if tg, ok := resources.route[uri]; ok {
		return tg, nil
	}
	var found []template
	for _, t := range templates.tmpls {
		if t.t.Match(uri) != nil {
			found = append(found, t)
		}
	}
	servers := map[string]bool{}
	for _, t := range found {
		servers[t.target.server] = true
	}
	switch len(servers) {
	case 0:
		return target{}, fmt.Errorf("no server of this session lists resource %q or a template that matches it", uri)
	case 1:
		t := found[0]
		name := uri
		if t.shown != t.target.name {
			name = strings.TrimPrefix(uri, kindTemplates.prefixed(t.target.server, ""))
		}
		return target{server: t.target.server, name: name}, nil
	}
	names := slices.Sorted(maps.Keys(servers))
	return target{}, fmt.Errorf("resource %q matches templates of %s: ambiguous", uri, strings.Join(names, " and "))
}
