package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mcpguard/mcpguard/clients"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/configs"
	"github.com/mcpguard/mcpguard/guard/policy"
)

// auditFilter selects events: by time, server and rule.
type auditFilter struct {
	since          time.Time
	server, rule   string
	includeAllowed bool
}

func (f auditFilter) keep(e audit.Event) bool {
	switch {
	case !f.since.IsZero() && e.Time.Before(f.since):
		return false
	case f.server != "" && e.Server != f.server && !wrappedAs(e.Server, f.server):
		return false
	case f.rule != "" && e.Rule != f.rule && !strings.HasPrefix(e.Rule, f.rule+"."):
		return false
	case e.Decision == audit.Allow && !f.includeAllowed:
		return false
	}
	return true
}

// wrappedAs reports whether session is the name wrap gave a server
// called name: name, a dash and six hex digits (clients.Store.PolicyPath).
func wrappedAs(session, name string) bool {
	h, ok := strings.CutPrefix(session, name+"-")
	return ok && len(h) == 6 && strings.Trim(h, "0123456789abcdef") == ""
}

// parseSince reads --since: a duration back from now, or a time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%w: --since %q: want a duration (1h) or a time (2006-01-02T15:04:05)", errUsage, s)
}

func cmdAudit(ctx context.Context, s stdio, args []string) error {
	fs := newFlags(s, "audit", "[--file FILE] [--since 1h] [--server NAME] [--rule RULE] [--follow]",
		`Shows the audit log as a person reads it: denials and rewrites grouped by
server and rule, how often and the last time, the targets, and for each what
would allow it: the 'mcpguard policy override' command (L1 and L2) or the policy
line (L3). --follow then prints every new event as it is written. The default
file is the one 'mcpguard wrap' has the wrapped servers write.`)
	file := fs.String("file", "", "the audit log `file` (default: audit.jsonl in the configuration directory)")
	since := fs.String("since", "", "only events since this `time` (a duration back from now, e.g. 24h, or a time)")
	var f auditFilter
	fs.StringVar(&f.server, "server", "", "only this server's events")
	fs.StringVar(&f.rule, "rule", "", "only this `rule` (or rules below it: path, tool, file, net, ...)")
	follow := fs.Bool("follow", false, "after the summary, print new events as they are written (until interrupted)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if f.since, err = parseSince(*since, time.Now()); err != nil {
		return err
	}
	st, err := clients.DefaultStore()
	if err != nil {
		return err
	}
	if *file == "" {
		*file = filepath.Join(st.Dir, "audit.jsonl")
	}
	h := hinter{file: *file, st: st}
	events, err := readAudit(*file)
	if errors.Is(err, os.ErrNotExist) && *follow {
		events, err = nil, nil
	}
	if err != nil {
		return err
	}
	printAuditSummary(s.out, h, events, f)
	if !*follow {
		return nil
	}
	fmt.Fprintf(s.out, "\nfollowing %s (interrupt to stop)\n", *file)
	return followAudit(ctx, s.out, h, len(events), f)
}

// numbered is an event with its 1-based number in the file.
type numbered struct {
	e audit.Event
	n int
}

// auditGroup is the events of one server and rule.
type auditGroup struct {
	server, layer, rule string
	n                   int
	last                time.Time
	lastEvent           int // 1-based number in the file
	targets             []string
	example             audit.Event
	// byTarget is each target's last event and its number, for an allow
	// line per target (one target's override does not admit another).
	byTarget map[string]numbered
	// suppressed is what the session's summaries say was not written
	// (audit.Logger.Limited).
	suppressed int
}

// routineRule is what the guard does in every session as the policy says,
// not a refusal to act on: the variables the env allow-list held back.
// The summary gives it one line at the end (--rule env.filtered shows it
// in full), so that a server that works does not open with it.
const routineRule = "env.filtered"

func printAuditSummary(w io.Writer, h hinter, events []audit.Event, f auditFilter) {
	file := h.file
	groups := map[string]*auditGroup{}
	var order []string
	var routine []string
	sessions := 0
	for i, e := range events {
		if !f.keep(e) {
			continue
		}
		if e.Rule == routineRule && f.rule != routineRule {
			sessions++
			for _, v := range strings.Split(e.Target, ",") {
				if v != "" && !slices.Contains(routine, v) {
					routine = append(routine, v)
				}
			}
			continue
		}
		k := e.Server + "\x00" + e.Layer + "\x00" + e.Rule
		g, ok := groups[k]
		if !ok {
			g = &auditGroup{server: e.Server, layer: e.Layer, rule: e.Rule, byTarget: map[string]numbered{}}
			groups[k] = g
			order = append(order, k)
		}
		if e.Suppressed > 0 {
			g.suppressed += e.Suppressed
			if g.n == 0 {
				g.last, g.lastEvent, g.example = e.Time, i+1, e
			}
			continue
		}
		g.n++
		g.last, g.lastEvent, g.example = e.Time, i+1, e
		if t := eventTarget(e); t != "" {
			if !slices.Contains(g.targets, t) {
				g.targets = append(g.targets, t)
			}
			g.byTarget[t] = numbered{e, i + 1}
		}
	}
	defer printRoutine(w, routine, sessions)
	if len(order) == 0 {
		fmt.Fprintf(w, "%s: no denials or rewrites%s\n", file, f.describe())
		return
	}
	sort.SliceStable(order, func(i, j int) bool { return groups[order[i]].server < groups[order[j]].server })
	server := "\x00"
	for _, k := range order {
		g := groups[k]
		if g.server != server {
			server = g.server
			fmt.Fprintf(w, "\n%s%s\n", orDash(server), h.whose(server))
		}
		more := ""
		if g.suppressed > 0 {
			more = fmt.Sprintf(" and %d more not written", g.suppressed)
		}
		fmt.Fprintf(w, "  %s %s  %d×%s (last %s)\n", g.layer, g.rule, g.n, more, g.last.Local().Format("2006-01-02 15:04:05"))
		var shown []string
		for _, t := range g.targets[:min(3, len(g.targets))] {
			if len(t) > 100 { // env.filtered names every variable it held back
				t = t[:97] + "..."
			}
			shown = append(shown, t)
		}
		if len(g.targets) > 3 {
			shown = append(shown, fmt.Sprintf("and %d more", len(g.targets)-3))
		}
		if len(shown) > 0 {
			fmt.Fprintf(w, "      %s\n", strings.Join(shown, ", "))
		}
		fmt.Fprintf(w, "      last: %s\n", g.example.Reason)
		if g.example.Suppressed == 0 {
			printAllows(w, h, g)
		}
	}
}

// printAllows prints what would allow the group's events: one line, or,
// when its events name several targets, a line for each of the first
// three (an override admits its own target only: issue 33's matrix).
func printAllows(w io.Writer, h hinter, g *auditGroup) {
	if len(g.targets) < 2 {
		fmt.Fprintf(w, "      allow: %s\n", h.allow(g.example, g.lastEvent))
		return
	}
	for _, t := range g.targets[:min(3, len(g.targets))] {
		l := g.byTarget[t]
		fmt.Fprintf(w, "      allow (%s): %s\n", audit.Printable(t), h.allow(l.e, l.n))
	}
}

// printRoutine is the one line for the env allow-list's work.
func printRoutine(w io.Writer, vars []string, sessions int) {
	if sessions == 0 {
		return
	}
	sort.Strings(vars)
	shown := strings.Join(vars[:min(8, len(vars))], ", ")
	if len(vars) > 8 {
		shown += fmt.Sprintf(" and %d more", len(vars)-8)
	}
	fmt.Fprintf(w, "\nroutine: %d session(s) started without the environment variables the policy's env allow-list leaves out (%s); "+
		"a server that needs one: \"env\": {\"allow\": [\"NAME\"]}; --rule %s lists them by server\n", sessions, shown, routineRule)
}

func (f auditFilter) describe() string {
	var parts []string
	if !f.since.IsZero() {
		parts = append(parts, "since "+f.since.Local().Format("2006-01-02 15:04:05"))
	}
	if f.server != "" {
		parts = append(parts, "server "+f.server)
	}
	if f.rule != "" {
		parts = append(parts, "rule "+f.rule)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func eventTarget(e audit.Event) string {
	t := e.Target
	if e.Tool != "" {
		t = strings.TrimSpace(e.Tool + " " + t)
	}
	return t
}

// hinter says what would allow an event of the audit log file, with the
// policies wrap keeps in st.
type hinter struct {
	file string
	st   clients.Store
}

// whose names the client and policy of a server wrap put behind mcpguard.
func (h hinter) whose(server string) string {
	p, client := h.st.PolicyOf(server)
	if p == "" {
		return ""
	}
	return fmt.Sprintf(" (%s; policy %s)", client, p)
}

// allow is what would allow event number n: the override command for a
// policy decision (writing into the policy's own overrides directory when
// wrap keeps the policy), the policy line for a kernel denial.
func (h hinter) allow(e audit.Event, n int) string {
	if e.Layer == "L3" {
		if ds := configs.Denials([]audit.Event{e}, nil, 1); len(ds) > 0 {
			return ds[0].Allow
		}
		return "nothing in the policy: this is a containment rule every server is under (docs/l3.md)"
	}
	if _, err := policy.OverrideFor(e); err != nil {
		return err.Error()
	}
	dir := "<the policy's overrides/ directory>"
	if p, _ := h.st.PolicyOf(e.Server); p != "" {
		dir = filepath.Join(filepath.Dir(p), policy.OverridesDir)
	}
	return fmt.Sprintf("mcpguard policy override --audit %s --event %d --write %s", h.file, n, dir)
}

// followAudit prints the events appended to file after the first skip,
// each with what would allow it, until ctx ends.
func followAudit(ctx context.Context, w io.Writer, h hinter, skip int, f auditFilter) error {
	file := h.file
	var (
		offset int64
		n      int
		rest   []byte
	)
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	for {
		fh, err := os.Open(file)
		if err == nil {
			if fi, err := fh.Stat(); err == nil && fi.Size() < offset {
				offset, n, skip, rest = 0, 0, 0, nil // truncated or replaced: start over
			}
			fh.Seek(offset, io.SeekStart)
			b, _ := io.ReadAll(bufio.NewReader(fh))
			fh.Close()
			offset += int64(len(b))
			rest = append(rest, b...)
			for {
				i := strings.IndexByte(string(rest), '\n')
				if i < 0 {
					break
				}
				line := rest[:i]
				rest = rest[i+1:]
				if len(strings.TrimSpace(string(line))) == 0 {
					continue
				}
				n++
				var e audit.Event
				if json.Unmarshal(line, &e) != nil || n <= skip || !f.keep(e) {
					continue
				}
				fmt.Fprintf(w, "%s %s %s %s %s: %s\n", e.Time.Local().Format("15:04:05"), orDash(e.Server),
					e.Layer, e.Rule, e.Decision, e.Reason)
				if e.Suppressed == 0 { // a summary names no one target
					fmt.Fprintf(w, "      allow: %s\n", h.allow(e, n))
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
