// Package policy is layer L1: a per-server capability policy, loaded from
// JSON, that says which tools may be called with which arguments, and which
// files, network destinations, executables and environment variables the
// server may use. The same policy compiles to the L3 backends' rules.
package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Policy is one server's policy file.
type Policy struct {
	// Server names the server the policy is for.
	Server string `json:"server"`
	// Tools maps each allowed tool to its argument rules. A tool that is
	// not listed is denied.
	Tools map[string]Tool `json:"tools"`
	// Filesystem roots. Paths are absolute after variable expansion; a root
	// admits itself and what is below it ("/ws" admits "/ws/a", not "/ws-evil").
	Filesystem Filesystem `json:"filesystem"`
	// Network destinations the server may connect to.
	Network Network `json:"network"`
	// Exec lists executables the server may run (absolute paths).
	Exec Exec `json:"exec"`
	// Env lists the environment variables the server subprocess receives.
	Env Env `json:"env"`
}

// Tool holds the constraints on one tool's arguments.
type Tool struct {
	// Schema is the tool's inputSchema as seen at policy init; arguments
	// are validated against it.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Args maps argument names to extra constraints.
	Args map[string]Arg `json:"args,omitempty"`
}

// Arg is a constraint on one argument.
type Arg struct {
	// Kind is "path", "url", "exec" or "" (plain value).
	Kind string `json:"kind,omitempty"`
	// Access is "read" or "write" for path arguments.
	Access string `json:"access,omitempty"`
}

// Filesystem holds path roots by access.
type Filesystem struct {
	Read  []string `json:"read,omitempty"`
	Write []string `json:"write,omitempty"`
}

// Network holds the allowed destinations.
type Network struct {
	Allow []NetRule `json:"allow,omitempty"`
}

// NetRule admits one destination: a host name, an IP or a CIDR prefix, and
// optionally a list of ports (empty means any port).
type NetRule struct {
	Host  string `json:"host"`
	Ports []int  `json:"ports,omitempty"`
}

// Exec holds the executable allow-list.
type Exec struct {
	Allow []string `json:"allow,omitempty"`
}

// Env holds the environment allow-list.
type Env struct {
	Allow []string `json:"allow,omitempty"`
}

// Load reads a policy file, expanding ${NAME} placeholders from vars (the
// eval harness sets WS, HOME and TMP per case). An unknown placeholder is an
// error, not an empty string, so a typo cannot widen a root to "/".
func Load(path string, vars map[string]string) (*Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load policy: %w", err)
	}
	p, err := Parse(b, vars)
	if err != nil {
		return nil, fmt.Errorf("load policy %s: %w", path, err)
	}
	return p, nil
}

// Parse decodes a policy from JSON, expanding placeholders from vars.
func Parse(b []byte, vars map[string]string) (*Policy, error) {
	var missing []string
	expanded := os.Expand(string(b), func(k string) string {
		v, ok := vars[k]
		if !ok {
			missing = append(missing, k)
			return ""
		}
		// Escape for a JSON string: the value lands inside quotes.
		q, _ := json.Marshal(v)
		return string(q[1 : len(q)-1])
	})
	if len(missing) > 0 {
		return nil, fmt.Errorf("unknown placeholder(s) ${%s}", strings.Join(missing, "}, ${"))
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(expanded)))
	dec.DisallowUnknownFields()
	var p Policy
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("parse policy: %w", err)
	}
	return &p, nil
}
