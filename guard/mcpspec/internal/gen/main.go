// Command gen writes table_gen.go from the MCP schemas in ../../schema:
// every request, notification and result type of each version, in both
// directions, and the shape of every object the messages hold (which
// members each has, and what each member's value is), for the exact-key
// reading of messages. `go generate ./guard/mcpspec` runs it; `gen ROOT
// OUT` reads ROOT/schema and writes OUT instead of ROOT/table_gen.go.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/format"
	"log"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// versions are the schema versions the table is made of, oldest first.
var versions = []string{"2025-06-18", "2025-11-25"}

// schema is the part of JSON Schema the MCP schema uses.
type schema struct {
	Ref                  string             `json:"$ref"`
	Type                 any                `json:"type"`
	Const                any                `json:"const"`
	Properties           map[string]*schema `json:"properties"`
	AdditionalProperties any                `json:"additionalProperties"`
	Items                *schema            `json:"items"`
	AnyOf                []*schema          `json:"anyOf"`
	AllOf                []*schema          `json:"allOf"`
}

type doc struct {
	Defs        map[string]*schema `json:"$defs"`
	Definitions map[string]*schema `json:"definitions"`
}

// node is an object shape: its members and the nodes of their values,
// and (for a value that may be an array) the node of its items. "" is a
// value with nothing to walk: a scalar, or an object of any members.
type node struct {
	props map[string]string
	items string
}

type gen struct {
	defs  map[string]*schema // of the version being read
	nodes map[string]*node
	// byShape names nodes by their content, so that the same inline shape
	// met in many places is one node.
	byShape map[string]string
}

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	outFile := filepath.Join(root, "table_gen.go")
	if len(os.Args) > 2 {
		outFile = os.Args[2]
	}
	g := &gen{nodes: map[string]*node{}, byShape: map[string]string{}}
	var msgs []message
	for _, v := range versions {
		b, err := os.ReadFile(filepath.Join(root, "schema", v, "schema.json"))
		if err != nil {
			log.Fatal(err)
		}
		var d doc
		if err := json.Unmarshal(b, &d); err != nil {
			log.Fatalf("%s: %v", v, err)
		}
		g.defs = d.Defs
		if g.defs == nil {
			g.defs = d.Definitions
		}
		ms, err := g.messages(v)
		if err != nil {
			log.Fatalf("%s: %v", v, err)
		}
		msgs = mergeMessages(msgs, ms)
	}
	out, err := g.write(msgs)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(outFile, out, 0o644); err != nil {
		log.Fatal(err)
	}
}

// message is one row of the table.
type message struct {
	from, kind, method, typ string
	params, result          string // nodes
	resultType              string
	task                    bool // params may ask for a task (the answer is then a CreateTaskResult)
	versions                []string
}

func (g *gen) messages(version string) ([]message, error) {
	var out []message
	for _, u := range []struct{ union, from, kind, answers string }{
		{"ClientRequest", "Client", "Request", "ServerResult"},
		{"ClientNotification", "Client", "Notification", ""},
		{"ServerRequest", "Server", "Request", "ClientResult"},
		{"ServerNotification", "Server", "Notification", ""},
	} {
		un, ok := g.defs[u.union]
		if !ok {
			return nil, fmt.Errorf("no %s", u.union)
		}
		for _, alt := range un.AnyOf {
			name := refName(alt.Ref)
			def := g.defs[name]
			if def == nil || def.Properties["method"] == nil {
				return nil, fmt.Errorf("%s: %q is not a message", u.union, alt.Ref)
			}
			method, ok := def.Properties["method"].Const.(string)
			if !ok {
				return nil, fmt.Errorf("%s has no constant method", name)
			}
			m := message{from: u.from, kind: u.kind, method: method, typ: name, versions: []string{version}}
			if p := def.Properties["params"]; p != nil {
				m.params = g.shape(p, name+".params")
				m.task = g.hasTask(p)
			}
			if u.answers != "" {
				res, err := g.resultOf(name, u.answers)
				if err != nil {
					return nil, err
				}
				m.resultType = res
				if m.task {
					m.result = g.merge([]string{g.shape(&schema{Ref: "#/" + res}, res), g.shape(&schema{Ref: "#/CreateTaskResult"}, "CreateTaskResult")}, res+"|CreateTaskResult")
				} else {
					m.result = g.shape(&schema{Ref: "#/" + res}, res)
				}
			}
			out = append(out, m)
		}
	}
	return out, nil
}

// resultOf finds the result type that answers request type name: XRequest
// is answered by XResult, when the answering side's result union has it,
// else by the empty result.
func (g *gen) resultOf(name, union string) (string, error) {
	un := g.defs[union]
	in := func(t string) bool {
		for _, a := range un.AnyOf {
			if refName(a.Ref) == t {
				return true
			}
		}
		return false
	}
	res := strings.TrimSuffix(name, "Request") + "Result"
	if _, ok := g.defs[res]; ok {
		if !in(res) {
			return "", fmt.Errorf("%s is not in %s", res, union)
		}
		return res, nil
	}
	if !in("Result") {
		return "", fmt.Errorf("%s has no result type and %s no empty result", name, union)
	}
	return "EmptyResult", nil
}

func (g *gen) hasTask(s *schema) bool {
	s = g.resolve(s)
	if s == nil {
		return false
	}
	for _, a := range append(s.AnyOf, s.AllOf...) {
		if g.hasTask(a) {
			return true
		}
	}
	return s.Properties["task"] != nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func strconvQuote(s string) string { return fmt.Sprintf("%q", s) }

func refName(ref string) string { return ref[strings.LastIndexByte(ref, '/')+1:] }

func (g *gen) resolve(s *schema) *schema {
	for s != nil && s.Ref != "" {
		s = g.defs[refName(s.Ref)]
	}
	return s
}

// shape returns the node of values s describes, named name when it is new.
func (g *gen) shape(s *schema, name string) string {
	if s.Ref != "" {
		n := refName(s.Ref)
		return g.shape(g.defs[n], n)
	}
	var parts []string
	for i, a := range s.AnyOf {
		parts = append(parts, g.shape(a, fmt.Sprintf("%s.%d", name, i)))
	}
	for i, a := range s.AllOf {
		parts = append(parts, g.shape(a, fmt.Sprintf("%s.%d", name, i)))
	}
	if len(s.Properties) > 0 || s.Items != nil {
		n := &node{props: map[string]string{}}
		for _, p := range sortedKeys(s.Properties) {
			n.props[p] = g.shape(s.Properties[p], name+"."+p)
		}
		if s.Items != nil {
			n.items = g.shape(s.Items, name+"[]")
		}
		if len(n.props) > 0 || n.items != "" { // an array of scalars has nothing to walk
			parts = append(parts, g.add(name, n))
		}
	}
	return g.merge(parts, name)
}

// merge returns a node that is the union of parts (the alternatives of an
// anyOf, the parts of an allOf): a member of any is a member.
func (g *gen) merge(parts []string, name string) string {
	var real []string
	for _, p := range parts {
		if p != "" && !slices.Contains(real, p) {
			real = append(real, p)
		}
	}
	switch len(real) {
	case 0:
		return ""
	case 1:
		return real[0]
	}
	n := &node{props: map[string]string{}}
	for _, p := range real {
		pn := g.nodes[p]
		for _, k := range sortedKeys(pn.props) {
			v := pn.props[k]
			if prev, ok := n.props[k]; ok && prev != v {
				v = g.merge([]string{prev, v}, name+"."+k)
			}
			n.props[k] = v
		}
		if pn.items != "" {
			n.items = g.merge([]string{n.items, pn.items}, name+"[]")
		}
	}
	return g.add(name, n)
}

// add records n under name, or returns the node of the same content.
func (g *gen) add(name string, n *node) string {
	key := n.key()
	if prev, ok := g.byShape[key]; ok {
		return prev
	}
	for g.nodes[name] != nil {
		if g.nodes[name].key() == key {
			return name
		}
		name += "'" // the same name in another version, with other members
	}
	g.nodes[name] = n
	g.byShape[key] = name
	return name
}

func (n *node) key() string {
	keys := make([]string, 0, len(n.props))
	for k := range n.props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%q:%q,", k, n.props[k])
	}
	fmt.Fprintf(&b, "[]%q", n.items)
	return b.String()
}

// mergeMessages adds the messages of a newer version: a row that is in
// both gets the union of their shapes.
func mergeMessages(old, add []message) []message {
	for _, m := range add {
		i := slices.IndexFunc(old, func(o message) bool { return o.from == m.from && o.kind == m.kind && o.method == m.method })
		if i < 0 {
			old = append(old, m)
			continue
		}
		o := &old[i]
		o.versions = append(o.versions, m.versions...)
		o.typ = m.typ
		if m.params != "" {
			o.params = pick(o.params, m.params)
		}
		if m.result != "" {
			o.result = pick(o.result, m.result)
		}
		o.resultType = m.resultType
		o.task = o.task || m.task
	}
	return old
}

// pick is the newer version's shape; the union is made later (unionAll).
func pick(old, new string) string {
	if old == "" || old == new {
		return new
	}
	return old + "+" + new
}

// write renders the table as Go source.
func (g *gen) write(msgs []message) ([]byte, error) {
	// Shapes of a row that differ between versions are merged here, now
	// that every node is known.
	for i := range msgs {
		for _, f := range []*string{&msgs[i].params, &msgs[i].result} {
			if strings.Contains(*f, "+") {
				*f = g.merge(strings.Split(*f, "+"), msgs[i].typ+".v")
			}
		}
	}
	errNode := g.shape(&schema{Ref: "#/Error"}, "Error")
	var b bytes.Buffer
	b.WriteString("// Code generated by internal/gen from schema/*/schema.json; DO NOT EDIT.\n\npackage mcpspec\n\n")
	fmt.Fprintf(&b, "// Versions are the schema versions the table is made of.\nvar Versions = %#v\n\n", versions)
	b.WriteString("// messages is every message type of every version, in both directions.\nvar messages = []Message{\n")
	for _, m := range msgs {
		fmt.Fprintf(&b, "\t{From: %s, Kind: %s, Method: %q, Type: %q, ResultType: %q, Task: %v, Versions: %#v, params: %q, result: %q},\n",
			m.from, m.kind, m.method, m.typ, m.resultType, m.task, m.versions, m.params, m.result)
	}
	b.WriteString("}\n\n")
	fmt.Fprintf(&b, "// errorNode is the shape of a JSON-RPC error object.\nconst errorNode = %q\n\n", errNode)
	b.WriteString("// genNodes is every object shape: name, item node, then member and node pairs.\nvar genNodes = [][]string{\n")
	names := make([]string, 0, len(g.nodes))
	for n := range g.nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		n := g.nodes[name]
		keys := make([]string, 0, len(n.props))
		for k := range n.props {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		row := []string{strconvQuote(name), strconvQuote(n.items)}
		for _, k := range keys {
			row = append(row, strconvQuote(k), strconvQuote(n.props[k]))
		}
		fmt.Fprintf(&b, "\t{%s},\n", strings.Join(row, ", "))
	}
	b.WriteString("}\n")
	return format.Source(b.Bytes())
}
