package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/mcpguard/mcpguard/internal/placeholder"
)

// OverridesDir is the directory, beside a policy file, that holds operator
// overrides.
const OverridesDir = "overrides"

// Override is one operator decision that widens a policy, scoped to one
// tool and at most one path, host or executable. A file in overrides/ holds
// one override or an array of them.
type Override struct {
	// Server picks the policy the override applies to (its "server").
	Server string `json:"server"`
	// Tool is the one tool the override applies to.
	Tool string `json:"tool"`
	// Rule is the rule that denied the call. With no scope below it is
	// waived for Tool ("tool.not_allowed" adds the tool itself).
	Rule string `json:"rule,omitempty"`
	// Path admits one path (and what is below it, if it is a directory)
	// for Tool's path arguments; Access narrows it to "read" or "write"
	// (empty: the access the argument needs).
	Path   string `json:"path,omitempty"`
	Access string `json:"access,omitempty"`
	// Host admits one destination (name or IP, optionally ports) for
	// Tool's URL and host arguments.
	Host  string `json:"host,omitempty"`
	Ports []int  `json:"ports,omitempty"`
	// Exec admits one executable for Tool's exec and command arguments.
	Exec string `json:"exec,omitempty"`
	// Reason and Event record why and from which audit event the override
	// was made; they are not interpreted.
	Reason string `json:"reason,omitempty"`
	Event  string `json:"event,omitempty"`
}

// ErrBadOverride wraps every reason an override is refused.
var ErrBadOverride = errors.New("bad override")

// Validate checks that o is scoped: one tool, at most one of path, host or
// executable, and a rule when it has none of them.
func (o *Override) Validate() error {
	if o.Server == "" {
		return fmt.Errorf("%w: no server", ErrBadOverride)
	}
	if o.Tool == "" {
		return fmt.Errorf("%w: no tool (an override is scoped to one tool)", ErrBadOverride)
	}
	n := 0
	for _, s := range []string{o.Path, o.Host, o.Exec} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		return fmt.Errorf("%w: more than one of path, host, exec", ErrBadOverride)
	}
	if n == 0 && o.Rule == "" {
		return fmt.Errorf("%w: neither a path, host, executable nor rule", ErrBadOverride)
	}
	if o.Path != "" && !filepath.IsAbs(o.Path) {
		return fmt.Errorf("%w: path %q is not absolute", ErrBadOverride, o.Path)
	}
	if o.Path != "" && (o.Path == "/" || filepath.Clean(o.Path) == "/") {
		return fmt.Errorf("%w: path / is not a scope", ErrBadOverride)
	}
	if o.Access != "" && o.Access != Read && o.Access != Write {
		return fmt.Errorf("%w: access %q (want read or write)", ErrBadOverride, o.Access)
	}
	if o.Host != "" && (o.Host == "*" || strings.HasSuffix(o.Host, "/0")) {
		return fmt.Errorf("%w: host %q is not a scope", ErrBadOverride, o.Host)
	}
	if o.Exec != "" && !filepath.IsAbs(o.Exec) {
		return fmt.Errorf("%w: executable %q is not absolute", ErrBadOverride, o.Exec)
	}
	return nil
}

// Apply merges o over p.
func (p *Policy) Apply(o Override) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if o.Server != p.Server {
		return fmt.Errorf("%w: for server %q, policy is for %q", ErrBadOverride, o.Server, p.Server)
	}
	if p.Tools == nil {
		p.Tools = map[string]Tool{}
	}
	t, ok := p.Tools[o.Tool]
	if !ok {
		if o.Rule != RuleToolNotAllowed || o.Path != "" || o.Host != "" || o.Exec != "" {
			return fmt.Errorf("%w: tool %q is not in the policy (override rule %s first)", ErrBadOverride, o.Tool, RuleToolNotAllowed)
		}
		p.Tools[o.Tool] = Tool{}
		return nil
	}
	switch {
	case o.Path != "":
		if o.Access != Write {
			t.Read = append(t.Read, o.Path)
		}
		if o.Access != Read {
			t.Write = append(t.Write, o.Path)
		}
	case o.Host != "":
		t.Hosts = append(t.Hosts, NetRule{Host: o.Host, Ports: o.Ports, Private: o.Rule == RuleURLPrivate})
	case o.Exec != "":
		t.Exec = append(t.Exec, o.Exec)
	case o.Rule != RuleToolNotAllowed:
		if !slices.Contains(t.Waive, o.Rule) {
			t.Waive = append(t.Waive, o.Rule)
		}
	}
	p.Tools[o.Tool] = t
	return nil
}

// ParseOverrides decodes one override file (an object or an array),
// expanding placeholders like Parse.
func ParseOverrides(b []byte, vars map[string]string) ([]Override, error) {
	exp, err := placeholder.Expand(b, vars)
	if err != nil {
		return nil, err
	}
	exp = bytes.TrimSpace(exp)
	var list []Override
	if len(exp) > 0 && exp[0] == '[' {
		err = decodeStrict(exp, &list)
	} else {
		var o Override
		err = decodeStrict(exp, &o)
		list = []Override{o}
	}
	if err != nil {
		return nil, fmt.Errorf("parse override: %w", err)
	}
	for i := range list {
		if err := list[i].Validate(); err != nil {
			return nil, err
		}
	}
	return list, nil
}

// LoadWithOverrides loads the policy at path and merges over it every
// override in the overrides/ directory beside it that names its server,
// file by file in name order. A malformed override file is an error: an
// operator's decision is never dropped silently.
func LoadWithOverrides(path string, vars map[string]string) (*Policy, error) {
	p, err := Load(path, vars)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(filepath.Dir(path), OverridesDir)
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("list overrides: %w", err)
	}
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("load override: %w", err)
		}
		list, err := ParseOverrides(b, vars)
		if err != nil {
			return nil, fmt.Errorf("load override %s: %w", f, err)
		}
		for _, o := range list {
			if o.Server != p.Server {
				continue
			}
			if err := p.Apply(o); err != nil {
				return nil, fmt.Errorf("load override %s: %w", f, err)
			}
		}
	}
	return p, nil
}

func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}
