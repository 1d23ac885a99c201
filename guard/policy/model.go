package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// One model of an argument. A tool's schema is compiled (the JSON Schema
// library resolves $ref, $defs, $dynamicRef) and every place in the
// arguments where the server can receive a string is a slot: "/path",
// "/options/output", "/files/*/path" ("*": every item of an array, every
// value of an object's extra members). Each slot has a kind, decided from
// the policy's args (by slot, or by top-level name), else from the schema
// (format, contentMediaType, writeOnly), the name and the description
// together; a path is judged for write access unless the tool only reads.
// Whatever the kind, a value that reads as a path or a URL is judged as
// one (judge.go).

// KindText and KindSecret are the kinds of slots that are no path, URL,
// host or program: free text, and a credential the server takes (a
// password, a token argument). Both get L2's content checks and the
// by-value reading; a secret slot's values are also remembered for the
// session, so that the same credential sent anywhere else is refused.
const (
	KindText   = "text"
	KindSecret = "secret"
)

// slot is one place a string can be in a tool's arguments, with its kind.
type slot struct {
	path    string // "/a/*/b"
	name    string // the property it hangs from ("" at the top)
	kind    string
	access  string // for paths: read or write
	program string // for argv
	// verbatim: the server uses the value as sent (no trimming), so
	// whitespace and quotes around a path or URL are not refused.
	verbatim bool
	// explicit: the policy's args name the slot (or its array).
	explicit bool
	why      string // how the kind was decided, for the kind report
}

// annotations is what the model reads from each subschema beside what the
// library keeps: the library drops format and contentMediaType unless it
// asserts them, so a vocabulary of the guard's own records them.
type annotations struct {
	format, media string
}

func (annotations) Validate(*jsonschema.ValidatorContext, any) {}

var annotationVocab = &jsonschema.Vocabulary{
	URL: "urn:mcpguard:annotations",
	Compile: func(_ *jsonschema.CompilerContext, obj map[string]any) (jsonschema.SchemaExt, error) {
		f, _ := obj["format"].(string)
		m, _ := obj["contentMediaType"].(string)
		if f == "" && m == "" {
			return nil, nil
		}
		return annotations{format: strings.ToLower(f), media: strings.ToLower(m)}, nil
	},
}

// compileModelSchema compiles a tool's schema for the model: like
// compileSchema, with the annotation vocabulary.
func compileModelSchema(name string, raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	c.AssertVocabs()
	c.RegisterVocabulary(annotationVocab)
	loc := "mem://model/" + name + ".json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return s, nil
}

// expand returns the schemas a value at s must or may satisfy: s itself,
// what its $ref, $dynamicRef, allOf, anyOf, oneOf and if/then/else lead
// to, recursively, each once. Every branch counts: where the schema lets a
// value be a path in one branch and text in another, the stricter reading
// wins (kindFor).
func expand(ss ...*jsonschema.Schema) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	var add func(s *jsonschema.Schema)
	add = func(s *jsonschema.Schema) {
		if s == nil || slices.Contains(out, s) {
			return
		}
		out = append(out, s)
		add(s.Ref)
		add(s.RecursiveRef)
		if s.DynamicRef != nil {
			add(s.DynamicRef.Ref)
		}
		for _, list := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf} {
			for _, x := range list {
				add(x)
			}
		}
		add(s.If)
		add(s.Then)
		add(s.Else)
	}
	for _, s := range ss {
		add(s)
	}
	return out
}

// members returns the schemas of an object member key under ss: its
// properties, the patternProperties it matches, else additionalProperties
// (and unevaluatedProperties). declared is false when the key is not a
// named property of any of them.
func members(ss []*jsonschema.Schema, key string) (out []*jsonschema.Schema, declared bool) {
	for _, s := range ss {
		if p, ok := s.Properties[key]; ok {
			out, declared = append(out, p), true
			continue
		}
		matched := false
		for re, p := range s.PatternProperties {
			if re.MatchString(key) {
				out, matched = append(out, p), true
			}
		}
		if matched {
			continue
		}
		if a, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
			out = append(out, a)
		}
		if s.UnevaluatedProperties != nil {
			out = append(out, s.UnevaluatedProperties)
		}
	}
	return expand(out...), declared
}

// items returns the schemas of item i of an array under ss.
func items(ss []*jsonschema.Schema, i int) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	for _, s := range ss {
		switch {
		case i < len(s.PrefixItems):
			out = append(out, s.PrefixItems[i])
			continue
		case s.Items2020 != nil:
			out = append(out, s.Items2020)
			continue
		}
		switch it := s.Items.(type) {
		case *jsonschema.Schema:
			out = append(out, it)
		case []*jsonschema.Schema:
			if i < len(it) {
				out = append(out, it[i])
			} else if a, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
				out = append(out, a)
			}
		}
		if s.UnevaluatedItems != nil {
			out = append(out, s.UnevaluatedItems)
		}
	}
	return expand(out...)
}

// defaultOf returns the default the schemas give a member, if any.
func defaultOf(ss []*jsonschema.Schema) (any, bool) {
	for _, s := range ss {
		if s.Default != nil {
			return *s.Default, true
		}
	}
	return nil, false
}

// properties lists every named property of the object schemas ss.
func properties(ss []*jsonschema.Schema) []string {
	var names []string
	for _, s := range ss {
		for n := range s.Properties {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	sort.Strings(names)
	return names
}

// hints is what a slot's kind is decided from besides its own schema.
type hints struct {
	tool     string // the tool's name
	readOnly bool   // the tool only reads (annotations, name, description)
}

// What an argument is, from its name. Names are matched on the whole name,
// or on a suffix for the path patterns (file_path, sourceDir).
var (
	// Paths the server writes to whatever the tool is called.
	writeName = regexp.MustCompile(`^(?i:(out|output|dest|dst|destination|target|save|write|export|new)([_-]?(file|path|dir|directory|folder|name|location|as|to))?)$`)
	// Globs and patterns over files: paths as far as the guard is
	// concerned ("../secret*" climbs out like "../secret").
	globName   = regexp.MustCompile(`^(?i:pattern|patterns|glob|globs|include|includes|exclude|excludes|file_?pattern|path_?pattern)$`)
	secretName = regexp.MustCompile(`(?i)(^|[_-])(password|passwd|passphrase|secret|token|api_?key|apikey|access_?key|private_?key|credentials?|auth)$|[a-z](Password|Secret|Token|ApiKey|Key)$`)
	// Read-only tools by name: a verb that reads, and none that writes.
	readVerb = regexp.MustCompile(`(?i)(^|[_-])(read|get|list|search|find|view|show|stat|info|describe|grep|glob|tree|ls|cat|head|tail|query|fetch|count|check|lookup|inspect|diff|status|log)`)
	// Descriptions: "path to the output file", "URL of the page".
	descPath    = regexp.MustCompile(`(?i)\b(file|directory|folder)\s*(path|name)\b|\bpath\b|\bglob\b`)
	descURL     = regexp.MustCompile(`(?i)\b(url|uri|https?://|web\s*address|endpoint|link)\b`)
	descCommand = regexp.MustCompile(`(?i)\b(shell|command\s*line|bash|sh\s+-c)\b`)
	descWrite   = regexp.MustCompile(`(?i)\b(writ(e|es|ten|ing)|sav(e|es|ed)|creat(e|es|ed)|output|destination|export(s|ed)?|overwrit(e|es))\b`)
)

// classify decides a slot's kind from its schemas, its name and its
// description, and says why.
func classify(name string, ss []*jsonschema.Schema, h hints) (kind, access, why string) {
	var formats, media []string
	var desc strings.Builder
	secretFlag := false
	for _, s := range ss {
		for _, x := range s.Extensions {
			if a, ok := x.(annotations); ok {
				formats = append(formats, a.format)
				media = append(media, a.media)
			}
		}
		desc.WriteString(s.Description + " " + s.Title + " ")
		secretFlag = secretFlag || s.WriteOnly
	}
	d := desc.String()
	for _, s := range ss {
		if s.Enum != nil || s.Const != nil {
			return KindText, "", "an enum or const: the schema fixes the value"
		}
	}
	switch {
	case anyIn(formats, "path", "file-path", "filepath", "file", "directory", "dir", "uri-reference", "iri-reference"):
		kind, why = KindPath, "format "+firstOf(formats)
	case anyIn(formats, "uri", "url", "iri"):
		kind, why = KindURL, "format "+firstOf(formats)
	case anyIn(formats, "hostname", "idn-hostname", "ipv4", "ipv6"):
		kind, why = KindHost, "format "+firstOf(formats)
	case anyIn(formats, "password") || secretFlag:
		kind, why = KindSecret, "format password or writeOnly"
	case anyIn(media, "text/uri-list"):
		kind, why = KindURL, "contentMediaType text/uri-list"
	default:
		kind, why = byName(name, d)
	}
	if kind == KindPath {
		access, why = pathAccess(name, d, h, why)
	}
	return kind, access, why
}

// byName decides a kind from the name, then the description.
func byName(name, desc string) (kind, why string) {
	switch {
	case name == "":
	case urlName.MatchString(name):
		return KindURL, "name " + name
	case pathName.MatchString(name), writeName.MatchString(name), globName.MatchString(name):
		return KindPath, "name " + name
	case commandName.MatchString(name):
		return KindCommand, "name " + name
	case execName.MatchString(name):
		return KindExec, "name " + name
	case hostName.MatchString(name):
		return KindHost, "name " + name
	case argvName.MatchString(name):
		return KindArgv, "name " + name
	case secretName.MatchString(name):
		return KindSecret, "name " + name
	}
	switch {
	case descURL.MatchString(desc):
		return KindURL, "description says URL"
	case descPath.MatchString(desc):
		return KindPath, "description says path"
	case descCommand.MatchString(desc):
		return KindCommand, "description says command"
	}
	return KindText, "no path, URL, host, command or secret sign"
}

// pathAccess is write unless the argument or the tool says it only reads:
// the stricter reading where nothing says.
func pathAccess(name, desc string, h hints, why string) (string, string) {
	switch {
	case writeName.MatchString(name):
		return Write, why + "; write: the name says output"
	case descWrite.MatchString(desc):
		return Write, why + "; write: the description says so"
	case h.readOnly:
		return Read, why + "; read: the tool only reads"
	}
	return Write, why + "; write: nothing says it only reads"
}

func anyIn(list []string, want ...string) bool {
	for _, x := range list {
		if slices.Contains(want, x) {
			return true
		}
	}
	return false
}

func firstOf(list []string) string {
	for _, x := range list {
		if x != "" {
			return x
		}
	}
	return ""
}

// acceptsString reports whether a value of ss may be a string (no type,
// or "string" among the types, or a string const/enum).
func acceptsString(ss []*jsonschema.Schema) bool {
	typed := false
	for _, s := range ss {
		if s.Types == nil {
			continue
		}
		typed = true
		if slices.Contains(s.Types.ToStrings(), "string") {
			return true
		}
	}
	return !typed
}

// maxModelDepth bounds how deep the static model (the kind report, and
// the slots the engine knows before a call) follows a schema: a recursive
// schema (a tree of nodes) is judged by the live walk below that.
const maxModelDepth = 8

// keyAt is an object of a tool's schema whose keys a caller chooses: its
// slot path, its name and its schemas (keySlot decides their kind once
// the policy's args are merged).
type keyAt struct {
	path, name string
	ss         []*jsonschema.Schema
}

// model lists the slots of a tool's schema, keyed by path, with the kinds
// classify gives them: the static part of the model, which the kind
// report prints and the engine starts from; and the objects whose keys a
// caller chooses.
func model(root *jsonschema.Schema, h hints) (out map[string]*slot, keys []keyAt) {
	out = map[string]*slot{}
	var walk func(ss []*jsonschema.Schema, path, name string, depth int)
	walk = func(ss []*jsonschema.Schema, path, name string, depth int) {
		if depth > maxModelDepth || len(ss) == 0 {
			return
		}
		if path != "" && acceptsString(ss) {
			k, a, why := classify(name, ss, h)
			p := path
			if k == KindArgv && strings.HasSuffix(p, "/*") {
				p = strings.TrimSuffix(p, "/*") // an argv slot is the whole list
			}
			if _, seen := out[p]; !seen {
				out[p] = &slot{path: p, name: name, kind: k, access: a, why: why}
			}
		}
		for _, p := range properties(ss) {
			sub, _ := members(ss, p)
			walk(sub, path+"/"+escapeToken(p), p, depth+1)
		}
		if chosenKeys(ss) {
			keys = append(keys, keyAt{path, name, ss})
		}
		if extra, _ := members(ss, "\x00"); len(extra) > 0 {
			walk(extra, path+"/*", name, depth+1)
		}
		if it := items(ss, 1<<20); len(it) > 0 {
			walk(it, path+"/*", name, depth+1)
		}
	}
	walk(expand(root), "", "", 0)
	return out, keys
}

// keyToken is the last token of a key slot: "/files/~k" is every key of
// the extra members of the object at "/files". escapeToken never yields it
// ("~" is always escaped), so no member name can collide with it.
const keyToken = "~k"

// propertyNames returns the propertyNames schemas of the object schemas
// ss: what the schema says of the keys a caller chooses.
func propertyNames(ss []*jsonschema.Schema) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	for _, s := range ss {
		if s.PropertyNames != nil {
			out = append(out, s.PropertyNames)
		}
	}
	return expand(out...)
}

// chosenKeys reports whether the object schemas ss let a caller choose
// member names (additionalProperties other than false,
// patternProperties, propertyNames): the server then receives keys no
// schema fixed, and the model gives them a slot of their own.
func chosenKeys(ss []*jsonschema.Schema) bool {
	for _, s := range ss {
		if _, ok := s.AdditionalProperties.(*jsonschema.Schema); ok ||
			len(s.PatternProperties) > 0 || s.PropertyNames != nil {
			return true
		}
	}
	return false
}

// keyKinds are the kinds a map's keys take from the map itself (its name,
// its description, the policy's args for it): a map named "files" is
// keyed by file names. A map of commands or secrets is keyed by names,
// judged as free text.
var keyKinds = []string{KindPath, KindURL, KindHost}

// keySlot is the slot of the keys a caller chooses in the object at path
// (named name, with schemas ss), decided from the policy's args for
// path+"/~k", else the schema's propertyNames (format, description), else
// the object's own kind when it is a path, URL or host (the policy's args
// for it, its name, its description), else free text. A key is a string
// the server receives: it is judged like any other.
func (t *tool) keySlot(path, name string, ss []*jsonschema.Schema) *slot {
	kp := path + "/" + keyToken
	if s, ok := t.slots[kp]; ok {
		return s
	}
	mk := func(kind, access, why string) *slot {
		return &slot{path: kp, name: name, kind: kind, access: access, why: why}
	}
	if pn := propertyNames(ss); len(pn) > 0 {
		k, a, why := classify("", pn, t.hints)
		if k != KindText || strings.HasPrefix(why, "an enum") {
			return mk(k, a, "propertyNames: "+why)
		}
	}
	if s, ok := t.slots[path]; ok && s.explicit && slices.Contains(keyKinds, s.kind) {
		return mk(s.kind, s.access, "the keys of "+s.argName()+": "+s.why)
	}
	if name != "" {
		if k, a, why := classify(name, ss, t.hints); slices.Contains(keyKinds, k) {
			return mk(k, a, "the keys of "+name+": "+why)
		}
	}
	return mk(KindText, "", "a key no schema fixes: free text")
}

// escapeToken escapes a property name for a slot path as a JSON pointer
// does ("~" as "~0", "/" as "~1"), and "*" as "~2" so that it cannot be
// read as "every member".
func escapeToken(s string) string {
	if !strings.ContainsAny(s, "~/*") {
		return s
	}
	return strings.NewReplacer("~", "~0", "/", "~1", "*", "~2").Replace(s)
}

// compileSlots builds the tool's slots: the static model of its schema,
// with the policy's args merged over it (an arg names a top-level member,
// or a slot path; a kind or access it leaves empty is the derived one).
func (t *tool) compileSlots(args map[string]Arg) error {
	t.slots = map[string]*slot{}
	var keys []keyAt
	if t.model != nil {
		t.slots, keys = model(t.model, t.hints)
		for _, name := range properties(expand(t.model)) {
			if sub, _ := members(expand(t.model), name); len(sub) > 0 {
				if _, ok := defaultOf(sub); ok || nestedDefault(sub, maxModelDepth) {
					t.topDefaults = append(t.topDefaults, name)
				}
			}
		}
	}
	for n, a := range args {
		if a.Kind != "" && !slices.Contains(Kinds, a.Kind) {
			return fmt.Errorf("argument %s: unknown kind %q", n, a.Kind)
		}
		if a.Access != "" && a.Access != Read && a.Access != Write {
			return fmt.Errorf("argument %s: path access %q (want read or write)", n, a.Access)
		}
		if a.Kind == KindPath && a.Access == "" {
			return fmt.Errorf("argument %s: path access %q (want read or write)", n, a.Access)
		}
		path := n
		if !strings.HasPrefix(n, "/") {
			path = "/" + escapeToken(n)
		}
		name := path[strings.LastIndexByte(path, '/')+1:]
		s := &slot{path: path, name: name, explicit: true, why: "the policy's args"}
		if d, ok := t.slots[path]; ok {
			*s = *d
			s.explicit, s.why = true, "the policy's args (derived: "+d.why+")"
		} else if a.Kind == "" {
			var ss []*jsonschema.Schema
			s.kind, s.access, s.why = classify(name, ss, t.hints)
		}
		if a.Kind != "" {
			s.kind = a.Kind
		}
		if a.Access != "" {
			s.access = a.Access
		}
		if s.kind == KindPath && s.access == "" {
			s.access = Write
		}
		s.program, s.verbatim = a.Program, a.Verbatim
		t.slots[path] = s
		// What the model derived below an array or map the policy names
		// ("paths": each item) yields to the policy.
		for p, d := range t.slots {
			if !d.explicit && strings.HasPrefix(p, path+"/*") && strings.Trim(p[len(path):], "/*") == "" {
				c := *s
				c.path = p
				t.slots[p] = &c
			}
		}
		t.hasArgv = t.hasArgv || s.kind == KindArgv
	}
	// The keys of maps take their kind once the args are in (a map the
	// policy calls a path has path keys).
	for _, k := range keys {
		s := t.keySlot(k.path, k.name, k.ss)
		t.slots[s.path] = s
	}
	for _, s := range t.slots {
		t.hasArgv = t.hasArgv || s.kind == KindArgv
	}
	return nil
}

// KindLine is one row of the kind report: a slot of a tool and the kind
// the model gives it, with why.
type KindLine struct {
	Tool, Arg, Kind, Access, Why string
}

// KindReport lists, for every tool of p, every slot its schema has (and
// those its args name) with the kind the engine will judge it as and why,
// sorted by tool and slot: what `policy init` prints so that an operator
// can correct a kind in tools.T.args.
func KindReport(p *Policy) ([]KindLine, error) {
	var out []KindLine
	for _, name := range slices.Sorted(maps.Keys(p.Tools)) {
		pt := p.Tools[name]
		t := &tool{name: name, readOnly: pt.ReadOnly, hints: hints{tool: name, readOnly: pt.ReadOnly}}
		if len(pt.Schema) > 0 {
			var err error
			if t.model, err = compileModelSchema(name, pt.Schema); err != nil {
				return nil, fmt.Errorf("tool %s: %w", name, err)
			}
		}
		if err := t.compileSlots(pt.Args); err != nil {
			return nil, fmt.Errorf("tool %s: %w", name, err)
		}
		for _, path := range slices.Sorted(maps.Keys(t.slots)) {
			s := t.slots[path]
			out = append(out, KindLine{Tool: name, Arg: strings.TrimPrefix(path, "/"), Kind: s.kind, Access: s.access, Why: s.why})
		}
	}
	return out, nil
}
