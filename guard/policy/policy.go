// Package policy is layer L1: a per-server capability policy, loaded from
// JSON, that says which tools may be called with which arguments, and which
// files, network destinations, executables and environment variables the
// server may use. The same policy compiles to the L3 backends' rules.
package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"path/filepath"
	"regexp"

	"github.com/mcpguard/mcpguard/internal/placeholder"
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
	// Workdir is the directory relative path arguments are resolved
	// against (the server's working directory). Empty: relative paths are
	// refused.
	Workdir string `json:"workdir,omitempty"`
	// Home expands a leading "~" in path arguments, as servers do.
	Home string `json:"home,omitempty"`
	// Runtime is what the server needs to run, beyond what mcpguard
	// resolves itself (guard/runtime): granted by L3 alone, read/execute
	// only, never admitted for tool arguments.
	Runtime Runtime `json:"runtime,omitzero"`
	// Limits bound the server's process tree under L3 (cgroup limits;
	// zero fields take the launcher's defaults).
	Limits Limits `json:"limits,omitzero"`
	// Protocol is what the layers let through beyond the MCP schema.
	Protocol Protocol `json:"protocol,omitzero"`
}

// Limits are the server's resource limits (docs/policy.md, "limits").
type Limits struct {
	// Tasks caps processes and threads together (default 512).
	Tasks int `json:"tasks,omitempty"`
	// MemoryMiB caps memory, in MiB (default 1024).
	MemoryMiB int `json:"memory_mib,omitempty"`
	// CPUs caps CPU time, in CPUs (default 2).
	CPUs float64 `json:"cpus,omitempty"`
}

// Protocol widens what the layers accept of the protocol itself.
type Protocol struct {
	// AllowMethods lists methods outside the MCP schema (an extension's)
	// that pass in either direction, unjudged but for their text ("*":
	// any). Every other method outside the schema is refused (-32601).
	AllowMethods []string `json:"allow_methods,omitempty"`
}

// Runtime holds runtime grants: code and programs the server loads or
// runs, not data its tools work on. State files a server keeps at a path
// set by an environment variable are data: they belong in Filesystem.
type Runtime struct {
	// Read lists trees the server's runtime reads (an interpreter's prefix
	// that the resolver cannot find, a plugin directory).
	Read []string `json:"read,omitempty"`
	// Exec lists programs the server runs as part of its runtime (a
	// helper binary), never what tools may name (that is Exec).
	Exec []string `json:"exec,omitempty"`
	// Env lists environment variables the server needs to run (NODE_PATH,
	// PYTHONPATH, a version manager's PYENV_VERSION); they join Env.Allow
	// for the server process.
	Env []string `json:"env,omitempty"`
}

// ErrBadRuntime wraps every reason a runtime section is refused.
var ErrBadRuntime = errors.New("bad runtime section")

// Validate checks the runtime section: absolute paths other than "/", and
// variable names (or NAME* prefixes) for env.
func (r Runtime) Validate() error {
	for _, list := range [][]string{r.Read, r.Exec} {
		for _, p := range list {
			if !filepath.IsAbs(p) {
				return fmt.Errorf("%w: path %q is not absolute", ErrBadRuntime, p)
			}
			if filepath.Clean(p) == "/" {
				return fmt.Errorf("%w: / is not a runtime tree", ErrBadRuntime)
			}
		}
	}
	for _, e := range r.Env {
		if !envName.MatchString(e) {
			return fmt.Errorf("%w: env %q is not a variable name (or NAME*)", ErrBadRuntime, e)
		}
	}
	return nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*\*?$`)

// Tool holds the constraints on one tool's arguments.
type Tool struct {
	// Schema is the tool's inputSchema as seen at policy init; arguments
	// are validated against it.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Args maps argument names to extra constraints.
	Args map[string]Arg `json:"args,omitempty"`

	// Tool-scoped grants on top of the server-wide ones; operator
	// overrides land here. Read and Write are extra path roots for this
	// tool's path arguments, Hosts extra destinations for its URL and host
	// arguments, Exec extra executables for its exec and command arguments.
	Read  []string  `json:"read,omitempty"`
	Write []string  `json:"write,omitempty"`
	Hosts []NetRule `json:"hosts,omitempty"`
	Exec  []string  `json:"exec,omitempty"`
	// Pin is the digest of the tool's name, title, description and input
	// schema when the operator approved the policy (policy init --pin). A
	// server that later lists the tool differently is refused for it
	// (tool.rug_pull). Empty: the first sight in each session is the pin.
	Pin string `json:"pin,omitempty"`
	// Waive lists L2 content rules (e.g. "args.env_reference") that do not
	// apply to this tool.
	Waive []string `json:"waive,omitempty"`
	// ReadOnly says the tool only reads (its readOnlyHint, name or
	// description said so at policy init): a path argument whose kind the
	// policy does not give, or a value that reads as a path, is judged for
	// read access. Otherwise for write: the stricter reading.
	ReadOnly bool `json:"read_only,omitempty"`
}

// Arg is a constraint on one argument, named in Tool.Args by its
// top-level name ("path") or by its place in the arguments as a slot path
// ("/options/output", "/files/*/path": "*" is every item of an array and
// every extra member of an object). The argument may be a string or an
// array of strings; each string is checked.
type Arg struct {
	// Kind is "path", "url", "host" (host or host:port), "exec" (an
	// executable), "command" (a command line that reaches a shell),
	// "argv" (arguments handed to a program: every word, and every
	// option's value, is confined to the read roots like a path), "text"
	// (free text), "secret" (a credential the server takes), or "" (the
	// kind the model derives from the schema, name and description).
	// Whatever the kind, a value that reads as a path or URL is judged as
	// one.
	Kind string `json:"kind,omitempty"`
	// Access is "read" or "write" for path arguments.
	Access string `json:"access,omitempty"`
	// Program names the program an argv argument is handed to ("git",
	// "sort"), so that its option allow-list applies. Empty: the value of
	// the tool's exec argument, if it has one.
	Program string `json:"program,omitempty"`
	// Verbatim says the server uses the value exactly as sent (it does not
	// trim it): whitespace and quotes around a path or URL are then not
	// refused (args.unclean_value). Control characters still are.
	Verbatim bool `json:"verbatim,omitempty"`
}

// Argument kinds.
const (
	KindPath    = "path"
	KindURL     = "url"
	KindHost    = "host"
	KindExec    = "exec"
	KindCommand = "command"
	KindArgv    = "argv"
)

// Kinds lists every argument kind a policy may name ("" derives it).
var Kinds = []string{KindPath, KindURL, KindHost, KindExec, KindCommand, KindArgv, KindText, KindSecret}

// Path access modes.
const (
	Read  = "read"
	Write = "write"
)

// Filesystem holds path roots by access.
type Filesystem struct {
	Read  []string `json:"read,omitempty"`
	Write []string `json:"write,omitempty"`
	// ProtectExecConfig refuses, under L3, writes to the files in the
	// write roots that the user's tools execute or read as configuration
	// (package.json, lock files, .pth, Makefiles, CI workflows: package
	// guard/changes), as protected names are refused; without it they are
	// written and listed in the session change report.
	ProtectExecConfig bool `json:"protect_exec_config,omitempty"`
}

// Network holds the allowed destinations.
type Network struct {
	Allow []NetRule `json:"allow,omitempty"`
	// Schemes lists the URL schemes URL arguments may use; empty means
	// http and https.
	Schemes []string `json:"schemes,omitempty"`
}

// NetRule admits one destination: a host name, an IP or a CIDR prefix, and
// optionally a list of ports (empty means any port).
type NetRule struct {
	Host  string `json:"host"`
	Ports []int  `json:"ports,omitempty"`
	// Private admits loopback, private and link-local addresses that a
	// host name resolves to. A rule whose Host is an IP or CIDR admits the
	// addresses it names without it.
	Private bool `json:"private,omitempty"`
	// Resolve pins a host name to these addresses for the L3 egress
	// filter, which then dials them instead of asking DNS (a name only
	// the server's world knows: a test API on loopback, a split-horizon
	// name), as an /etc/hosts entry would. The addresses are the
	// operator's own statement: Private is not needed for them.
	Resolve []string `json:"resolve,omitempty"`
}

// Exec holds the executable allow-list (absolute paths; symlinks such as
// /usr/bin/python3 are resolved when the policy is compiled).
type Exec struct {
	Allow []string `json:"allow,omitempty"`
}

// Env holds the environment allow-list: exact names, or a prefix ending in
// "*" ("LC_*").
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
	expanded, err := placeholder.Expand(b, vars)
	if err != nil {
		return nil, err
	}
	var p Policy
	if err := decodeStrict(expanded, &p); err != nil {
		return nil, fmt.Errorf("parse policy: %w", err)
	}
	if err := p.Runtime.Validate(); err != nil {
		return nil, fmt.Errorf("parse policy: %w", err)
	}
	return &p, nil
}
