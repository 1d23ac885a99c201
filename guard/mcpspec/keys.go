package mcpspec

import (
	"bytes"
	"fmt"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// A message is read by exact keys: in every object whose shape the schema
// gives, a key that differs only in case from a member the schema names
// ("Tools" for "tools", "Instructions") is refused. Go's encoding/json
// (mcp-go, this project's own dependency) matches keys without regard to
// case, so a client written with it reads such a key as the member, while
// a layer that reads the member exactly would not see it at all. Keys of
// objects the schema leaves open (arguments, structuredContent, _meta, a
// JSON Schema's properties) are data, and may be anything.

// node is an object shape (see genNodes).
type node struct {
	name   string
	props  map[string]*node  // member -> the shape of its value (nil: nothing to walk)
	folded map[string]string // FoldKey(member) -> member
	items  *node             // the shape of an array's items, when the value may be one
}

var nodes = func() map[string]*node {
	out := make(map[string]*node, len(genNodes))
	for _, row := range genNodes {
		out[row[0]] = &node{name: row[0], props: map[string]*node{}, folded: map[string]string{}}
	}
	get := func(name string) *node {
		if name == "" {
			return nil
		}
		n, ok := out[name]
		if !ok {
			panic("mcpspec: table names an unknown node " + name)
		}
		return n
	}
	for _, row := range genNodes {
		n := out[row[0]]
		n.items = get(row[1])
		for i := 2; i+1 < len(row); i += 2 {
			n.props[row[i]] = get(row[i+1])
			n.folded[jsonrpc.FoldKey([]byte(row[i]))] = row[i]
		}
	}
	return out
}()

func nodeOf(name string) *node {
	if name == "" {
		return nil
	}
	return nodes[name]
}

// CheckParams reads params (a JSON value the jsonrpc Scanner accepted) as
// m's params, and refuses a key that differs only in case from a member
// the schema names (an error wrapping jsonrpc.ErrCaseKey).
func (m Message) CheckParams(params []byte) error {
	return checkKeys(nodeOf(m.params), params, "params")
}

// CheckResult is CheckParams for the result that answers m.
func (m Message) CheckResult(result []byte) error {
	return checkKeys(nodeOf(m.result), result, "result")
}

// CheckError is CheckParams for a JSON-RPC error object.
func CheckError(e []byte) error { return checkKeys(nodeOf(errorNode), e, "error") }

// Members returns the members the schema names for m's params, sorted.
// (For tests and documentation.)
func (m Message) Members() []string {
	n := nodeOf(m.params)
	if n == nil {
		return nil
	}
	out := make([]string, 0, len(n.props))
	for k := range n.props {
		out = append(out, k)
	}
	return out
}

func checkKeys(n *node, v []byte, where string) error {
	if n == nil || len(v) == 0 {
		return nil
	}
	w := walker{b: v}
	if err := w.value(n, where); err != nil {
		return err
	}
	return nil
}

// walker reads a JSON value the Scanner accepted; it does not re-check
// the grammar.
type walker struct {
	b   []byte
	pos int
	key []byte // scratch for unescaped keys
}

func (w *walker) ws() {
	for w.pos < len(w.b) {
		switch w.b[w.pos] {
		case ' ', '\t', '\n', '\r':
			w.pos++
		default:
			return
		}
	}
}

func (w *walker) value(n *node, path string) error {
	w.ws()
	if w.pos >= len(w.b) {
		return nil
	}
	switch w.b[w.pos] {
	case '{':
		if n == nil {
			w.skip()
			return nil
		}
		return w.object(n, path)
	case '[':
		if n == nil || n.items == nil {
			w.skip()
			return nil
		}
		return w.array(n.items, path)
	}
	w.skip()
	return nil
}

func (w *walker) object(n *node, path string) error {
	w.pos++ // {
	for {
		w.ws()
		if w.pos >= len(w.b) {
			return nil
		}
		switch w.b[w.pos] {
		case '}':
			w.pos++
			return nil
		case ',':
			w.pos++
			continue
		}
		start := w.pos
		w.pos = skipString(w.b, w.pos)
		key := w.b[start+1 : w.pos-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			w.key = jsonrpc.AppendCanonical(w.key[:0], w.b[start:w.pos])
			key = []byte(jsonrpc.Unquote(w.key))
		}
		child, ok := n.props[string(key)]
		if !ok {
			if exact, clash := n.folded[jsonrpc.FoldKey(key)]; clash {
				return fmt.Errorf("%w: %q in %s is read as %q by clients that match keys without case", jsonrpc.ErrCaseKey, key, path, exact)
			}
		}
		w.ws()
		w.pos++ // :
		if err := w.value(child, path+"."+string(key)); err != nil {
			return err
		}
	}
}

func (w *walker) array(items *node, path string) error {
	w.pos++ // [
	for {
		w.ws()
		if w.pos >= len(w.b) {
			return nil
		}
		switch w.b[w.pos] {
		case ']':
			w.pos++
			return nil
		case ',':
			w.pos++
			continue
		}
		if err := w.value(items, path+"[]"); err != nil {
			return err
		}
	}
}

// skip moves past one value.
func (w *walker) skip() {
	depth := 0
	for w.pos < len(w.b) {
		switch c := w.b[w.pos]; c {
		case '"':
			w.pos = skipString(w.b, w.pos)
			if depth == 0 {
				return
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return // the end of the enclosing value
			}
			depth--
			if depth == 0 {
				w.pos++
				return
			}
		case ',', ':', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return
			}
		}
		w.pos++
	}
}

// skipString returns the index past the string that starts at b[i].
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); {
		k := bytes.IndexAny(b[j:], `"\`)
		if k < 0 {
			return len(b)
		}
		j += k
		if b[j] == '\\' {
			j += 2
			continue
		}
		return j + 1
	}
	return len(b)
}
