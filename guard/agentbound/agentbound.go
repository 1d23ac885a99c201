// Package agentbound is the C-AB baseline: an AgentBound-style manifest
// that declares a server's permissions (filesystem read and write with
// paths, network client with hosts, environment read with variables, exec
// with commands), enforced at the application level on what each tool
// call's arguments show, and on nothing else. What a server does that its
// arguments do not reveal (a trojaned read_file that also opens ~/.ssh) is
// outside its view by design; the comparison with L1/L2 and L3 is the point.
package agentbound

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/validate"
	"github.com/mcpguard/mcpguard/internal/placeholder"
)

// Layer is the name C-AB events and denials carry.
const Layer = "AB"

// Permission names, after AgentBound's access-control vocabulary.
const (
	PermFSRead   = "mcp.ac.filesystem.read"
	PermFSWrite  = "mcp.ac.filesystem.write"
	PermNetwork  = "mcp.ac.network.client"
	PermEnvRead  = "mcp.ac.system.env.read"
	PermExec     = "mcp.ac.system.exec"
	RuleFSRead   = "ab.filesystem.read"
	RuleFSWrite  = "ab.filesystem.write"
	RuleNetwork  = "ab.network.client"
	RuleEnv      = "ab.env.read"
	RuleExec     = "ab.exec"
	RuleMalforms = "ab.args_malformed"
)

// Manifest is one server's declared permissions.
type Manifest struct {
	Server      string       `json:"server"`
	Description string       `json:"description,omitempty"`
	Permissions []Permission `json:"permissions"`
}

// Permission is one granted capability with its effective scope.
type Permission struct {
	Permission string   `json:"permission"`
	Paths      []string `json:"paths,omitempty"`
	Hosts      []string `json:"hosts,omitempty"`
	Variables  []string `json:"variables,omitempty"`
	Commands   []string `json:"commands,omitempty"`
}

// Load reads a manifest, expanding ${NAME} from vars (unknown names are
// an error).
func Load(file string, vars map[string]string) (*Manifest, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("load manifest: %w", err)
	}
	m, err := Parse(b, vars)
	if err != nil {
		return nil, fmt.Errorf("load manifest %s: %w", file, err)
	}
	return m, nil
}

// Parse decodes a manifest.
func Parse(b []byte, vars map[string]string) (*Manifest, error) {
	b, err := placeholder.Expand(b, vars)
	if err != nil {
		return nil, fmt.Errorf("parse manifest: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("parse manifest: %w", err)
	}
	for _, p := range m.Permissions {
		switch p.Permission {
		case PermFSRead, PermFSWrite:
			for _, x := range p.Paths {
				if !path.IsAbs(x) {
					return nil, fmt.Errorf("parse manifest: %s path %q is not absolute", p.Permission, x)
				}
			}
		case PermNetwork, PermEnvRead, PermExec:
		default:
			return nil, fmt.Errorf("parse manifest: unknown permission %q", p.Permission)
		}
	}
	return &m, nil
}

// Checker enforces a manifest on tool-call arguments. It is safe for
// concurrent use.
type Checker struct {
	read, write []string
	hosts       []string
	vars        []string
	commands    []string

	// The regexps' verdicts on tool and argument names, which repeat from
	// call to call: matching writeTools alone cost more than the rest of a
	// benign call's check.
	writeTool, commandArg, pathArg *nameMemo
}

// NewChecker compiles m.
func NewChecker(m *Manifest) *Checker {
	c := &Checker{writeTool: newNameMemo(writeTools), commandArg: newNameMemo(commandNames), pathArg: newNameMemo(pathNames)}
	for _, p := range m.Permissions {
		switch p.Permission {
		case PermFSRead:
			c.read = append(c.read, cleanAll(p.Paths)...)
		case PermFSWrite:
			c.write = append(c.write, cleanAll(p.Paths)...)
		case PermNetwork:
			for _, h := range p.Hosts {
				c.hosts = append(c.hosts, strings.ToLower(h))
			}
		case PermEnvRead:
			c.vars = append(c.vars, p.Variables...)
		case PermExec:
			c.commands = append(c.commands, p.Commands...)
		}
	}
	return c
}

// cleanAll canonicalises declared paths (a root given through a symlink
// matches the resolved paths it is compared with).
func cleanAll(ps []string) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		if r, err := validate.NewRoots(p); err == nil && len(r) == 1 {
			out = append(out, r[0])
			continue
		}
		out = append(out, path.Clean(p))
	}
	return out
}

// Denial is why the manifest refuses a call.
type Denial struct {
	Rule, Reason, Target string
}

// What an argument looks like, from its name and its value. AgentBound
// knows nothing of a tool's semantics beyond this.
var (
	pathNames    = regexp.MustCompile(`(?i)^(path|paths|file|files|filename|filepath|file_path|dir|directory|folder|source|src|destination|dest|dst|target|old_path|new_path|cwd|workdir|root)$|(_path|_file|_dir|Path|File|Dir)$`)
	commandNames = regexp.MustCompile(`(?i)^(command|cmd|program|executable|exec|shell|script|binary|bin)$`)
	writeTools   = regexp.MustCompile(`(?i)(write|create|save|edit|append|delete|remove|move|rename|mkdir|upload|put|patch|update|copy|touch|chmod|install)`)
	envRef       = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}|\$([A-Za-z_][A-Za-z0-9_]*)`)
)

// Check decides one call from its tool name and arguments.
func (c *Checker) Check(tool string, rawArgs json.RawMessage) *Denial {
	var args map[string]any
	if t := bytes.TrimSpace(rawArgs); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		if err := json.Unmarshal(t, &args); err != nil {
			return &Denial{Rule: RuleMalforms, Target: tool, Reason: "arguments are not a JSON object"}
		}
	}
	write := c.writeTool.match(tool)
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var d *Denial
		walk(k, args[k], func(name, s string) bool {
			d = c.checkString(name, s, write)
			return d == nil
		})
		if d != nil {
			return d
		}
	}
	return nil
}

func (c *Checker) checkString(name, s string, write bool) *Denial {
	for _, m := range envRef.FindAllStringSubmatch(s, -1) {
		v := m[1] + m[2]
		if !slices.Contains(c.vars, v) {
			return &Denial{Rule: RuleEnv, Target: v,
				Reason: fmt.Sprintf("argument %q reads environment variable %s, not in the manifest", name, v)}
		}
	}
	if strings.Contains(s, "://") && !validate.IsFileURI(s) {
		u, err := url.Parse(s)
		if err != nil || u.Hostname() == "" {
			return &Denial{Rule: RuleNetwork, Target: s,
				Reason: fmt.Sprintf("argument %q is a URL the manifest cannot place", name)}
		}
		host := strings.ToLower(u.Hostname())
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
		}
		if !c.hostAllowed(host, port) {
			target := net.JoinHostPort(host, port)
			return &Denial{Rule: RuleNetwork, Target: target,
				Reason: fmt.Sprintf("argument %q connects to %s, not in the manifest", name, target)}
		}
		return nil
	}
	if c.commandArg.match(name) {
		f := strings.Fields(s)
		if len(f) == 0 || !c.commandAllowed(f[0]) {
			return &Denial{Rule: RuleExec, Target: s,
				Reason: fmt.Sprintf("argument %q runs a command not in the manifest", name)}
		}
		return nil
	}
	// An option carrying a path ("--output=/x") names that path.
	if strings.HasPrefix(s, "-") {
		if _, v, ok := strings.Cut(s, "="); ok && (strings.HasPrefix(v, "/") || strings.HasPrefix(v, "~")) {
			return c.checkPath(name, v, write)
		}
	}
	if c.pathArg.match(name) || strings.HasPrefix(s, "/") || strings.HasPrefix(s, "~") || strings.HasPrefix(s, "file://") {
		return c.checkPath(name, s, write)
	}
	// Absolute paths inside free text (a query's 'VACUUM INTO /x') are
	// resources the arguments name too.
	for _, m := range embeddedPath.FindAllStringSubmatch(s, -1) {
		if d := c.checkPath(name, m[1], write); d != nil {
			return d
		}
	}
	return nil
}

// maxMemoNames bounds a nameMemo: names come from the client, and one that
// invents a new name per call gets the regexp, not a growing map.
const maxMemoNames = 4096

// nameMemo remembers a regexp's verdict on the names it has seen.
type nameMemo struct {
	re *regexp.Regexp
	mu sync.RWMutex
	m  map[string]bool
}

func newNameMemo(re *regexp.Regexp) *nameMemo {
	return &nameMemo{re: re, m: map[string]bool{}}
}

func (n *nameMemo) match(name string) bool {
	n.mu.RLock()
	v, ok := n.m[name]
	n.mu.RUnlock()
	if ok {
		return v
	}
	v = n.re.MatchString(name)
	n.mu.Lock()
	if len(n.m) < maxMemoNames {
		n.m[name] = v
	}
	n.mu.Unlock()
	return v
}

// embeddedPath finds absolute or home-relative paths inside text.
var embeddedPath = regexp.MustCompile(`(?:^|[\s'"=(,])((?:/|~/)[^\s'"(),;]+)`)

// checkPath resolves p the way the server would (relative to the first
// declared root, symlinks followed) and checks it against the declared
// paths.
func (c *Checker) checkPath(name, s string, write bool) *Denial {
	p := s
	if validate.IsFileURI(s) {
		if up, err := validate.FileURIPath(s); err == nil {
			p = up
		}
	}
	base := "/"
	if roots := append(slices.Clone(c.read), c.write...); len(roots) > 0 {
		base = roots[0]
	}
	canon, err := validate.CanonPath(p, validate.PathOptions{Base: base})
	if err != nil {
		canon = path.Clean(path.Join(base, p))
	}
	if within(canon, c.write) || !write && within(canon, c.read) {
		return nil
	}
	rule := RuleFSRead
	if write {
		rule = RuleFSWrite
	}
	return &Denial{Rule: rule, Target: canon,
		Reason: fmt.Sprintf("argument %q names %s, outside the manifest's %s paths", name, canon, strings.TrimPrefix(rule, "ab.filesystem."))}
}

func within(p string, roots []string) bool {
	for _, r := range roots {
		if r == "/" || p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

func (c *Checker) hostAllowed(host, port string) bool {
	for _, h := range c.hosts {
		hh, pp, err := net.SplitHostPort(h)
		if err != nil {
			hh, pp = h, ""
		}
		if hh == host && (pp == "" || pp == port) {
			return true
		}
	}
	return false
}

func (c *Checker) commandAllowed(cmd string) bool {
	for _, x := range c.commands {
		if x == cmd || path.Base(x) == path.Base(cmd) && !strings.Contains(cmd, "/") {
			return true
		}
	}
	return false
}

func walk(name string, v any, f func(name, s string) bool) bool {
	switch t := v.(type) {
	case string:
		return f(name, t)
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !walk(k, t[k], f) {
				return false
			}
		}
	case []any:
		for _, x := range t {
			if !walk(name, x, f) {
				return false
			}
		}
	}
	return true
}

// LayerOptions names the session for audit events.
type LayerOptions struct {
	Server, Config string
	Audit          *audit.Logger
}

// Stage enforces c on every tools/call, in the request phase.
func Stage(c *Checker, o LayerOptions) guard.Stage {
	return &stage{c: c, o: o}
}

type stage struct {
	c *Checker
	o LayerOptions
}

func (st *stage) Request(_ context.Context, req *guard.Request) *guard.Response {
	if req.Method != "tools/call" {
		return nil
	}
	d := st.c.Check(req.Tool, req.Arguments)
	if d == nil {
		return nil
	}
	st.o.Audit.Log(audit.Event{
		Server: st.o.Server, Config: st.o.Config, Layer: Layer, Rule: d.Rule, Tool: req.Tool,
		Decision: audit.Deny, Reason: d.Reason, Target: d.Target, ArgsDigest: audit.Digest(req.Arguments),
	})
	return guard.Deny(Layer, d.Rule, d.Reason)
}

// Response passes every answer on: the manifest judges requests only.
func (st *stage) Response(_ context.Context, _ *guard.Request, resp *guard.Response) *guard.Response {
	return resp
}
