package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mcpguard/mcpguard/guard/launch"
	"github.com/mcpguard/mcpguard/guard/pathrules"
	"github.com/mcpguard/mcpguard/guard/validate"
)

// Layer names for events and denials.
const (
	LayerL1 = "L1"
	LayerL2 = validate.Layer
)

// Rule ids. L1 rules say the policy does not grant something; L2 rules say
// the argument's content is unsafe whatever the policy grants.
const (
	RuleToolNotAllowed  = "tool.not_allowed"
	RuleArgsMalformed   = "args.malformed"
	RuleSchema          = "schema.invalid"
	RuleKindMismatch    = "args.kind_mismatch"
	RulePathOutside     = "path.outside_roots"
	RuleURLHost         = "url.host_not_allowed"
	RuleNetHost         = "net.host_not_allowed"
	RuleExec            = "exec.not_allowed"
	RulePathNUL         = "path.nul"
	RulePathEncoded     = "path.encoded_traversal"
	RulePathRelative    = "path.relative"
	RulePathUnresolved  = "path.unresolvable"
	RulePathHome        = "path.home"
	RulePathFileURI     = "path.file_uri"
	RuleURLMalformed    = "url.malformed"
	RuleURLScheme       = "url.scheme"
	RuleURLUserinfo     = "url.userinfo"
	RuleURLObfuscated   = "url.obfuscated_host"
	RuleURLPrivate      = "url.private_address"
	RuleURLUnresolvable = "url.unresolvable"
	RuleCmdInjection    = "cmd.injection"
	RuleEnvReference    = "args.env_reference"
	RuleSecret          = "args.secret"
	RuleOptionLike      = "args.option_injection"
	RuleOptionDenied    = "args.option_not_allowed"
	// RulePathProtected refuses a write, inside a write root, to an entry
	// the user's tools run or obey (launch.IsProtected: .git's hooks and
	// config, .envrc, shell start-up files, editors' settings): the same
	// names L3 keeps read-only.
	RulePathProtected = "path.protected"
)

// Violation is why a call is refused.
type Violation struct {
	Layer, Rule, Reason string
	// Target is what the rule was applied to (a canonical path, host:port,
	// executable or argument name), so an override can be scoped to it.
	Target string
	Arg    string
}

// EngineOptions configures Compile.
type EngineOptions struct {
	// L2 turns on the content checks and symlink-resolving path
	// canonicalisation. Without it paths are only cleaned lexically.
	L2 bool
	// Resolver resolves host names of URL arguments (nil: the system's).
	Resolver validate.Resolver
	// ResolveTimeout bounds one look-up (default 2s).
	ResolveTimeout time.Duration
}

// Engine is a compiled policy: schemas compiled once, roots canonicalised,
// tool-scoped grants merged with the server-wide ones. It is read-only
// after Compile and safe for concurrent use.
type Engine struct {
	tools map[string]*tool
	// server holds the server-wide grants alone, for requests that name
	// no tool (resources, prompts, completions).
	server   *tool
	pathOpts validate.PathOptions
	schemes  []string
	o        EngineOptions
	general  bool // tests: never the fast paths of fast.go
}

type tool struct {
	name   string
	pin    string
	schema *jsonschema.Schema
	simple *simpleSchema // schema's simple form, nil when it has none
	// model is the schema compiled for the argument model (model.go),
	// slots its static part with the policy's args merged over it.
	model    *jsonschema.Schema
	slots    map[string]*slot
	hints    hints
	readOnly bool
	// topDefaults are the top-level members with a schema default (of
	// their own or of their members), for the fast path: an omitted or
	// blank member is judged as its default.
	topDefaults []string
	hasArgv     bool // an argument of kind argv (checked against the others)
	read        validate.Roots
	write       validate.Roots
	net         []netRule
	exec        map[string]bool
	waive       map[string]bool
}

type argRule struct {
	name string
	Arg
}

type netRule struct {
	name    string // host name, lower case ("" for address rules)
	prefix  netip.Prefix
	ports   []int
	private bool
}

// Compile prepares p for checking calls.
func Compile(p *Policy, o EngineOptions) (*Engine, error) {
	if o.ResolveTimeout == 0 {
		o.ResolveTimeout = 2 * time.Second
	}
	e := &Engine{tools: map[string]*tool{}, schemes: p.Network.Schemes, o: o,
		pathOpts: validate.PathOptions{Base: p.Workdir, Home: p.Home}}
	if p.Workdir != "" && !filepath.IsAbs(p.Workdir) {
		return nil, fmt.Errorf("workdir %q is not absolute", p.Workdir)
	}
	srv, err := compileTool("", Tool{}, p)
	if err != nil {
		return nil, err
	}
	e.server = srv
	for name, t := range p.Tools {
		ct, err := compileTool(name, t, p)
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", name, err)
		}
		e.tools[name] = ct
	}
	return e, nil
}

func compileTool(name string, t Tool, p *Policy) (*tool, error) {
	ct := &tool{name: name, pin: t.Pin, exec: map[string]bool{}, waive: map[string]bool{},
		readOnly: t.ReadOnly, hints: hints{tool: name, readOnly: t.ReadOnly}}
	var err error
	if len(t.Schema) > 0 {
		var doc any
		if ct.schema, doc, err = compileSchema(name, t.Schema); err != nil {
			return nil, err
		}
		ct.simple = newSimpleSchema(doc)
		if ct.model, err = compileModelSchema(name, t.Schema); err != nil {
			return nil, err
		}
	}
	if err := ct.compileSlots(t.Args); err != nil {
		return nil, err
	}
	if ct.read, err = validate.NewRoots(slices.Concat(p.Filesystem.Read, t.Read)...); err != nil {
		return nil, err
	}
	if ct.write, err = validate.NewRoots(slices.Concat(p.Filesystem.Write, t.Write)...); err != nil {
		return nil, err
	}
	for _, r := range slices.Concat(p.Network.Allow, t.Hosts) {
		nr, err := compileNetRule(r)
		if err != nil {
			return nil, err
		}
		ct.net = append(ct.net, nr)
	}
	for _, x := range slices.Concat(p.Exec.Allow, t.Exec) {
		if !filepath.IsAbs(x) {
			return nil, fmt.Errorf("executable %q is not absolute", x)
		}
		ct.exec[filepath.Clean(x)] = true
		if r, err := filepath.EvalSymlinks(x); err == nil {
			ct.exec[r] = true
		}
	}
	for _, w := range t.Waive {
		ct.waive[w] = true
	}
	return ct, nil
}

func compileNetRule(r NetRule) (netRule, error) {
	for _, p := range r.Ports {
		if p < 1 || p > 65535 {
			return netRule{}, fmt.Errorf("host %s: port %d out of range", r.Host, p)
		}
	}
	nr := netRule{ports: r.Ports, private: r.Private}
	h := strings.ToLower(strings.TrimSuffix(r.Host, "."))
	if pfx, err := netip.ParsePrefix(h); err == nil {
		nr.prefix = pfx.Masked()
		return nr, nil
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		nr.prefix = netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen())
		return nr, nil
	}
	if h == "" || strings.ContainsAny(h, "/:") {
		return netRule{}, fmt.Errorf("host %q is neither a name, an address nor a CIDR", r.Host)
	}
	nr.name = h
	return nr, nil
}

// noLoader refuses every external $ref: a policy's schemas are
// self-contained, and validating must never fetch anything.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema reference %s: external references are not loaded", url)
}

// compileSchema compiles a tool's schema, and returns the document it
// compiled too (for newSimpleSchema).
func compileSchema(name string, raw json.RawMessage) (*jsonschema.Schema, any, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, nil, fmt.Errorf("schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	loc := "mem://policy/" + name + ".json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, nil, fmt.Errorf("schema: %w", err)
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, nil, fmt.Errorf("schema: %w", err)
	}
	return s, doc, nil
}

// Tools lists the tools the engine admits.
func (e *Engine) Tools() []string {
	names := make([]string, 0, len(e.tools))
	for n := range e.tools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Allows reports whether the policy lists the tool.
func (e *Engine) Allows(toolName string) bool {
	_, ok := e.tools[toolName]
	return ok
}

// Waived reports whether rule is waived for toolName by the policy (or an
// override).
func (e *Engine) Waived(toolName, rule string) bool {
	t, ok := e.tools[toolName]
	return ok && t.waive[rule]
}

// Pinned returns the digest pinned for toolName, or "".
func (e *Engine) Pinned(toolName string) string {
	if t, ok := e.tools[toolName]; ok {
		return t.pin
	}
	return ""
}

// Check decides one tools/call. It returns nil when the call may go ahead.
func (e *Engine) Check(ctx context.Context, toolName string, rawArgs json.RawMessage) *Violation {
	return e.check(ctx, toolName, rawArgs, nil)
}

// check is Check; j, when not nil, collects the call's strings for the
// session (CheckCall).
func (e *Engine) check(ctx context.Context, toolName string, rawArgs json.RawMessage, j *judged) *Violation {
	t, ok := e.tools[toolName]
	if !ok {
		return &Violation{Layer: LayerL1, Rule: RuleToolNotAllowed, Target: toolName,
			Reason: fmt.Sprintf("tool %q is not in the policy", toolName)}
	}
	var args map[string]any
	var arr [maxFlat]flatArg
	flat, ok := parseFlat(rawArgs, arr[:0])
	switch {
	case ok && !e.general:
		// The common shape: checked without the map where it can be,
		// else decoded as encoding/json decodes it.
		if v, done := e.checkFlat(ctx, t, rawArgs, flat, j); done {
			return v
		}
		args = flatMap(flat)
	case len(bytes.TrimSpace(rawArgs)) == 0 || bytes.Equal(bytes.TrimSpace(rawArgs), []byte("null")):
		args = map[string]any{}
	default:
		// Into an interface, not the map: encoding/json then builds the
		// map directly instead of through reflection (half the cost).
		var v any
		err := json.Unmarshal(rawArgs, &v)
		if args, _ = v.(map[string]any); err != nil || args == nil {
			return &Violation{Layer: LayerL1, Rule: RuleArgsMalformed, Target: toolName,
				Reason: "arguments are not a JSON object"}
		}
	}
	if t.schema != nil && (t.simple == nil || e.general || !t.simple.accepts(args)) {
		if err := t.schema.Validate(args); err != nil {
			return &Violation{Layer: LayerL1, Rule: RuleSchema, Target: toolName,
				Reason: "arguments do not match the policy's schema: " + schemaErr(err)}
		}
	}
	keys, bad := e.judgeArgs(ctx, t, args, j)
	if bad != nil {
		return bad
	}
	if !e.o.L2 {
		return nil
	}
	if !validate.MayCarryContentRisk(rawArgs) {
		// No string can match alone; two joined still can.
		return e.checkSplit(t, args, keys)
	}
	return e.checkContent(t, args, keys)
}

// checkContent runs the L2 content checks over every string of args and
// over keys (the member names no schema fixes): secrets (also obfuscated
// or base64-encoded) and environment references in each, then secrets in
// the concatenation of them all, so that a key split across arguments
// ("AKIA" + "IOSFODNN7EXAMPLE") is seen as the server that joins them
// sees it.
func (e *Engine) checkContent(t *tool, args map[string]any, keys []string) *Violation {
	if !e.o.L2 {
		return nil
	}
	var all []string
	var bad *Violation
	one := func(name, s string) bool {
		all = append(all, s)
		if f, ok := validate.FindSecretDeep(s); ok && !t.waive[RuleSecret] {
			bad = &Violation{Layer: LayerL2, Rule: RuleSecret, Target: name,
				Reason: fmt.Sprintf("argument %q carries a secret (%s)", name, f.Kind)}
			return false
		}
		if f, ok := validate.FindEnvReference(s); ok && !t.waive[RuleEnvReference] {
			bad = &Violation{Layer: LayerL2, Rule: RuleEnvReference, Target: name,
				Reason: fmt.Sprintf("argument %q refers to the environment (%s %q)", name, f.Kind, s[f.Start:f.End])}
			return false
		}
		return true
	}
	for _, k := range keys {
		if !one("a key", k) {
			bad.Arg = "a key"
			return bad
		}
	}
	for _, name := range sortedKeys(args) {
		walk(args[name], func(s string) bool { return one(name, s) })
		if bad != nil {
			bad.Arg = name
			return bad
		}
	}
	return splitSecret(t, all)
}

// checkSplit is the split-secret part of checkContent alone.
func (e *Engine) checkSplit(t *tool, args map[string]any, keys []string) *Violation {
	if len(args)+len(keys) == 0 {
		return nil
	}
	if len(args) == 1 && len(keys) == 0 {
		for _, v := range args {
			if _, ok := v.(string); ok {
				return nil // one string: nothing to join
			}
		}
	}
	all := slices.Clone(keys)
	for _, name := range sortedKeys(args) {
		walk(args[name], func(s string) bool { all = append(all, s); return true })
	}
	return splitSecret(t, all)
}

// maxSplitParts bounds the strings whose pairs splitSecret joins.
const maxSplitParts = 16

// splitSecret looks for a secret in the strings joined: all of them in
// order and in reverse, and every ordered pair (a server that builds one
// value from two arguments may join them either way).
func splitSecret(t *tool, all []string) *Violation {
	if len(all) < 2 || t.waive[RuleSecret] {
		return nil
	}
	found := func(joined string) *Violation {
		if !validate.MayCarryContentRisk([]byte(joined)) {
			return nil
		}
		if f, ok := validate.FindSecretDeep(joined); ok {
			return &Violation{Layer: LayerL2, Rule: RuleSecret, Target: "arguments",
				Reason: fmt.Sprintf("the arguments joined carry a secret (%s) split across them", f.Kind)}
		}
		return nil
	}
	for _, joined := range []string{strings.Join(all, ""), strings.Join(reversed(all), "")} {
		if v := found(joined); v != nil {
			return v
		}
	}
	if len(all) > maxSplitParts {
		return nil
	}
	for i := range all {
		for j := range all {
			if i != j {
				if v := found(all[i] + all[j]); v != nil {
					return v
				}
			}
		}
	}
	return nil
}

func (e *Engine) checkArg(ctx context.Context, t *tool, a *argRule, s string) *Violation {
	switch a.Kind {
	case KindPath:
		return e.checkPath(t, a, s)
	case KindURL:
		d, err := validate.ParseURL(s, e.schemes)
		if err != nil {
			return urlViolation(a.name, err)
		}
		return e.checkDest(ctx, t, d, RuleURLHost)
	case KindHost:
		d, err := parseHostPort(s)
		if err != nil {
			return urlViolation(a.name, err)
		}
		return e.checkDest(ctx, t, d, RuleNetHost)
	case KindExec:
		if v := e.optionLike(t, a, s); v != nil {
			return v
		}
		return e.checkExec(t, s)
	case KindCommand:
		return e.checkCommand(ctx, t, a, s)
	}
	return nil
}

// checkCommand checks a command line that reaches a shell: it is split
// with the shell's own rules (anything but one simple command of literal
// words is refused), the program must be in the exec allow-list, and its
// arguments are checked as an argv list for that program.
func (e *Engine) checkCommand(ctx context.Context, t *tool, a *argRule, s string) *Violation {
	var argv []string
	if e.o.L2 && !t.waive[RuleCmdInjection] {
		var err error
		if argv, err = validate.SplitCommand(s); err != nil {
			return &Violation{Layer: LayerL2, Rule: RuleCmdInjection, Target: a.name,
				Reason: fmt.Sprintf("argument %q reaches a shell: %v", a.name, err)}
		}
	} else {
		argv = strings.Fields(s)
	}
	if len(argv) == 0 {
		return &Violation{Layer: LayerL1, Rule: RuleExec, Target: "",
			Reason: fmt.Sprintf("argument %q is an empty command", a.name)}
	}
	if v := e.checkExec(t, argv[0]); v != nil {
		return v
	}
	return e.checkWords(ctx, t, a, argv[0], argv[1:])
}

// checkWords confines the words of prog's argument list: with L2 the
// program's option rules apply (validate.ArgvWords), every word that
// names a file must stay inside the read roots and every destination
// inside the network allow-list; without L2 every word and option value
// is taken as a file.
func (e *Engine) checkWords(ctx context.Context, t *tool, a *argRule, prog string, list []string) *Violation {
	var words []validate.Word
	if e.o.L2 && !t.waive[RuleOptionDenied] {
		var err error
		if words, err = validate.ArgvWords(prog, list); err != nil {
			return &Violation{Layer: LayerL2, Rule: RuleOptionDenied, Target: a.name,
				Reason: fmt.Sprintf("argument %q: %v", a.name, err)}
		}
	} else {
		for _, s := range list {
			words = append(words, validate.Word{Value: s, Role: validate.RoleFile})
		}
	}
	for _, w := range words {
		var bad *Violation
		switch w.Role {
		case validate.RoleFile:
			bad = e.checkArgv(t, a, w.Value)
		case validate.RoleURL:
			d, err := validate.ParseURL(w.Value, e.schemes)
			if err != nil {
				bad = urlViolation(a.name, err)
			} else {
				bad = e.checkDest(ctx, t, d, RuleURLHost)
			}
		}
		if bad != nil {
			return bad
		}
	}
	return nil
}

// optionLike refuses a value that starts with "-" where a path or program
// is expected: servers pass such values to command-line tools, where they
// become options (git diff --output=FILE writes anywhere).
func (e *Engine) optionLike(t *tool, a *argRule, s string) *Violation {
	if e.o.L2 && strings.HasPrefix(s, "-") && !t.waive[RuleOptionLike] {
		return &Violation{Layer: LayerL2, Rule: RuleOptionLike, Target: a.name,
			Reason: fmt.Sprintf("argument %q starts with \"-\" and would be read as an option", a.name)}
	}
	return nil
}

// checkArgv checks one element of a program's argument list: an option's
// value ("--output=FILE") and every other word is taken as a path relative
// to the workdir, and must stay inside the read (or write) roots. Words
// that name no file (a date format, a count) land inside the workdir and
// pass; a word that reaches outside, directly, by "..", or through a
// symlink, does not.
func (e *Engine) checkArgv(t *tool, a *argRule, s string) *Violation {
	word := s
	if strings.HasPrefix(s, "-") {
		_, v, ok := strings.Cut(s, "=")
		if !ok {
			return nil
		}
		word = v
	}
	if word == "" {
		return nil
	}
	return e.checkPath(t, &argRule{name: a.name, Arg: Arg{Kind: KindPath, Access: Read}}, word)
}

func (e *Engine) checkPath(t *tool, a *argRule, s string) *Violation {
	if v := e.optionLike(t, a, s); v != nil {
		return v
	}
	var canon string
	if e.o.L2 {
		var err error
		canon, err = validate.CanonPath(s, e.pathOpts)
		if err != nil {
			rule := RulePathUnresolved
			switch {
			case errors.Is(err, validate.ErrNUL):
				rule = RulePathNUL
			case errors.Is(err, validate.ErrEncodedTraversal):
				rule = RulePathEncoded
			case errors.Is(err, validate.ErrRelative), errors.Is(err, validate.ErrEmptyPath):
				rule = RulePathRelative
			case errors.Is(err, validate.ErrHome):
				rule = RulePathHome
			case errors.Is(err, validate.ErrFileURI):
				rule = RulePathFileURI
			}
			return &Violation{Layer: LayerL2, Rule: rule, Target: s,
				Reason: fmt.Sprintf("argument %q: %v", a.name, err)}
		}
	} else {
		canon = lexicalPath(s, e.pathOpts)
		if canon == "" {
			return &Violation{Layer: LayerL1, Rule: RulePathRelative, Target: s,
				Reason: fmt.Sprintf("argument %q: relative path with no workdir, ~ with no home, or a file URI that names no local path", a.name)}
		}
	}
	ok := t.write.Contains(canon)
	if !ok && a.Access == Read {
		ok = t.read.Contains(canon)
	}
	if !ok {
		reason := fmt.Sprintf("%s of %s (argument %q) is outside the policy's %s roots", a.Access, canon, a.name, a.Access)
		if bareName(s) {
			// memory-bank's fileName (issue 33's matrix): an override of
			// the resolved path admits a file the server never touches.
			reason += fmt.Sprintf("; %q has no directory, so it was resolved against the policy's workdir: if the server puts it in a directory of its own (a file name in its storage), the argument is a name, not a path: set tools.%s.args.%s.kind to \"text\" rather than admit %s", s, t.name, a.name, canon)
		}
		return &Violation{Layer: LayerL1, Rule: RulePathOutside, Target: canon, Reason: reason}
	}
	if a.Access == Write && e.o.L2 && !t.waive[RulePathProtected] && protected(t.write, canon) {
		return &Violation{Layer: LayerL2, Rule: RulePathProtected, Target: canon,
			Reason: fmt.Sprintf("write of %s (argument %q): the user's tools run or obey it (git hooks and config, .envrc, shell start-up files, editor settings), so no tool may write it, inside a write root too", canon, a.name)}
	}
	return nil
}

// bareName reports whether s is a file name alone: no separator, no ~,
// not . or ..
func bareName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, `/\:~`)
}

// protected reports whether the canonical path p is a protected entry, or
// inside one, relative to every write root that holds it: a root that
// names the entry itself (filesystem.write: ["${WS}/.vscode"]) admits it,
// as it does for L3.
func protected(write validate.Roots, p string) bool {
	held := false
	for _, r := range write {
		if !validate.Within(p, r) {
			continue
		}
		rel, err := filepath.Rel(r, p)
		if err != nil || !launch.IsProtected(rel) {
			return false
		}
		held = true
	}
	return held
}

func lexicalPath(s string, o validate.PathOptions) string {
	if validate.IsFileURI(s) {
		p, err := validate.FileURIPath(s)
		if err != nil {
			return ""
		}
		s = p
	}
	if strings.HasPrefix(s, "~") {
		if o.Home == "" || !(s == "~" || strings.HasPrefix(s, "~/")) {
			return ""
		}
		s = o.Home + s[1:]
	}
	if !filepath.IsAbs(s) && o.Base == "" {
		return ""
	}
	// Join by the host's rules: on Windows "\x" is the root of the base's
	// drive, not a directory below the base.
	c, err := pathrules.Host.Join(o.Base, s)
	if err != nil {
		return ""
	}
	return c
}

func urlViolation(arg string, err error) *Violation {
	rule := RuleURLMalformed
	switch {
	case errors.Is(err, validate.ErrScheme):
		rule = RuleURLScheme
	case errors.Is(err, validate.ErrUserinfo):
		rule = RuleURLUserinfo
	case errors.Is(err, validate.ErrObfuscatedHost):
		rule = RuleURLObfuscated
	}
	return &Violation{Layer: LayerL2, Rule: rule, Target: arg,
		Reason: fmt.Sprintf("argument %q: %v", arg, err)}
}

func parseHostPort(s string) (validate.Dest, error) {
	h, port := s, 0
	// "[v6]:port", "name:port"; more than one colon without brackets is
	// an IPv6 literal without a port.
	if strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1 {
		hh, pp, err := splitHostPort(s)
		if err != nil {
			return validate.Dest{}, err
		}
		h, port = hh, pp
	}
	host, ip, err := validate.ParseHost(h)
	if err != nil {
		return validate.Dest{}, err
	}
	return validate.Dest{Host: host, IP: ip, Port: port}, nil
}

func splitHostPort(s string) (string, int, error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, fmt.Errorf("%w: %q", validate.ErrMalformedURL, s)
		}
		h, rest := s[1:end], s[end+1:]
		if rest == "" {
			return h, 0, nil
		}
		if rest[0] != ':' {
			return "", 0, fmt.Errorf("%w: %q", validate.ErrMalformedURL, s)
		}
		n, err := strconv.Atoi(rest[1:])
		if err != nil || n < 1 || n > 65535 {
			return "", 0, fmt.Errorf("%w: port in %q", validate.ErrMalformedURL, s)
		}
		return h, n, nil
	}
	h, p, _ := strings.Cut(s, ":")
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return "", 0, fmt.Errorf("%w: port in %q", validate.ErrMalformedURL, s)
	}
	return h, n, nil
}

// checkDest admits d when a network rule names its host (or an address
// range it is in) and port; with L2 it then resolves the host and refuses
// loopback, private, link-local and metadata addresses that the matching
// rule does not name itself.
func (e *Engine) checkDest(ctx context.Context, t *tool, d validate.Dest, rule string) *Violation {
	target := d.Host
	if d.Port != 0 {
		target = d.String()
	}
	var matched []*netRule
	for i := range t.net {
		r := &t.net[i]
		if len(r.ports) > 0 && !slices.Contains(r.ports, d.Port) {
			continue
		}
		switch {
		case r.name != "" && (r.name == d.Host || strings.HasPrefix(r.name, "*.") && strings.HasSuffix(d.Host, r.name[1:])):
			matched = append(matched, r)
		case r.name == "" && d.IP.IsValid() && r.prefix.Contains(d.IP):
			matched = append(matched, r)
		}
	}
	if len(matched) == 0 {
		return &Violation{Layer: LayerL1, Rule: rule, Target: target,
			Reason: fmt.Sprintf("destination %s is not in the policy's network allow-list", target)}
	}
	if !e.o.L2 {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, e.o.ResolveTimeout)
	defer cancel()
	addrs, err := validate.Addrs(rctx, e.o.Resolver, d)
	if err != nil || len(addrs) == 0 {
		return &Violation{Layer: LayerL2, Rule: RuleURLUnresolvable, Target: d.Host,
			Reason: fmt.Sprintf("host %s does not resolve: %v", d.Host, err)}
	}
	for _, ip := range addrs {
		class := validate.SpecialClass(ip)
		if class == "" {
			continue
		}
		admitted := false
		for _, r := range matched {
			if r.private || (r.name == "" && r.prefix.Contains(ip)) {
				admitted = true
				break
			}
		}
		if !admitted && !t.waive[RuleURLPrivate] {
			// The target is the host as the call named it: an override
			// for it ({"host": ..., "rule": "url.private_address"}) is
			// what admits it.
			return &Violation{Layer: LayerL2, Rule: RuleURLPrivate, Target: d.Host,
				Reason: fmt.Sprintf("host %s resolves to %s, a %s address the policy does not name", d.Host, ip, class)}
		}
	}
	return nil
}

func (e *Engine) checkExec(t *tool, s string) *Violation {
	deny := func(target string) *Violation {
		return &Violation{Layer: LayerL1, Rule: RuleExec, Target: target,
			Reason: fmt.Sprintf("executable %s is not in the policy's exec allow-list", target)}
	}
	var path string
	if strings.ContainsRune(s, '/') {
		c, err := validate.CanonPath(s, e.pathOpts)
		if err != nil {
			return deny(s)
		}
		path = c
	} else {
		p, err := exec.LookPath(s)
		if err != nil {
			return deny(s)
		}
		path = p
	}
	if t.exec[filepath.Clean(path)] {
		return nil
	}
	if r, err := filepath.EvalSymlinks(path); err == nil && t.exec[r] {
		return nil
	}
	return deny(path)
}

// eachString calls f on s, or on each string of an array; other values
// call mismatch.
func eachString(v any, f func(string) bool, mismatch func()) {
	switch t := v.(type) {
	case string:
		f(t)
	case []any:
		for _, x := range t {
			s, ok := x.(string)
			if !ok {
				mismatch()
				return
			}
			if !f(s) {
				return
			}
		}
	case nil:
	default:
		mismatch()
	}
}

// walk calls f on every string value in v until f returns false.
func walk(v any, f func(string) bool) bool {
	switch t := v.(type) {
	case string:
		return f(t)
	case map[string]any:
		for _, k := range sortedKeys(t) {
			if !walk(t[k], f) {
				return false
			}
		}
	case []any:
		for _, x := range t {
			if !walk(x, f) {
				return false
			}
		}
	}
	return true
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// schemaErr shortens a jsonschema error to its first line of substance.
func schemaErr(err error) string {
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		// The basic output lists leaf errors with their instance location.
		out := ve.BasicOutput()
		for _, u := range out.Errors {
			if u.Error != nil {
				msg := u.Error.String()
				loc := u.InstanceLocation
				if loc == "" {
					loc = "/"
				}
				return fmt.Sprintf("at %s: %s", loc, msg)
			}
		}
	}
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i > 0 {
		s = s[:i]
	}
	return s
}

// filterEnv keeps the entries of env whose names allow admits.
func filterEnv(env []string, allow []string) (kept []string, dropped []string) {
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if envAllowed(name, allow) {
			kept = append(kept, kv)
		} else {
			dropped = append(dropped, name)
		}
	}
	return kept, dropped
}

func envAllowed(name string, allow []string) bool {
	for _, a := range allow {
		if a == name || strings.HasSuffix(a, "*") && strings.HasPrefix(name, a[:len(a)-1]) {
			return true
		}
	}
	return false
}

func reversed(ss []string) []string {
	out := slices.Clone(ss)
	slices.Reverse(out)
	return out
}
