package main

import (
	"fmt"

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
