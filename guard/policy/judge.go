package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mcpguard/mcpguard/guard/validate"
)

// RuleUnclean refuses a path or URL with control characters, or with
// whitespace or quotes around it, that the server would strip or read
// differently from the guard (" /x", "\t../x", "'/x'"), unless the policy
// says the server keeps the value verbatim.
const RuleUnclean = "args.unclean_value"

// maxJudgeDepth bounds how deep the call-time walk goes into nested
// arguments; deeper values are refused (args.malformed): nothing the
// guard has not judged reaches the server.
const maxJudgeDepth = 64

// call is one tools/call being judged: the tool, the decoded arguments.
type call struct {
	e    *Engine
	ctx  context.Context
	t    *tool
	args map[string]any
	// j collects the strings of the arguments (not defaults) for the
	// session, when not nil.
	j *judged
	// inDefault: the value judged is a schema default, not an argument.
	inDefault bool
	// keys are the member names no schema fixes, met so far: strings the
	// server receives, for the content checks.
	keys []string
}

// judgeArgs walks the arguments with the tool's model: every string is
// judged by its slot's kind and by its value, and so is every key of an
// object that the schema does not name (a key slot, keySlot); a member
// that is omitted or null is judged as the schema's default the server
// will use instead. It returns those keys, for the content checks.
func (e *Engine) judgeArgs(ctx context.Context, t *tool, args map[string]any, j *judged) ([]string, *Violation) {
	c := &call{e: e, ctx: ctx, t: t, args: args, j: j}
	bad := c.object(args, t.rootSchemas(), "", "", 0)
	return c.keys, bad
}

// collect records s, a string of the arguments at slot sl, for the session.
func (j *judged) collect(sl *slot, s string) {
	if j == nil {
		return
	}
	if sl.kind == KindSecret {
		j.secrets = append(j.secrets, s)
	} else {
		j.plain = append(j.plain, s)
	}
}

func (t *tool) rootSchemas() []*jsonschema.Schema {
	if t.model == nil {
		return nil
	}
	return expand(t.model)
}

func (c *call) value(v any, ss []*jsonschema.Schema, path, name string, depth int) *Violation {
	if depth > maxJudgeDepth {
		return &Violation{Layer: LayerL1, Rule: RuleArgsMalformed, Target: path,
			Reason: fmt.Sprintf("arguments nested deeper than %d levels at %s", maxJudgeDepth, path)}
	}
	sl := c.t.slotAt(path, name, ss)
	if sl.kind == KindArgv {
		return c.argv(sl, v)
	}
	switch x := v.(type) {
	case string:
		if !c.inDefault {
			c.j.collect(sl, x)
		}
		return c.e.judgeString(c.ctx, c.t, sl, x)
	case map[string]any:
		return c.object(x, ss, path, name, depth)
	case []any:
		for i, it := range x {
			if bad := c.value(it, items(ss, i), path+"/*", name, depth+1); bad != nil {
				return bad
			}
		}
	case nil:
	default:
		if sl.explicit && sl.kind != KindText && sl.kind != KindSecret {
			return &Violation{Layer: LayerL1, Rule: RuleKindMismatch, Target: sl.argName(),
				Reason: fmt.Sprintf("argument %q of kind %s must be a string or strings", sl.argName(), sl.kind)}
		}
	}
	return nil
}

// object judges an object's members (the keys no schema or policy names
// among them), and the defaults the server uses in place of the members
// it omits or leaves blank.
func (c *call) object(m map[string]any, ss []*jsonschema.Schema, path, name string, depth int) *Violation {
	for _, k := range sortedKeys(m) {
		sub, declared := members(ss, k)
		p := path + "/" + escapeToken(k)
		if _, named := c.t.slots[p]; !declared && !named {
			p = path + "/*"
			if bad := c.key(k, ss, path, name); bad != nil {
				return bad
			}
		}
		v := m[k]
		bad := c.value(v, sub, p, k, depth+1)
		if bad == nil && blank(v) {
			bad = c.fallback(sub, p, k, v == nil, depth+1)
		}
		if bad != nil {
			if bad.Arg == "" {
				bad.Arg = argLabel(p, k)
			}
			return bad
		}
	}
	for _, k := range properties(ss) {
		if _, present := m[k]; present {
			continue
		}
		sub, _ := members(ss, k)
		p := path + "/" + escapeToken(k)
		if bad := c.fallback(sub, p, k, true, depth+1); bad != nil {
			if bad.Arg == "" {
				bad.Arg = argLabel(p, k)
			}
			return bad
		}
	}
	return nil
}

// fallback judges what a server uses for a member it is not given a value
// for: omitted, null, or blank (a server that reads `value or default`
// takes "", [], {}, 0 and false for absent too): the schema's default;
// and for an omitted or null object without one, the defaults of its own
// members (a server builds the object from them: Pydantic's
// default_factory), to maxModelDepth levels.
func (c *call) fallback(ss []*jsonschema.Schema, p, k string, absent bool, depth int) *Violation {
	d, ok := defaultOf(ss)
	switch {
	case ok && d != nil:
	case absent && depth <= maxModelDepth && nestedDefault(ss, maxModelDepth-depth):
		d = map[string]any{}
	default:
		return nil
	}
	was := c.inDefault
	c.inDefault = true
	bad := c.value(d, ss, p, k, depth)
	c.inDefault = was
	if bad != nil && !was {
		bad.Reason += " (the schema's default, which the server uses when the argument is omitted or blank)"
	}
	return bad
}

// blank reports whether a server that reads `value or default` takes v
// for absent: null, a string with nothing visible in it, an empty array
// or object, zero, false.
func blank(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return strings.TrimFunc(x, invisibleEdge) == ""
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	case bool:
		return !x
	case float64:
		return x == 0
	case json.Number:
		f, err := x.Float64()
		return err == nil && f == 0
	}
	return false
}

// nestedDefault reports whether an object of ss has a member with a
// default, at most depth levels down.
func nestedDefault(ss []*jsonschema.Schema, depth int) bool {
	if depth < 0 {
		return false
	}
	for _, k := range properties(ss) {
		sub, _ := members(ss, k)
		if _, ok := defaultOf(sub); ok || nestedDefault(sub, depth-1) {
			return true
		}
	}
	return false
}

// invisibleEdge: what a server's trim may strip from a value's ends, and
// more: whitespace and every other invisible character (Unicode's
// separators and format and control characters: U+FEFF, which
// JavaScript's trim strips, U+200B) and quotes. NUL is left to the path
// checks (path.nul).
func invisibleEdge(r rune) bool {
	return r != 0 && (unicode.IsSpace(r) || unicode.In(r, unicode.Z, unicode.C)) || r == '\'' || r == '"' || r == '`'
}

// key judges k, a member name of the object at path that no schema or
// policy names, by the object's key slot.
func (c *call) key(k string, ss []*jsonschema.Schema, path, name string) *Violation {
	sl := c.t.keySlot(path, name, ss)
	if !c.inDefault {
		c.j.collect(sl, k)
	}
	c.keys = append(c.keys, k)
	if bad := c.e.judgeString(c.ctx, c.t, sl, k); bad != nil {
		if bad.Arg == "" {
			bad.Arg = sl.argName()
		}
		bad.Reason += " (a key of the object)"
		return bad
	}
	return nil
}

// argv checks an argv slot's value (a string or an array of strings) as
// the argument list of its program.
func (c *call) argv(sl *slot, v any) *Violation {
	a := sl.rule()
	var list []string
	mismatch := false
	eachString(v, func(s string) bool { list = append(list, s); return true }, func() { mismatch = true })
	if mismatch {
		return &Violation{Layer: LayerL1, Rule: RuleKindMismatch, Target: a.name,
			Reason: fmt.Sprintf("argument %q of kind %s must be a string or strings", a.name, a.Kind)}
	}
	for _, x := range list {
		c.j.collect(sl, x)
	}
	prog := a.Program
	if prog == "" {
		for _, s := range c.t.slots {
			if s.kind == KindExec && strings.Count(s.path, "/") == 1 {
				prog, _ = c.args[s.name].(string)
				break
			}
		}
	}
	if bad := c.e.checkWords(c.ctx, c.t, a, prog, list); bad != nil {
		bad.Arg = a.name
		return bad
	}
	return nil
}

// slotAt returns the slot for a value at path: the model's (the policy's
// args merged over the derived kinds); for an item of an array the slot of
// the array itself when the policy names that ("paths" of kind path: each
// string is a path); else the kind classify gives it here.
func (t *tool) slotAt(path, name string, ss []*jsonschema.Schema) *slot {
	if s, ok := t.slots[path]; ok {
		return s
	}
	for p := path; strings.HasSuffix(p, "/*"); {
		p = strings.TrimSuffix(p, "/*")
		if s, ok := t.slots[p]; ok && s.explicit {
			return s
		}
	}
	k, a, why := classify(name, ss, t.hints)
	return &slot{path: path, name: name, kind: k, access: a, why: why}
}

// judgeString judges one string by its slot's kind and by its value, and
// then (with L2) every form a server may turn it into (formsOf).
func (e *Engine) judgeString(ctx context.Context, t *tool, sl *slot, s string) *Violation {
	return e.inForms(s, func(v string) *Violation { return e.judgeOne(ctx, t, sl, v) })
}

// inForms judges s with judge, then each of its forms (formsOf); a form's
// violation says which form it was. judge does not escape: the closures
// callers pass stay on the stack.
func (e *Engine) inForms(s string, judge func(string) *Violation) *Violation {
	if bad := judge(s); bad != nil {
		return bad
	}
	for _, f := range e.formsOf(s) {
		if bad := judge(f); bad != nil {
			return inForm(bad, f)
		}
	}
	return nil
}

// formsOf returns, with L2, the forms a server that percent-decodes or
// Unicode-normalises s would use instead (validate.Forms): what the guard
// would refuse in a decoded or normalised form it refuses as sent.
// Percent-decoding is left to the URI readers for a value that is a URI
// (a URL's %20 is the URL's own; file: and server schemes are decoded
// where they are judged).
func (e *Engine) formsOf(s string) []string {
	if !e.o.L2 {
		return nil
	}
	v := strings.TrimFunc(s, invisibleEdge)
	_, _, uri := uriScheme(v)
	return validate.Forms(s, !uri && !validate.IsFileURI(v))
}

// inForm says in bad's reason that the form f was refused.
func inForm(bad *Violation, f string) *Violation {
	bad.Reason += fmt.Sprintf(" (in the form %q, which a server that percent-decodes or NFKC-normalises the value uses)", f)
	return bad
}

// judgeOne judges one string by its slot's kind and by its value.
func (e *Engine) judgeOne(ctx context.Context, t *tool, sl *slot, s string) *Violation {
	a := sl.rule()
	switch sl.kind {
	case KindExec, KindCommand, KindHost:
		return e.checkArg(ctx, t, a, s)
	case KindArgv:
		return e.checkWords(ctx, t, a, a.Program, []string{s})
	case KindPath:
		return e.judgeAs(ctx, t, a, s, readValue(s, true))
	case KindURL:
		// A path where a URL is expected is read as the file it names (a
		// fetcher that takes both); a URL of any scheme, file: included,
		// is judged as a URL, whose schemes the policy lists.
		if r := readValue(s, false); r == valuePath && !validate.IsFileURI(strings.TrimSpace(s)) {
			a.Access = Read
			return e.judgeAs(ctx, t, a, s, r)
		}
		return e.checkArg(ctx, t, a, s)
	}
	// Text and secrets: judged as a path or a URL when the value reads as
	// one (one token: free text with a space in it is not read as a path).
	r := readValue(s, false)
	if r == valueNone {
		return nil
	}
	if t.readOnly {
		a.Access = Read
	} else {
		a.Access = Write
	}
	return e.judgeAs(ctx, t, a, s, r)
}

// What a value reads as.
const (
	valueNone   = iota
	valuePath   // a path: absolute, ~, file:, a ".." segment (or anything, for a path slot)
	valueURL    // a URL of a network scheme (http, https, ws, wss, ftp)
	valueScheme // a URI of another scheme, which a server may map onto files
)

// netSchemes are the URL schemes a server fetches from the network.
var netSchemes = []string{"http", "https", "ws", "wss", "ftp", "ftps", "sftp", "ssh", "git", "gopher", "dict", "ldap", "tftp", "smb"}

// readValue says what s reads as once stripped of whitespace, other
// invisible characters and quotes.
// A path slot's value is a path unless it names a URL; another slot's
// value only when it is one token that reads as one.
func readValue(s string, pathSlot bool) int {
	v := strings.TrimFunc(s, invisibleEdge)
	if scheme, _, ok := uriScheme(v); ok {
		switch {
		case strings.EqualFold(scheme, "file"):
			return valuePath
		case containsFold(netSchemes, scheme):
			return valueURL
		}
		return valueScheme
	}
	if pathSlot {
		return valuePath
	}
	if strings.ContainsFunc(v, unicode.IsSpace) || v == "" {
		return valueNone
	}
	if v[0] == '/' || v[0] == '~' || v[0] == '\\' || hasDotDotSeg(v) || len(v) > 2 && v[1] == ':' && (v[2] == '\\' || v[2] == '/') {
		return valuePath
	}
	return valueNone
}

// uriScheme splits "scheme:rest" where the scheme is at least two
// characters (so "C:\x" is a drive) and rest starts with "/" (a URI with
// a path or an authority), or the scheme is file.
func uriScheme(s string) (scheme, rest string, ok bool) {
	i := strings.IndexByte(s, ':')
	if i < 2 {
		return "", "", false
	}
	for j := 0; j < i; j++ {
		c := s[j]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || j > 0 && (c >= '0' && c <= '9' || c == '+' || c == '.' || c == '-')) {
			return "", "", false
		}
	}
	scheme, rest = s[:i], s[i+1:]
	if !strings.HasPrefix(rest, "/") && !strings.HasPrefix(rest, `\`) && !strings.EqualFold(scheme, "file") {
		return "", "", false
	}
	return scheme, rest, true
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// judgeAs judges s as what it reads as: a path (with a's access), a URL,
// or a URI of a server's own scheme. A path or URL with control
// characters, or whitespace or quotes around it, is refused first, unless
// the slot is verbatim.
func (e *Engine) judgeAs(ctx context.Context, t *tool, a *argRule, s string, r int) *Violation {
	if e.o.L2 && !t.waive[RuleUnclean] {
		if why := unclean(s, a.Verbatim); why != "" {
			return &Violation{Layer: LayerL2, Rule: RuleUnclean, Target: a.name,
				Reason: fmt.Sprintf("argument %q is read as a path or URL and %s, which a server may strip or read differently", a.name, why)}
		}
	}
	switch r {
	case valueURL:
		d, err := validate.ParseURL(s, e.schemes)
		if err != nil {
			return urlViolation(a.name, err)
		}
		return e.checkDest(ctx, t, d, RuleURLHost)
	case valueScheme:
		return e.checkSchemeURI(ctx, t, a, s)
	}
	if a.Access == "" {
		a.Access = Write
	}
	if bad := e.checkPath(t, a, s); bad != nil || !validate.IsFileURI(strings.TrimSpace(s)) {
		return bad
	}
	return e.checkURIParts(ctx, t, a, strings.TrimSpace(s))
}

// unclean says what makes s unsafe to judge as a path or URL, or "":
// control characters always; whitespace or quotes around it unless the
// server keeps the value verbatim.
func unclean(s string, verbatim bool) string {
	for _, r := range s {
		// NUL is the path checks' own (path.nul).
		if r != 0 && (r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f || r == utf8.RuneError) {
			return fmt.Sprintf("holds the control character %q", r)
		}
	}
	if verbatim {
		return ""
	}
	first, _ := utf8.DecodeRuneInString(s)
	last, _ := utf8.DecodeLastRuneInString(s)
	for _, r := range []rune{first, last} {
		switch {
		case r == 0:
		case unicode.IsSpace(r) || unicode.In(r, unicode.Z, unicode.C):
			return fmt.Sprintf("has whitespace or an invisible character (%U) around it", r)
		case r == '\'' || r == '"' || r == '`':
			return "has quotes around it"
		}
	}
	return ""
}

// checkSchemeURI judges a URI of a scheme the server defines ("notes://a",
// "repo:///x"): many servers map it onto files by joining what follows the
// scheme to a base of their own, so ".." in it (raw or percent-encoded) is
// refused, and an absolute path in it (which such a join keeps whole:
// notes:///etc/passwd is /etc/passwd) is judged as a path with a's access;
// then every component of its query and fragment (checkURIParts).
func (e *Engine) checkSchemeURI(ctx context.Context, t *tool, a *argRule, uri string) *Violation {
	if bad := e.checkSchemePath(t, a, uri); bad != nil {
		return bad
	}
	pa := *a
	if pa.Access == "" {
		pa.Access = Read
	}
	return e.checkURIParts(ctx, t, &pa, uri)
}

// checkSchemePath is checkSchemeURI's judgement of what the URI names.
func (e *Engine) checkSchemePath(t *tool, a *argRule, uri string) *Violation {
	_, rest, _ := strings.Cut(uri, ":")
	dec := rest
	for range 3 {
		u, err := url.PathUnescape(dec)
		if err != nil || u == dec {
			break
		}
		dec = u
	}
	for _, s := range []string{rest, dec} {
		if strings.IndexByte(s, 0) >= 0 {
			return &Violation{Layer: LayerL2, Rule: RulePathNUL, Target: uri,
				Reason: fmt.Sprintf("URI %q carries a NUL byte", uri)}
		}
		if hasDotDotSeg(s) {
			return &Violation{Layer: LayerL2, Rule: RuleResourceTraversal, Target: uri,
				Reason: fmt.Sprintf("URI %q climbs out of its tree with ..", uri)}
		}
	}
	for _, s := range []string{rest, dec} {
		inner := strings.TrimPrefix(strings.ReplaceAll(s, `\`, "/"), "//")
		if strings.HasPrefix(inner, "/") || strings.HasPrefix(inner, "~") {
			pa := *a
			if pa.Access == "" {
				pa.Access = Read
			}
			return e.checkPath(t, &pa, inner)
		}
	}
	return nil
}

// rule is the slot as the checks of engine.go take it.
func (s *slot) rule() *argRule {
	return &argRule{name: s.argName(), Arg: Arg{Kind: s.kind, Access: s.access, Program: s.program, Verbatim: s.verbatim}}
}

// argLabel names the member k at slot path p for a violation: its path
// below the top ("options/output"), or k for a member of the top-level
// object that the schema does not name.
func argLabel(p, k string) string {
	if p == "/*" {
		return k
	}
	return strings.TrimPrefix(p, "/")
}

// argName is how violations name the slot: the top-level name, or the
// path below it ("options/output", "files/*/path").
func (s *slot) argName() string {
	if s.path == "" || s.path == "/*" {
		return s.name
	}
	return strings.TrimPrefix(s.path, "/")
}
