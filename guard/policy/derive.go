package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/validate"
)

// ToolInfo is a tool as tools/list describes it.
type ToolInfo struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	Annotations struct {
		ReadOnlyHint *bool `json:"readOnlyHint,omitempty"`
	} `json:"annotations,omitzero"`
}

// readOnly says whether the tool only reads: its readOnlyHint true, else
// a name with a verb that reads and none that writes, else a description
// that starts with one and says nothing of writing. Unsure is not
// read-only: the stricter reading. A readOnlyHint of false settles
// nothing: SDKs (mcp-go) send it for every tool that does not set it.
func (ti ToolInfo) readOnly() (bool, string) {
	if h := ti.Annotations.ReadOnlyHint; h != nil && *h {
		return true, "readOnlyHint"
	}
	if writeVerb.MatchString(ti.Name) || descWrite.MatchString(ti.Description) {
		return false, "name or description writes"
	}
	if readVerb.MatchString(ti.Name) {
		return true, "name reads"
	}
	if first, _, _ := strings.Cut(strings.TrimSpace(ti.Description), " "); readVerb.MatchString(first) {
		return true, "description reads"
	}
	return false, "nothing says it only reads"
}

// What an argument is, from its name and its schema's format. Names are
// matched case-insensitively on the whole name, or on a suffix for the
// path patterns (file_path, sourceDir).
var (
	pathName    = regexp.MustCompile(`^(?i:path|paths|file|files|filename|filepath|dir|dirs|directory|directories|folder|source|src|destination|dest|dst|target|root|cwd|workdir|working_directory)$|[_-](?i:path|paths|file|dir|directory|folder)$|[a-z](Path|Paths|File|Dir|Directory|Folder)$`)
	urlName     = regexp.MustCompile(`^(?i:url|urls|uri|endpoint|href|link|webhook|callback)$|[_-](?i:url|uri|endpoint)$|[a-z](Url|URL|Uri|URI|Endpoint)$`)
	hostName    = regexp.MustCompile(`(?i)^(host|hostname|address|addr|server|remote)$`)
	commandName = regexp.MustCompile(`(?i)^(command|cmd|script|shell|shell_command|cmdline|command_line)$`)
	execName    = regexp.MustCompile(`(?i)^(program|executable|binary|exe|bin)$`)
	argvName    = regexp.MustCompile(`(?i)^(args|arguments|argv)$`)
	writeVerb   = regexp.MustCompile(`(?i)(write|create|edit|delete|remove|move|rename|mkdir|save|append|upload|put|update|patch|copy|touch|chmod|set)`)
)

// Classify says what kind of argument a property is, from its name and
// its schema's format alone ("" for none); the argument model (model.go)
// adds the description, the schema's other keywords and the value.
func Classify(name string, schema map[string]any) string {
	format, _ := schema["format"].(string)
	if items, ok := schema["items"].(map[string]any); ok && format == "" {
		format, _ = items["format"].(string)
	}
	switch strings.ToLower(format) {
	case "uri", "url", "iri":
		return KindURL
	case "path", "file-path", "filepath":
		return KindPath
	case "hostname", "ipv4", "ipv6":
		return KindHost
	}
	switch {
	case urlName.MatchString(name):
		return KindURL
	case pathName.MatchString(name):
		return KindPath
	case commandName.MatchString(name):
		return KindCommand
	case execName.MatchString(name):
		return KindExec
	case hostName.MatchString(name):
		return KindHost
	case argvName.MatchString(name):
		return KindArgv
	}
	return ""
}

// FromTools derives a starting policy for server from its tools/list: every
// tool admitted, its input schema kept (closed with additionalProperties
// false when the server left it open, so no unannounced argument slips
// through), path, URL, host and command arguments recognised from their
// names and formats, path roots at ${WS} (write roots only when a tool
// writes), no network destination and no executable (the operator adds
// those), and a minimal environment.
func FromTools(server string, tools []ToolInfo) (*Policy, error) {
	return derive(server, tools, false)
}

// FromToolsPinned is FromTools that also pins every tool's description
// and schema (Tool.Pin), so that a later change is a rug pull across
// sessions, not only within one.
func FromToolsPinned(server string, tools []ToolInfo) (*Policy, error) {
	return derive(server, tools, true)
}

func derive(server string, tools []ToolInfo, pin bool) (*Policy, error) {
	p := &Policy{
		Server:  server,
		Tools:   map[string]Tool{},
		Workdir: "${WS}",
		Env:     Env{Allow: []string{"PATH", "HOME", "LANG", "TMPDIR"}},
	}
	writes := false
	for _, ti := range tools {
		if ti.Name == "" {
			return nil, errors.New("derive policy: a tool without a name")
		}
		t, w, err := deriveTool(ti, pin)
		if err != nil {
			return nil, fmt.Errorf("derive policy: tool %s: %w", ti.Name, err)
		}
		writes = writes || w
		p.Tools[ti.Name] = t
	}
	p.Filesystem.Read = []string{"${WS}"}
	if writes {
		p.Filesystem.Write = []string{"${WS}"}
	}
	return p, nil
}

// deriveTool derives one tool's entry: its schema closed (every object in
// it, nested ones and those under $defs included, gets additionalProperties
// false unless the schema says otherwise), the kinds of its arguments from
// the model (every slot whose kind is not text; nested ones by slot path),
// and whether it only reads. writes says a path argument is written.
func deriveTool(ti ToolInfo, pin bool) (t Tool, writes bool, err error) {
	var schema map[string]any
	if len(ti.InputSchema) > 0 {
		if err := json.Unmarshal(ti.InputSchema, &schema); err != nil {
			return Tool{}, false, fmt.Errorf("schema: %w", err)
		}
	}
	if schema == nil {
		schema = map[string]any{"type": "object"}
	}
	closeObjects(schema)
	b, err := json.Marshal(schema)
	if err != nil {
		return Tool{}, false, err
	}
	t = Tool{Schema: b, Args: map[string]Arg{}}
	t.ReadOnly, _ = ti.readOnly()
	m, err := compileModelSchema(ti.Name, b)
	if err != nil {
		return Tool{}, false, err
	}
	h := hints{tool: ti.Name, readOnly: t.ReadOnly}
	mt := &tool{name: ti.Name, model: m, hints: h}
	if err := mt.compileSlots(nil); err != nil {
		return Tool{}, false, err
	}
	for path, sl := range mt.slots {
		if sl.kind == KindText || strings.HasSuffix(path, "/*") && sl.kind == KindSecret {
			continue
		}
		key := path
		if top, _, _ := strings.Cut(path[1:], "/"); top != "*" && (path == "/"+top || path == "/"+top+"/*") {
			// A top-level member (or each item of a top-level list) by
			// its name, as policies always named them.
			key = sl.name
		}
		a := Arg{Kind: sl.kind, Access: sl.access}
		t.Args[key] = a
		writes = writes || a.Access == Write
	}
	if len(t.Args) == 0 {
		t.Args = nil
	}
	if pin {
		t.Pin = validate.ToolDigest(ti.Name, ti.Title, ti.Description, ti.InputSchema)
	}
	return t, writes, nil
}

// closeObjects sets additionalProperties false on every object schema in
// s that has properties and says nothing about extra members, so that a
// nested object takes no member the model has not judged; explicit
// additionalProperties (true, a schema) and patternProperties are kept.
func closeObjects(s map[string]any) {
	_, named := s["properties"]
	_, pattern := s["patternProperties"]
	_, extra := s["additionalProperties"]
	_, uneval := s["unevaluatedProperties"]
	typ, _ := s["type"].(string)
	if (named || typ == "object") && !pattern && !extra && !uneval && !combines(s) {
		s["additionalProperties"] = false
	}
	for k, v := range s {
		switch k {
		case "properties", "$defs", "definitions", "patternProperties", "dependentSchemas":
			if m, ok := v.(map[string]any); ok {
				for _, sub := range m {
					if sm, ok := sub.(map[string]any); ok {
						closeObjects(sm)
					}
				}
			}
		case "items", "additionalProperties", "additionalItems", "not", "if", "then", "else", "contains", "unevaluatedItems":
			if sm, ok := v.(map[string]any); ok {
				closeObjects(sm)
			}
		case "anyOf", "oneOf", "allOf", "prefixItems":
			if list, ok := v.([]any); ok {
				for _, sub := range list {
					if sm, ok := sub.(map[string]any); ok {
						closeObjects(sm)
					}
				}
			}
		}
	}
}

// combines reports whether s composes other schemas with allOf, anyOf,
// oneOf or $ref: closing s itself would refuse the members the others
// name (additionalProperties sees only s's own properties).
func combines(s map[string]any) bool {
	for _, k := range []string{"allOf", "anyOf", "oneOf", "$ref", "$dynamicRef"} {
		if _, ok := s[k]; ok {
			return true
		}
	}
	return false
}

// ErrNotOverridable is returned for an audit event no scoped override can
// answer (a malformed argument, a schema violation): the fix is in the
// call or in the policy itself.
var ErrNotOverridable = errors.New("not overridable")

// OverrideFor turns an audit event into the scoped override that would
// have let the call through: one tool and the one path, host or executable
// the event names; for content rules (a secret, an environment reference,
// shell metacharacters, a response rule) the rule is waived for that tool.
func OverrideFor(e audit.Event) (Override, error) {
	if e.Layer != LayerL1 && e.Layer != LayerL2 {
		return Override{}, fmt.Errorf("%w: layer %q events are not policy decisions (C-AB manifests and L3 rules are edited directly)", ErrNotOverridable, e.Layer)
	}
	if e.Tool == "" {
		return Override{}, fmt.Errorf("%w: event for rule %s names no tool (edit the policy itself)", ErrNotOverridable, e.Rule)
	}
	o := Override{Server: e.Server, Tool: e.Tool, Rule: e.Rule,
		Reason: "operator override for: " + e.Reason,
		Event:  strings.TrimSpace(e.Time.UTC().Format("2006-01-02T15:04:05.000Z") + " " + e.ArgsDigest)}
	switch e.Rule {
	case RuleToolNotAllowed:
	case RulePathOutside:
		o.Path = e.Target
	case RuleURLHost, RuleNetHost, RuleURLPrivate:
		host, port := e.Target, ""
		if h, p, err := net.SplitHostPort(e.Target); err == nil {
			host, port = h, p
		}
		o.Host = host
		if n, err := strconv.Atoi(port); err == nil && n > 0 {
			o.Ports = []int{n}
		}
	case RuleExec:
		o.Exec = e.Target
	case RuleSecret, RuleEnvReference, RuleCmdInjection,
		"response.prompt_injection", "response.secret", "response.hidden_unicode", "tool.poisoned", "tool.rug_pull":
	default:
		return Override{}, fmt.Errorf("%w: rule %s (fix the call, or change the tool's schema or the policy's %s)", ErrNotOverridable, e.Rule, ruleHome(e.Rule))
	}
	if err := o.Validate(); err != nil {
		return Override{}, fmt.Errorf("%w: %w", ErrNotOverridable, err)
	}
	return o, nil
}

func ruleHome(rule string) string {
	switch {
	case strings.HasPrefix(rule, "url."):
		return "network section"
	case strings.HasPrefix(rule, "path."):
		return "filesystem roots"
	case strings.HasPrefix(rule, "env."):
		return "env allow-list"
	}
	return "schema"
}

// URLTools lists the tools of p that take a URL argument, sorted: their
// servers follow redirects the guard never sees, which only L3's network
// rules stop (docs/policy.md, "Redirects").
func URLTools(p *Policy) []string {
	var out []string
	for name, t := range p.Tools {
		for _, a := range t.Args {
			if a.Kind == KindURL {
				out = append(out, name)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}
