package main

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/jsonrpc"

	"github.com/mcpguard/mcpguard/guard/configs"
	"github.com/mcpguard/mcpguard/guard/landlock/auditlog"
)

// newExplainer says how the backend's denials will be reported and
// returns the Explainer that reports them.
func newExplainer(s stdio, backend string) *configs.Explainer {
	fmt.Fprintln(s.err, "mcpguard: "+liveDenials(backend))
	return configs.NewExplainer(s.err, backend)
}

// liveDenials says how the L3 backend's denials reach mcpguard while the
// server runs: BPF LSM's from its ring buffer; Landlock's from the kernel's
// audit records where they can be read, otherwise only from what the
// server itself prints or answers (and what is missing).
func liveDenials(backend string) string {
	if backend != "landlock" {
		return "L3 denials are reported as they happen, with the policy line that would allow each (kernel events)"
	}
	r, err := auditlog.Open()
	if err != nil {
		return "L3 denials are reported as they happen from what the server prints or answers (EACCES, EROFS), not from the kernel: " + err.Error()
	}
	r.Close()
	return "L3 denials are reported as they happen, with the policy line that would allow each (Landlock's audit records)"
}

// denialEcho is a guard.Stage, first in `run`'s chain so that its
// response phase sees every layer's refusal, that prints each denied
// request on stderr: a client that hides tool errors leaves the user with
// nothing on the terminal otherwise (issue 33's matrix). The audit log
// keeps every one; stderr gets the first maxEchoed distinct ones.
type denialEcho struct {
	mu    sync.Mutex
	w     io.Writer
	audit string // --audit's file, "" when none
	seen  map[string]bool
}

const maxEchoed = 32

// withDenialEcho puts a denialEcho first in stages, so that `run` prints
// every refusal on stderr too (call prints its own). A config without
// layers (C0) refuses nothing and keeps no stage: a stage would make the
// proxy judge and canonicalise every message of the unguarded baseline.
func withDenialEcho(stages []guard.Stage, w io.Writer, auditFile string) []guard.Stage {
	if len(stages) == 0 {
		return stages
	}
	return append([]guard.Stage{newDenialEcho(w, auditFile)}, stages...)
}

func newDenialEcho(w io.Writer, auditFile string) *denialEcho {
	return &denialEcho{w: w, audit: auditFile, seen: map[string]bool{}}
}

func (*denialEcho) Request(context.Context, *guard.Request) *guard.Response { return nil }

func (d *denialEcho) Response(_ context.Context, req *guard.Request, resp *guard.Response) *guard.Response {
	if resp == nil || resp.Error == nil || resp.Error.Code != jsonrpc.CodeDenied {
		return resp
	}
	what := req.Method
	if req.Tool != "" {
		what += " " + req.Tool
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	k := what + "\x00" + resp.Error.Message
	if d.seen[k] || len(d.seen) > maxEchoed {
		return resp
	}
	d.seen[k] = true
	if len(d.seen) > maxEchoed {
		fmt.Fprintf(d.w, "mcpguard: more denials than %d: see the audit log\n", maxEchoed)
		return resp
	}
	hint := "run with --audit FILE to keep it, then mcpguard audit --file FILE for what would allow it"
	if d.audit != "" && d.audit != "-" {
		hint = "what would allow it: mcpguard audit --file " + d.audit
	}
	fmt.Fprintf(d.w, "mcpguard: denied %s: %s\n          %s\n", audit.Printable(what), audit.Printable(resp.Error.Message), hint)
	return resp
}
