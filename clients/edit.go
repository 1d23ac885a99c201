package clients

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Parse lists the servers of a configuration file's bytes.
func Parse(f File, data []byte) ([]Server, error) {
	if f.Format == TOML {
		return parseTOML(f, data)
	}
	return parseJSON(f, data)
}

// Change is one entry wrap changed: the bytes of its region (from the first
// of its command and args to the last) before and after, so that unwrap
// puts back exactly what was there.
type Change struct {
	Key      []string `json:"key"`
	Original string   `json:"original"`
	Wrapped  string   `json:"wrapped"`
}

// ErrNotWrappable is wrapped when Wrap is asked for an entry it cannot
// change (Server.Problem says why).
var ErrNotWrappable = errors.New("server cannot be wrapped")

// Wrap returns data with each server of wraps run through mcpguard: its
// command becomes prefix[0], and its args prefix[1:], then its own command,
// then its own args. Everything else in the file is kept byte for byte,
// and within the entry the bytes of its own args are kept as they were
// (comments and layout), after the new ones. wraps maps KeyString(s.Key)
// to the prefix; servers already guarded are left alone.
func Wrap(f File, data []byte, wraps map[string][]string) ([]byte, []Change, error) {
	servers, err := Parse(f, data)
	if err != nil {
		return nil, nil, err
	}
	type edit struct {
		r    span
		text string
		key  []string
	}
	var edits []edit
	for _, s := range servers {
		prefix, ok := wraps[KeyString(s.Key)]
		if !ok || s.Guarded {
			continue
		}
		if s.Problem != "" {
			return nil, nil, fmt.Errorf("%w: %s: %s", ErrNotWrappable, s.Name, s.Problem)
		}
		if len(prefix) == 0 {
			return nil, nil, fmt.Errorf("%s: empty mcpguard command", s.Name)
		}
		r := s.loc.region()
		edits = append(edits, edit{r, wrapRegion(data, s.loc, prefix), s.Key})
	}
	sort.Slice(edits, func(i, j int) bool { return edits[i].r.start > edits[j].r.start })
	out := slices.Clone(data)
	var changes []Change
	for _, e := range edits {
		changes = append(changes, Change{Key: e.key, Original: string(data[e.r.start:e.r.end]), Wrapped: e.text})
		out = slices.Concat(out[:e.r.start], []byte(e.text), out[e.r.end:])
	}
	slices.Reverse(changes)
	return out, changes, nil
}

// wrapRegion is the new text of the entry's region.
func wrapRegion(data []byte, l entryLoc, prefix []string) string {
	r := l.region()
	type splice struct {
		s    span
		text string
	}
	cmdRaw := string(data[l.command.start:l.command.end])
	items := make([]string, 0, len(prefix))
	for _, p := range prefix[1:] {
		items = append(items, quote(p))
	}
	items = append(items, cmdRaw)
	sp := []splice{{l.command, quote(prefix[0])}}
	if l.hasArgs {
		sp = append(sp, splice{l.args, wrapArray(data, l.args, l.elems, items)})
	} else {
		sp = append(sp, splice{span{l.insertAt, l.insertAt}, l.insertFn("[" + strings.Join(items, ", ") + "]")})
	}
	sort.Slice(sp, func(i, j int) bool { return sp[i].s.start > sp[j].s.start })
	text := []byte(string(data[r.start:r.end]))
	for _, x := range sp {
		a, b := x.s.start-r.start, x.s.end-r.start
		text = slices.Concat(text[:a], []byte(x.text), text[b:])
	}
	return string(text)
}

// wrapArray is the args array a (with elements elems) with items put
// first, laid out as its own elements are: the same lead before the first
// and the same separator between them.
func wrapArray(data []byte, a span, elems []span, items []string) string {
	if len(elems) == 0 {
		return "[" + strings.Join(items, ", ") + string(data[a.start+1:a.end])
	}
	lead := data[a.start+1 : elems[0].start]
	var sep string
	switch {
	case len(elems) >= 2 && !hasComment(data[elems[0].end:elems[1].start]):
		sep = string(data[elems[0].end:elems[1].start])
	case bytes.Contains(lead, []byte("\n")):
		sep = ",\n" + string(indentAfterNewline(lead))
	default:
		sep = ", "
	}
	return "[" + string(lead) + strings.Join(items, sep) + sep + string(data[elems[0].start:a.end])
}

func hasComment(b []byte) bool { return bytes.ContainsAny(b, "/#") }

// KeyString is a server's key path as one string (a map key).
func KeyString(key []string) string { return strings.Join(key, "\x00") }

// Restored says how unwrap put one entry back.
type Restored struct {
	Key []string
	// Exact is true when the entry's bytes were put back as they were
	// before wrap; false when the entry had changed since and only its
	// command and args were restored, by value.
	Exact bool
}

// Unwrap returns data with every entry of changes put back: byte for
// byte where the entry's region is still what wrap made it, by value
// (the command and args after `--`) where it changed since. Entries
// guarded by hand (no change recorded) are left alone.
func Unwrap(f File, data []byte, changes []Change) ([]byte, []Restored, error) {
	servers, err := Parse(f, data)
	if err != nil {
		return nil, nil, err
	}
	byKey := map[string]Change{}
	for _, c := range changes {
		byKey[KeyString(c.Key)] = c
	}
	type edit struct {
		r    span
		text string
		res  Restored
	}
	var edits []edit
	for _, s := range servers {
		c, ok := byKey[KeyString(s.Key)]
		if !ok || s.loc.dup != "" || !s.loc.hasArgs {
			continue
		}
		r := s.loc.region()
		if string(data[r.start:r.end]) == c.Wrapped {
			edits = append(edits, edit{r, c.Original, Restored{s.Key, true}})
			continue
		}
		if !s.Guarded {
			continue // replaced since by something else: not ours to change
		}
		if len(s.Inner) == 0 {
			return nil, nil, fmt.Errorf("%s: no command after -- to restore", s.Name)
		}
		edits = append(edits, edit{r, unwrapByValue(data, s), Restored{s.Key, false}})
	}
	sort.Slice(edits, func(i, j int) bool { return edits[i].r.start > edits[j].r.start })
	out := slices.Clone(data)
	var done []Restored
	for _, e := range edits {
		out = slices.Concat(out[:e.r.start], []byte(e.text), out[e.r.end:])
		done = append(done, e.res)
	}
	slices.Reverse(done)
	return out, done, nil
}

// unwrapByValue is the entry's region with its command and args set to
// the command after `--`.
func unwrapByValue(data []byte, s Server) string {
	l := s.loc
	r := l.region()
	args := make([]string, 0, len(s.Inner)-1)
	for _, a := range s.Inner[1:] {
		args = append(args, quote(a))
	}
	type splice struct {
		s    span
		text string
	}
	sp := []splice{{l.command, quote(s.Inner[0])}, {l.args, "[" + strings.Join(args, ", ") + "]"}}
	sort.Slice(sp, func(i, j int) bool { return sp[i].s.start > sp[j].s.start })
	text := []byte(string(data[r.start:r.end]))
	for _, x := range sp {
		a, b := x.s.start-r.start, x.s.end-r.start
		text = slices.Concat(text[:a], []byte(x.text), text[b:])
	}
	return string(text)
}
