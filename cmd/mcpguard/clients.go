package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/mcpguard/mcpguard/clients"
)

// clientFlags select configuration files and servers: wrap, unwrap,
// clients and scan share them.
type clientFlags struct {
	client, server, project string
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.client, "client", "", "only this client's files: "+strings.Join(clients.Names(), ", "))
	fs.StringVar(&c.server, "server", "", "only servers of this `name`")
	fs.StringVar(&c.project, "project", "", "the project `dir` whose files (.mcp.json, .vscode/mcp.json, ...) are read (default: the working directory)")
}

// discover finds the configuration files for the flags.
func (c *clientFlags) discover() (clients.Env, []clients.Found, error) {
	if c.client != "" && !slices.Contains(clients.Names(), c.client) {
		return clients.Env{}, nil, fmt.Errorf("%w: unknown client %q (want one of %s)", errUsage, c.client, strings.Join(clients.Names(), ", "))
	}
	env, err := clients.HostEnv()
	if err != nil {
		return env, nil, err
	}
	if c.project != "" {
		if env.Project, err = filepath.Abs(c.project); err != nil {
			return env, nil, err
		}
		if fi, err := os.Stat(env.Project); err != nil || !fi.IsDir() {
			if err == nil {
				err = errors.New("not a directory")
			}
			return env, nil, fmt.Errorf("%w: --project %s: %v", errUsage, c.project, err)
		}
	}
	var out []clients.Found
	for _, f := range clients.Discover(env) {
		if c.client == "" || f.Client == c.client {
			out = append(out, f)
		}
	}
	return env, out, nil
}

func (c *clientFlags) matches(s clients.Server) bool {
	return c.server == "" || s.Name == c.server
}

// shortPath shows a path under the home directory with ~.
func shortPath(env clients.Env, p string) string {
	if rel, err := filepath.Rel(env.Home, p); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.Join("~", rel)
	}
	return p
}

// clientRow is one server as `mcpguard clients --json` prints it.
type clientRow struct {
	Client    string   `json:"client"`
	Scope     string   `json:"scope"`
	File      string   `json:"file"`
	Server    string   `json:"server,omitempty"`
	Transport string   `json:"transport,omitempty"`
	Guarded   bool     `json:"guarded"`
	Command   []string `json:"command,omitempty"`
	URL       string   `json:"url,omitempty"`
	Disabled  bool     `json:"disabled,omitempty"`
	Note      string   `json:"note,omitempty"`
	Error     string   `json:"error,omitempty"`
}

func cmdClients(ctx context.Context, s stdio, args []string) error {
	fs := newFlags(s, "clients", "[--client NAME] [--project DIR] [--json]",
		`Lists the MCP client configurations on this machine (Claude Desktop, Claude Code,
Cursor, VS Code, Windsurf, Gemini CLI, Codex) and in the project directory, and
every server in them: its transport, its command or URL, and whether mcpguard
guards it. 'mcpguard wrap' puts the stdio servers behind the guard.`)
	var c clientFlags
	c.register(fs)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	if err := fs.Parse(args); err != nil {
		return err
	}
	env, found, err := c.discover()
	if err != nil {
		return err
	}
	var rows []clientRow
	for _, f := range found {
		base := clientRow{Client: f.Client, Scope: f.Scope, File: f.Path}
		if f.Err != nil {
			base.Error = f.Err.Error()
			rows = append(rows, base)
			continue
		}
		for _, srv := range f.Servers {
			if !c.matches(srv) {
				continue
			}
			r := base
			r.Scope, r.Server, r.Transport, r.Guarded, r.URL, r.Disabled = srv.Scope, srv.Name, srv.Transport, srv.Guarded, srv.URL, srv.Disabled
			if srv.Transport == clients.Stdio {
				r.Command = srv.Argv()
			}
			if srv.Problem != "" && !srv.Guarded {
				r.Note = "not wrappable: " + srv.Problem
			}
			rows = append(rows, r)
		}
	}
	if *asJSON {
		if rows == nil {
			rows = []clientRow{}
		}
		return writeJSON(s.out, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintf(s.err, "no MCP client configuration found (looked for %d files; mcpguard clients -h lists the clients)\n", len(clients.Files(env)))
		return nil
	}
	printClients(s, env, rows)
	return nil
}

func printClients(s stdio, env clients.Env, rows []clientRow) {
	tw := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLIENT\tSCOPE\tFILE\tSERVER\tTRANSPORT\tGUARDED\tCOMMAND OR URL")
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\tcannot read: %s\n", r.Client, r.Scope, shortPath(env, r.File), r.Error)
			continue
		}
		what := r.URL
		if r.Transport == clients.Stdio {
			what = strings.Join(r.Command, " ")
		}
		if len(what) > 80 {
			what = what[:77] + "..."
		}
		guarded := "no"
		if r.Guarded {
			guarded = "yes"
		}
		if r.Disabled {
			guarded += " (disabled)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Client, r.Scope, shortPath(env, r.File), r.Server, r.Transport, guarded, what)
		if r.Note != "" {
			fmt.Fprintf(tw, "\t\t\t\t\t\t  (%s)\n", r.Note)
		}
	}
	tw.Flush()
}

// errNotWrapped is returned (exit status 1) by wrap when a selected
// server could not be wrapped for an error (a file it cannot read, a
// policy init that failed, a wrapped command that does not start), and by
// unwrap when a recorded change could not be put back; the others are
// still done.
var errNotWrapped = errors.New("not done")

func cmdUnwrap(ctx context.Context, s stdio, args []string) error {
	fs := newFlags(s, "unwrap", "[--client NAME] [--server NAME] [--project DIR]",
		`Puts back the servers 'mcpguard wrap' wrapped: byte for byte where the entry
is still as wrap left it, by value (the command and args after --) where it
changed since. Servers put behind mcpguard by hand are left alone. The
policies stay in the configuration directory.`)
	var c clientFlags
	c.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	st, err := clients.DefaultStore()
	if err != nil {
		return err
	}
	env, found, err := c.discover()
	if err != nil {
		return err
	}
	done, failed := 0, 0
	for _, f := range found {
		n, err := unwrapFile(s, st, env, &c, f)
		if err != nil {
			fmt.Fprintf(s.err, "%s: not unwrapped: %v\n", shortPath(env, f.Path), err)
			failed++
		}
		done += n
	}
	if failed > 0 {
		return &exitCode{code: 1, err: fmt.Errorf("%w: %d unwrapped, %d file(s) not (see above)", errNotWrapped, done, failed)}
	}
	if done == 0 {
		fmt.Fprintln(s.err, "nothing to unwrap")
	}
	return nil
}

// unwrapFile puts back the recorded changes of one file that the flags
// select, and returns how many.
func unwrapFile(s stdio, st clients.Store, env clients.Env, c *clientFlags, f clients.Found) (int, error) {
	changes, err := st.Changes(f.Path)
	if err != nil {
		return 0, err
	}
	changes = slices.DeleteFunc(changes, func(ch clients.Change) bool {
		return c.server != "" && ch.Key[len(ch.Key)-1] != c.server
	})
	if len(changes) == 0 {
		if f.Err != nil {
			fmt.Fprintf(s.err, "%s: cannot read: %v\n", shortPath(env, f.Path), f.Err)
		}
		return 0, nil
	}
	if f.Err != nil {
		return 0, f.Err
	}
	var done []clients.Restored
	// As wrap does: the file as it is now, never written over a change
	// made meanwhile (the edit is redone on the new bytes).
	for try := 1; ; try++ {
		cur, err := os.ReadFile(f.Path)
		if err != nil {
			return 0, err
		}
		var out []byte
		out, done, err = clients.Unwrap(f.File, cur, changes)
		if err != nil || len(done) == 0 {
			return 0, err
		}
		err = clients.Replace(f.Path, cur, out)
		if err == nil {
			break
		}
		if !errors.Is(err, clients.ErrChanged) || try == 3 {
			return 0, fmt.Errorf("write: %w", err)
		}
	}
	var keys [][]string
	for _, r := range done {
		keys = append(keys, r.Key)
		how := "restored byte for byte"
		if !r.Exact {
			how = "restored by value (the entry changed since wrap; its other keys are kept)"
		}
		fmt.Fprintf(s.out, "unwrapped %s %s: %s\n", shortPath(env, f.Path), r.Key[len(r.Key)-1], how)
	}
	return len(done), st.DropChanges(f.Path, keys)
}
