package clients

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// tomlKV is a key-value of a TOML document, with its full key path.
// The parser's nodes live until its next expression, so what an edit
// needs is copied out: the key-value's range, its value's, and the value's
// elements when it is an array.
type tomlKV struct {
	path   []string
	kv     span
	value  span
	elems  []span
	inline bool // inside an inline table: siblings are separated by commas
}

// parseTOML lists the servers of a TOML document under the containers of
// f: each table (or inline table) below a container is one server.
func parseTOML(f File, data []byte) ([]Server, error) {
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return nil, fmt.Errorf("%s: line %d, column %d: %w", f.Path, row, col, err)
		}
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	kvs, err := tomlKeyValues(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	var out []Server
	for _, c := range f.Containers {
		tables, _ := lookup(doc, c).(map[string]any)
		names := make([]string, 0, len(tables))
		for n := range tables {
			names = append(names, n)
		}
		slices.SortFunc(names, func(a, b string) int { return firstIndex(kvs, c, a) - firstIndex(kvs, c, b) })
		for _, name := range names {
			key := append(slices.Clone(c), name)
			s := Server{Name: name, Scope: f.Scope, Key: key}
			m, ok := tables[name].(map[string]any)
			if !ok {
				s.Problem = "the entry is not a table"
				out = append(out, s)
				continue
			}
			s.loc = tomlEntry(data, kvs, key)
			s.fill(f.Client, m)
			out = append(out, s)
		}
	}
	return out, nil
}

// lookup follows path through nested maps.
func lookup(doc map[string]any, path []string) any {
	var v any = doc
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// firstIndex orders servers as the file lists them: by the first
// key-value below each.
func firstIndex(kvs []tomlKV, container []string, name string) int {
	prefix := append(slices.Clone(container), name)
	for i, kv := range kvs {
		if len(kv.path) > len(prefix) && slices.Equal(kv.path[:len(prefix)], prefix) {
			return i
		}
	}
	return len(kvs)
}

// tomlKeyValues lists every key-value of the document (those inside
// inline tables too) with its full key path.
func tomlKeyValues(data []byte) ([]tomlKV, error) {
	p := unstable.Parser{KeepComments: true}
	p.Reset(data)
	var (
		out   []tomlKV
		table []string
	)
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = keyOf(e.Key())
		case unstable.KeyValue:
			out = appendKV(out, data, append(slices.Clone(table), keyOf(e.Key())...), e, false)
		}
	}
	if err := p.Error(); err != nil {
		return nil, err
	}
	return out, nil
}

// appendKV adds kv, and the key-values of an inline table it holds.
func appendKV(out []tomlKV, data []byte, path []string, kv *unstable.Node, inline bool) []tomlKV {
	k := tomlKV{path: path, inline: inline, value: tomlValueSpan(data, kv),
		kv: span{int(kv.Raw.Offset), int(kv.Raw.Offset + kv.Raw.Length)}}
	v := kv.Value()
	if v.Kind == unstable.Array {
		k.elems = []span{}
		for it := v.Children(); it.Next(); {
			if n := it.Node(); n.Kind != unstable.Comment {
				k.elems = append(k.elems, span{int(n.Raw.Offset), int(n.Raw.Offset + n.Raw.Length)})
			}
		}
	}
	out = append(out, k)
	if v.Kind == unstable.InlineTable {
		for it := v.Children(); it.Next(); {
			if c := it.Node(); c.Kind == unstable.KeyValue {
				out = appendKV(out, data, append(slices.Clone(path), keyOf(c.Key())...), c, true)
			}
		}
	}
	return out
}

func keyOf(it unstable.Iterator) []string {
	var k []string
	for it.Next() {
		k = append(k, string(it.Node().Data))
	}
	return k
}

// tomlEntry finds the command and args of the server at key.
func tomlEntry(data []byte, kvs []tomlKV, key []string) entryLoc {
	var (
		loc entryLoc
		cmd *tomlKV
	)
	for i := range kvs {
		kv := &kvs[i]
		if len(kv.path) != len(key)+1 || !slices.Equal(kv.path[:len(key)], key) {
			continue
		}
		switch kv.path[len(key)] {
		case "command":
			if cmd != nil {
				loc.dup = "command"
			}
			cmd = kv
			loc.command = kv.value
		case "args":
			if loc.hasArgs {
				loc.dup = "args"
			}
			loc.hasArgs = true
			loc.args = kv.value
			loc.elems = kv.elems
		}
	}
	if cmd != nil {
		loc.insertAt, loc.insertFn = tomlArgsInsert(data, *cmd, loc.command)
	}
	return loc
}

// tomlValueSpan is the byte range of a key-value's value: after the '='
// and the blanks that follow it, to the end of the key-value.
func tomlValueSpan(data []byte, kv *unstable.Node) span {
	end := int(kv.Raw.Offset + kv.Raw.Length)
	if v := kv.Value(); v.Raw.Length > 0 && v.Kind != unstable.InlineTable {
		return span{int(v.Raw.Offset), int(v.Raw.Offset + v.Raw.Length)}
	}
	// Arrays carry no range: scan from the key's end past '='.
	last := kv.Key()
	var k *unstable.Node
	for last.Next() {
		k = last.Node()
	}
	i := int(k.Raw.Offset + k.Raw.Length)
	i += bytes.IndexByte(data[i:end], '=') + 1
	for i < end && (data[i] == ' ' || data[i] == '\t') {
		i++
	}
	return span{i, end}
}

// tomlArgsInsert is where an args key-value goes when the entry has none,
// and how it is written: in a table, on its own line after the command's
// line (after its comment), indented as that line; in an inline table,
// after the command with a comma.
func tomlArgsInsert(data []byte, cmd tomlKV, command span) (int, func(string) string) {
	if cmd.inline {
		return command.end, func(a string) string { return ", args = " + a }
	}
	eol := bytes.IndexByte(data[command.end:], '\n')
	at := len(data)
	if eol >= 0 {
		at = command.end + eol
		if at > 0 && data[at-1] == '\r' {
			at--
		}
	}
	lineStart := bytes.LastIndexByte(data[:cmd.kv.start], '\n') + 1
	indent := data[lineStart:cmd.kv.start]
	if strings.Trim(string(indent), " \t") != "" {
		indent = nil
	}
	nl := "\n"
	if bytes.Contains(data, []byte("\r\n")) {
		nl = "\r\n"
	}
	return at, func(a string) string { return nl + string(indent) + "args = " + a }
}
