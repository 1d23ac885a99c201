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
// its schema (format "uri"/"url" is a URL, format "path" a path).
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
		var schema map[string]any
		if len(ti.InputSchema) > 0 {
			if err := json.Unmarshal(ti.InputSchema, &schema); err != nil {
				return nil, fmt.Errorf("derive policy: tool %s: schema: %w", ti.Name, err)
			}
		}
		if schema == nil {
			schema = map[string]any{"type": "object"}
		}
		if _, ok := schema["additionalProperties"]; !ok {
			schema["additionalProperties"] = false
		}
		t := Tool{Args: map[string]Arg{}}
		props, _ := schema["properties"].(map[string]any)
		for name, ps := range props {
			sub, _ := ps.(map[string]any)
			kind := Classify(name, sub)
			if kind == "" {
				continue
			}
			a := Arg{Kind: kind}
			if kind == KindPath {
				a.Access = Read
				if writeVerb.MatchString(ti.Name) {
					a.Access = Write
					writes = true
				}
			}
			t.Args[name] = a
		}
		if len(t.Args) == 0 {
			t.Args = nil
		}
		b, err := json.Marshal(schema)
		if err != nil {
			return nil, fmt.Errorf("derive policy: tool %s: %w", ti.Name, err)
		}
		t.Schema = b
		if pin {
			t.Pin = validate.ToolDigest(ti.Name, ti.Title, ti.Description, ti.InputSchema)
		}
		p.Tools[ti.Name] = t
	}
	p.Filesystem.Read = []string{"${WS}"}
	if writes {
		p.Filesystem.Write = []string{"${WS}"}
	}
	return p, nil
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
