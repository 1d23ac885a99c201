package clients

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/tailscale/hujson"
)

// parseJSON lists the servers of a JSON (with comments) document under
// the containers of f.
func parseJSON(f File, data []byte) ([]Server, error) {
	root, err := hujson.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	var out []Server
	for _, c := range f.Containers {
		for _, m := range jsonMatches(&root, c, nil) {
			obj, ok := m.v.Value.(*hujson.Object)
			if !ok {
				continue
			}
			scope := f.Scope
			if len(m.key) == 3 && m.key[0] == "projects" {
				scope = "local " + m.key[1]
			}
			count := map[string]int{}
			for i := range obj.Members {
				count[obj.Members[i].Name.Value.(hujson.Literal).String()]++
			}
			for i := range obj.Members {
				mem := &obj.Members[i]
				name := mem.Name.Value.(hujson.Literal).String()
				s, err := jsonEntry(f, data, mem)
				if err != nil {
					return nil, fmt.Errorf("%s: server %q: %w", f.Path, name, err)
				}
				s.Name, s.Scope = name, scope
				s.Key = append(append([]string(nil), m.key...), name)
				if count[name] > 1 {
					s.Problem = "the file names this server twice"
				}
				out = append(out, s)
			}
		}
	}
	return out, nil
}

type jsonMatch struct {
	v   *hujson.Value
	key []string
}

// jsonMatches follows the key path (with "*" for any key) from v.
func jsonMatches(v *hujson.Value, path, key []string) []jsonMatch {
	if len(path) == 0 {
		return []jsonMatch{{v, key}}
	}
	obj, ok := v.Value.(*hujson.Object)
	if !ok {
		return nil
	}
	var out []jsonMatch
	for i := range obj.Members {
		name := obj.Members[i].Name.Value.(hujson.Literal).String()
		if path[0] != "*" && name != path[0] {
			continue
		}
		k := append(append([]string(nil), key...), name)
		out = append(out, jsonMatches(&obj.Members[i].Value, path[1:], k)...)
	}
	return out
}

// jsonEntry reads one server entry: its values, and where its command and
// args are.
func jsonEntry(f File, data []byte, mem *hujson.ObjectMember) (Server, error) {
	var s Server
	obj, ok := mem.Value.Value.(*hujson.Object)
	if !ok {
		s.Problem = "the entry is not an object"
		return s, nil
	}
	std := mem.Value.Clone()
	std.Standardize()
	var m map[string]any
	if err := json.Unmarshal(std.Pack(), &m); err != nil {
		return s, err
	}
	var cmd *hujson.ObjectMember
	for i := range obj.Members {
		om := &obj.Members[i]
		switch om.Name.Value.(hujson.Literal).String() {
		case "command":
			if cmd != nil {
				s.loc.dup = "command"
			}
			cmd = om
		case "args":
			if s.loc.hasArgs {
				s.loc.dup = "args"
			}
			s.loc.hasArgs = true
			s.loc.args = span{om.Value.StartOffset, om.Value.EndOffset}
			s.loc.elems = nil
			if arr, ok := om.Value.Value.(*hujson.Array); ok {
				for _, e := range arr.Elements {
					s.loc.elems = append(s.loc.elems, span{e.StartOffset, e.EndOffset})
				}
			}
		}
	}
	if cmd != nil {
		if _, isStr := cmd.Value.Value.(hujson.Literal); !isStr || cmd.Value.Value.Kind() != '"' {
			s.Problem = "its command is not a string"
		}
		s.loc.command = span{cmd.Value.StartOffset, cmd.Value.EndOffset}
		s.loc.insertAt = cmd.Value.EndOffset
		s.loc.insertFn = jsonArgsMember(data, cmd)
	}
	s.fill(f.Client, m)
	return s, nil
}

// jsonArgsMember renders an args member to insert after the command
// member cmd, laid out as cmd is: the same lead (newline and indent) and
// the same separator around the colon.
func jsonArgsMember(data []byte, cmd *hujson.ObjectMember) func(string) string {
	lead := []byte(cmd.Name.BeforeExtra)
	if bytes.Contains(lead, []byte("/")) { // a comment: keep only the indent
		lead = []byte("\n" + string(indentAfterNewline(lead)))
		if !bytes.Contains(cmd.Name.BeforeExtra, []byte("\n")) {
			lead = []byte(" ")
		}
	}
	colon := data[cmd.Name.EndOffset:cmd.Value.StartOffset]
	if bytes.Contains(colon, []byte("/")) {
		colon = []byte(": ")
	}
	return func(array string) string {
		return "," + string(lead) + `"args"` + string(colon) + array
	}
}

// indentAfterNewline is the run of spaces and tabs after b's last newline.
func indentAfterNewline(b []byte) []byte {
	i := bytes.LastIndexByte(b, '\n')
	rest := b[i+1:]
	n := 0
	for n < len(rest) && (rest[n] == ' ' || rest[n] == '\t') {
		n++
	}
	return rest[:n]
}
