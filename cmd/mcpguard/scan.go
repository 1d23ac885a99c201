package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpguard/mcpguard/clients"
	"github.com/mcpguard/mcpguard/clients/scan"
	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/configs"
	"github.com/mcpguard/mcpguard/guard/landlock"
)

// exitFindings is scan's status when it found something at or above
// --fail-on: a CI job gates on it.
const exitFindings = 3

// scanTarget is one configured stdio server to start and list.
type scanTarget struct {
	id, client, file, name string
	argv, env              []string
	dir                    string
	policy                 string            // the wrapped entry's policy, or ""
	vars                   map[string]string // its --var values
}

// scanResult is one server's line in scan's output.
type scanResult struct {
	ID        string `json:"id"`
	Client    string `json:"client"`
	File      string `json:"file"`
	Server    string `json:"server"`
	Tools     int    `json:"tools"`
	Prompts   int    `json:"prompts"`
	Resources int    `json:"resources"`
	Error     string `json:"error,omitempty"`
}

type scanReport struct {
	Servers  []scanResult   `json:"servers"`
	Findings []scan.Finding `json:"findings"`
}

func cmdScan(ctx context.Context, s stdio, args []string) error {
	fs := newFlags(s, "scan", "[--client NAME] [--server NAME] [--project DIR] [--json] [--fail-on high|medium|info|none]",
		`Starts every configured stdio server confined (Landlock: no network, no writes,
nothing of the machine but its runtime and the paths its own command line or
policy names), lists its tools, prompts and resources, and judges them with
L2's checks (poisoning, hidden Unicode, secrets) and across servers (a
description naming another server's tool, tool names that look alike). The
digest of every definition is pinned (in the configuration directory); the
next scan reports what changed (a rug pull between sessions), until --accept.
Nothing is started unconfined: where Landlock is missing, servers are not
started, and say so.

Exit status: 0 when nothing at or above --fail-on was found, 3 when something
was, 1 on errors, 2 for usage.`)
	var c clientFlags
	c.register(fs)
	asJSON := fs.Bool("json", false, "print JSON instead of tables")
	failOn := fs.String("fail-on", scan.Medium, "exit 3 when a finding is at least this severe: high, medium, info or none")
	accept := fs.Bool("accept", false, "pin the definitions as they are now (after reviewing what changed)")
	pinsFile := fs.String("pins", "", "the pins `file` (default: scan-pins.json in the configuration directory)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up on one server after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !slices.Contains([]string{scan.High, scan.Medium, scan.Info, "none"}, *failOn) {
		return fmt.Errorf("%w: --fail-on %q", errUsage, *failOn)
	}
	st, err := clients.DefaultStore()
	if err != nil {
		return err
	}
	if *pinsFile == "" {
		*pinsFile = st.PinPath()
	}
	_, found, err := c.discover()
	if err != nil {
		return err
	}
	rep, servers := scanAll(ctx, s, &c, found, *timeout)
	old, err := scan.LoadPins(*pinsFile)
	if err != nil {
		return err
	}
	var pins scan.Pins
	findings, pins := scan.Judge(servers, old, *accept)
	rep.Findings = append(rep.Findings, findings...)
	if b, err := pins.Marshal(); err != nil {
		return err
	} else if err := clients.WriteFile(*pinsFile, b, 0o600); err != nil {
		return fmt.Errorf("write pins: %w", err)
	}
	if *asJSON {
		if rep.Findings == nil {
			rep.Findings = []scan.Finding{}
		}
		if err := writeJSON(s.out, rep); err != nil {
			return err
		}
	} else {
		printScan(s.out, rep)
	}
	if *failOn != "none" {
		for _, f := range rep.Findings {
			if scan.Rank(f.Severity) <= scan.Rank(*failOn) {
				return &exitCode{code: exitFindings}
			}
		}
	}
	return nil
}

// scanAll starts and lists every selected server. A server that cannot be
// scanned is a finding (medium), never a silent pass.
func scanAll(ctx context.Context, s stdio, c *clientFlags, found []clients.Found, timeout time.Duration) (scanReport, []scan.Server) {
	var (
		rep     scanReport
		servers []scan.Server
	)
	confined := scanConfig()
	for _, f := range found {
		if f.Err != nil {
			rep.Findings = append(rep.Findings, scan.Finding{Severity: scan.Medium, Rule: "unreadable", Server: f.Client + ":" + f.Path, Detail: f.Err.Error()})
			continue
		}
		env := clients.Env{}
		if e, err := clients.HostEnv(); err == nil {
			env = e
		}
		if c.project != "" {
			env.Project, _ = filepath.Abs(c.project)
		}
		for _, srv := range f.Servers {
			if !c.matches(srv) {
				continue
			}
			t, why := newScanTarget(f, env, srv)
			r := scanResult{ID: t.id, Client: f.Client, File: f.Path, Server: srv.Name}
			if why == "" && confined != nil {
				why = confined.Error()
			}
			if why != "" {
				r.Error = why
				sev := scan.Medium
				if srv.Transport != clients.Stdio {
					sev = scan.Info
				}
				rep.Findings = append(rep.Findings, scan.Finding{Severity: sev, Rule: "not_scanned", Server: t.id, Detail: why})
				rep.Servers = append(rep.Servers, r)
				continue
			}
			sctx, cancel := context.WithTimeout(ctx, timeout)
			ss, err := listServer(sctx, s.err, t)
			cancel()
			if err != nil {
				// Not judged, and its pins are kept as they were: a
				// server that failed to list has not changed.
				r.Error = err.Error()
				rep.Findings = append(rep.Findings, scan.Finding{Severity: scan.Medium, Rule: "not_scanned", Server: t.id, Detail: "could not list it confined: " + err.Error()})
				rep.Servers = append(rep.Servers, r)
				continue
			}
			for _, d := range ss.Defs {
				switch d.Kind {
				case scan.Tool:
					r.Tools++
				case scan.Prompt:
					r.Prompts++
				case scan.Resource, scan.Template:
					r.Resources++
				}
			}
			rep.Servers = append(rep.Servers, r)
			servers = append(servers, ss)
		}
	}
	return rep, servers
}

// scanConfig is nil where servers can be started confined (Landlock), or
// why they cannot.
func scanConfig() error {
	if _, err := landlock.KernelABI(); err != nil {
		return fmt.Errorf("not started: mcpguard starts no configured server unconfined, and Landlock is not available here (%v)", err)
	}
	return nil
}

// newScanTarget is how one entry is started for the scan: as its client
// starts it (variables expanded), its own command when it is wrapped, with
// the policy of the wrap when there is one.
func newScanTarget(f clients.Found, env clients.Env, srv clients.Server) (scanTarget, string) {
	t := scanTarget{id: f.Client + ":" + shortPath(env, f.Path) + ":" + strings.Join(srv.Key, "."), client: f.Client, file: f.Path, name: srv.Name}
	switch {
	case srv.Transport != clients.Stdio:
		return t, fmt.Sprintf("a %s server: not started (scan lists stdio servers)", srv.Transport)
	case srv.Problem != "" && !srv.Guarded:
		return t, srv.Problem
	}
	argv, envv, missing, err := expandServer(f.File, env, srv)
	if err != nil {
		return t, err.Error()
	}
	if len(missing) > 0 {
		return t, fmt.Sprintf("its entry uses %s, which only %s knows", strings.Join(missing, ", "), f.Client)
	}
	if srv.Guarded {
		if len(srv.Inner) == 0 {
			return t, "guarded, but no server command after --"
		}
		wrapped := argv[1:]
		t.policy, t.vars = guardedPolicy(wrapped)
		argv = argv[len(argv)-len(srv.Inner):]
	}
	t.argv, t.env = argv, envv
	if srv.Cwd != "" {
		t.dir, _ = clients.Expand(f.File, env, srv.Cwd)
	}
	return t, ""
}

// guardedPolicy reads --policy and --var from `mcpguard run`'s arguments.
func guardedPolicy(args []string) (policy string, vars map[string]string) {
	vars = map[string]string{}
	for i := 0; i < len(args) && args[i] != "--"; i++ {
		a := args[i]
		val := func() string {
			if _, v, ok := strings.Cut(a, "="); ok {
				return v
			}
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch {
		case a == "--policy" || a == "-policy" || strings.HasPrefix(a, "--policy=") || strings.HasPrefix(a, "-policy="):
			policy = val()
		case a == "--var" || a == "-var" || strings.HasPrefix(a, "--var=") || strings.HasPrefix(a, "-var="):
			if k, v, ok := strings.Cut(val(), "="); ok {
				vars[k] = v
			}
		}
	}
	return policy, vars
}

// scanPolicy is the policy a server that was never wrapped is listed
// under: nothing but what its runtime needs (resolved by L3), and the
// paths its own command line names, read-only.
func scanPolicy(t scanTarget) ([]byte, error) {
	home, _ := os.UserHomeDir()
	var read []string
	for _, r := range argumentRoots(t.argv, home) {
		read = append(read, r.Root)
	}
	return json.Marshal(map[string]any{"server": t.name, "filesystem": map[string]any{"read": read}})
}

// listServer starts one server under C-landlock and lists what it offers:
// the instructions of initialize, tools, prompts, resources and resource
// templates, every page, as the server wrote them.
func listServer(ctx context.Context, stderr io.Writer, t scanTarget) (scan.Server, error) {
	out := scan.Server{ID: t.id, Name: t.name, Group: t.client}
	policyFile, vars := t.policy, t.vars
	if policyFile == "" {
		b, err := scanPolicy(t)
		if err != nil {
			return out, err
		}
		dir, err := os.MkdirTemp("", "mcpguard-scan-")
		if err != nil {
			return out, err
		}
		defer os.RemoveAll(dir)
		policyFile = filepath.Join(dir, "policy.json")
		if err := os.WriteFile(policyFile, b, 0o600); err != nil {
			return out, err
		}
	}
	if vars == nil {
		vars = map[string]string{}
	}
	for k, v := range map[string]string{"HOME": os.Getenv("HOME"), "TMP": os.TempDir()} {
		if _, ok := vars[k]; !ok {
			vars[k] = v
		}
	}
	if _, ok := vars["WS"]; !ok {
		vars["WS"], _ = os.Getwd()
	}
	setup, err := configs.Build(configs.CLandlock, configs.Options{Server: t.name, PolicyFile: policyFile, Vars: vars})
	if err != nil {
		return out, err
	}
	tail := &tailBuffer{max: 4 << 10}
	p := &guard.Proxy{Command: t.argv, Dir: t.dir, Env: append(os.Environ(), t.env...), Server: t.name, Config: setup.Name,
		Stages: setup.Stages, ServerHooks: setup.ServerHooks, Prepare: setup.Prepare, Sandbox: setup.Sandbox, Stderr: tail}
	sess, err := guard.Open(ctx, p)
	if err != nil {
		return out, fmt.Errorf("%w (server's stderr: %s)", err, strings.TrimSpace(string(tail.bytes())))
	}
	defer sess.Close()
	if in := sess.Init.Instructions; in != "" {
		raw, _ := json.Marshal(in)
		out.Defs = append(out.Defs, scan.Definition{Kind: scan.Instructions, Name: "initialize", Raw: raw})
	}
	caps := sess.Init.Capabilities
	lists := []struct {
		method, key, name, kind string
		on                      bool
	}{
		{"tools/list", "tools", "name", scan.Tool, caps.Tools != nil},
		{"prompts/list", "prompts", "name", scan.Prompt, caps.Prompts != nil},
		{"resources/list", "resources", "uri", scan.Resource, caps.Resources != nil},
		{"resources/templates/list", "resourceTemplates", "uriTemplate", scan.Template, caps.Resources != nil},
	}
	tr := sess.Client.GetTransport()
	for _, l := range lists {
		if !l.on {
			continue
		}
		items, err := listAll(ctx, tr, l.method, l.key)
		if err != nil {
			return out, err
		}
		for _, raw := range items {
			var m map[string]any
			json.Unmarshal(raw, &m)
			name, _ := m[l.name].(string)
			out.Defs = append(out.Defs, scan.Definition{Kind: l.kind, Name: name, Raw: raw})
		}
	}
	return out, nil
}

// listAll follows a list method's pages and returns its items raw.
func listAll(ctx context.Context, tr transport.Interface, method, key string) ([]json.RawMessage, error) {
	var out []json.RawMessage
	cursor := ""
	for page := 0; page < 1000; page++ {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		resp, err := tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: "2.0",
			ID: mcp.NewRequestId(fmt.Sprintf("scan-%s-%d", method, page)), Method: method, Params: params})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		if resp.Error != nil {
			return nil, fmt.Errorf("%s: server error %d: %s", method, resp.Error.Code, resp.Error.Message)
		}
		var r map[string]json.RawMessage
		if err := json.Unmarshal(resp.Result, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		var items []json.RawMessage
		if err := json.Unmarshal(r[key], &items); err != nil && len(r[key]) > 0 {
			return nil, fmt.Errorf("%s: %s: %w", method, key, err)
		}
		out = append(out, items...)
		json.Unmarshal(r["nextCursor"], &cursor)
		if cursor == "" {
			return out, nil
		}
	}
	return nil, fmt.Errorf("%s: too many pages", method)
}

func printScan(w io.Writer, rep scanReport) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tTOOLS\tPROMPTS\tRESOURCES\tSTATUS")
	for _, r := range rep.Servers {
		status := "listed confined"
		if r.Error != "" {
			status = "not scanned: " + r.Error
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", audit.Printable(r.ID), r.Tools, r.Prompts, r.Resources, audit.Printable(status))
	}
	tw.Flush()
	if len(rep.Findings) == 0 {
		fmt.Fprintln(w, "\nno findings")
		return
	}
	fmt.Fprintf(w, "\n%d findings:\n", len(rep.Findings))
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEVERITY\tRULE\tSERVER\tDEFINITION\tDETAIL")
	for _, f := range rep.Findings {
		def := strings.TrimSpace(f.Kind + " " + f.Name)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.Severity, f.Rule, audit.Printable(f.Server), audit.Printable(def), audit.Printable(f.Detail))
	}
	tw.Flush()
}
