package configs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
)

// Explainer reports L3 denials while the server runs, not only when it
// exits: each one once (by kind and target), with the policy line that
// would allow it, from the kernel (BPF LSM's events, Landlock's audit
// records) or, where the kernel tells no one, from what the server printed
// on stderr or answered a tool call with (EACCES, EROFS, a refused
// connect). It is safe for concurrent use.
type Explainer struct {
	mu      sync.Mutex
	w       io.Writer
	backend string
	seen    map[string]bool
	first   []Denial
	line    []byte // the server's stderr since its last newline
	// log, when set, also receives the denials the kernel told no one of
	// (seen in what the server printed or answered), as L3 events with
	// a RuleReported* rule: the kernel's and the egress filter's are
	// logged by the backend already.
	log            *audit.Logger
	server, config string
}

// The rules of the L3 refusals known only from the server's own report
// (its stderr, a tool's answer): Landlock without the kernel's audit
// records tells no one else. eventDenial reads them back by these words.
const (
	RuleReportedOpen    = "reported.open_refused"
	RuleReportedWrite   = "reported.write_refused"
	RuleReportedExec    = "reported.exec_refused"
	RuleReportedConnect = "reported.net_refused"
	RuleReportedUnix    = "reported.unix_socket_refused"
)

// reportedRule is the audit rule of a Denial seen in the server's report.
func reportedRule(kind string) string {
	switch kind {
	case "write":
		return RuleReportedWrite
	case "exec":
		return RuleReportedExec
	case "connect":
		return RuleReportedConnect
	case "unix":
		return RuleReportedUnix
	}
	return RuleReportedOpen
}

// LogTo makes x also write the denials only the server reported to l
// (audit log and `mcpguard audit`), for server under config.
func (x *Explainer) LogTo(l *audit.Logger, server, config string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.log, x.server, x.config = l, server, config
}

// maxExplained bounds the denials one session prints (and keeps for the
// exit report).
const maxExplained = 32

// NewExplainer writes its reports to w, naming the backend.
func NewExplainer(w io.Writer, backend string) *Explainer {
	return &Explainer{w: w, backend: backend, seen: map[string]bool{}}
}

// Event reports a kernel denial (an L3 audit event); others are ignored.
func (x *Explainer) Event(e audit.Event) {
	if d, ok := eventDenial(e); ok {
		x.report(d, e.Reason)
	}
}

// Text reports the refusals in what the server said (from says where).
func (x *Explainer) Text(b []byte, from string) {
	for _, d := range textDenials(b, from) {
		x.report(d, "")
	}
}

func (x *Explainer) report(d Denial, why string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	k := d.Kind + " " + d.Target
	if d.Target == "" || x.seen[k] || len(x.seen) >= maxExplained {
		return
	}
	x.seen[k] = true
	d.Allow = allowLine(d.Kind, d.Target)
	x.first = append(x.first, d)
	// Targets come from what the server printed: escaped, so that its
	// control characters cannot rewrite the terminal around mcpguard's
	// own lines (red team 5).
	fmt.Fprintf(x.w, "mcpguard: L3 (%s) denied %s %s [%s]\n", x.backend, d.Kind, audit.Printable(d.Target), audit.Printable(d.From))
	if why != "" {
		fmt.Fprintf(x.w, "          %s\n", audit.Printable(why))
	}
	fmt.Fprintf(x.w, "          allow: %s\n", audit.Printable(d.Allow))
	if x.log != nil && d.From != "kernel" && d.From != "egress filter" {
		x.log.Log(audit.Event{Server: x.server, Config: x.config, Layer: "L3", Rule: reportedRule(d.Kind),
			Decision: audit.Deny, Target: d.Target,
			Reason: fmt.Sprintf("refused under L3 (%s), known from the %s: the kernel reported nothing here; allow: %s", x.backend, d.From, d.Allow)})
	}
}

// Explained returns the denials reported so far.
func (x *Explainer) Explained() []Denial {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]Denial(nil), x.first...)
}

// Write takes the server's stderr and reports the refusals of each whole
// line as it is written.
func (x *Explainer) Write(p []byte) (int, error) {
	x.mu.Lock()
	x.line = append(x.line, p...)
	var lines []byte
	if i := bytes.LastIndexByte(x.line, '\n'); i >= 0 {
		lines = bytes.Clone(x.line[:i+1])
		x.line = append(x.line[:0], x.line[i+1:]...)
	}
	if len(x.line) > 64<<10 { // a line that never ends
		x.line = x.line[len(x.line)-(4<<10):]
	}
	x.mu.Unlock()
	if len(lines) > 0 {
		x.Text(lines, "server stderr")
	}
	return len(p), nil
}

// refusal is the cheap test before a response is read for refusals.
var refusal = [][]byte{[]byte("EACCES"), []byte("EPERM"), []byte("EROFS"), []byte("ECONNREFUSED"), []byte("ermission denied"),
	[]byte("ead-only file system"), []byte("peration not permitted"), []byte("ENOENT"), []byte("o such file or directory")}

// Stage is a guard.Stage that reads tool results and errors for the
// refusals the server answered with: where L3's denial reaches only the
// server (EROFS from a read-only mount, Landlock without its audit
// records), the server often tells the client rather than its stderr.
func (x *Explainer) Stage() guard.Stage { return explainStage{x} }

type explainStage struct{ x *Explainer }

func (explainStage) Request(context.Context, *guard.Request) *guard.Response { return nil }

func (s explainStage) Response(_ context.Context, req *guard.Request, resp *guard.Response) *guard.Response {
	if req.Method != "tools/call" || resp == nil {
		return resp
	}
	body := resp.Result
	if resp.Error != nil {
		body = []byte(resp.Error.Message)
	}
	for _, r := range refusal {
		if bytes.Contains(body, r) {
			// JSON escapes quotes in the text: read it unescaped enough
			// for the patterns (they quote paths with ').
			s.x.Text(bytes.ReplaceAll(body, []byte(`\n`), []byte("\n")), "tool "+req.Tool+" answered")
			break
		}
	}
	if bytes.Contains(body, []byte("fetch failed")) || bytes.Contains(body, []byte("ECONNREFUSED")) {
		for _, d := range loopbackURLs(req.Arguments) {
			s.x.report(Denial{Kind: "connect", Target: d, From: "tool " + req.Tool + " answered a failed connection, its arguments naming " + d}, "")
		}
	}
	return resp
}

// loopbackURL is a URL on loopback in a tool's arguments.
var loopbackURL = regexp.MustCompile(`(?i)\b(https?|wss?)://(localhost|127(?:\.[0-9]{1,3}){3}|\[::1\])(?::([0-9]{1,5}))?`)

// loopbackURLs are the host:port destinations of the loopback URLs in a
// tool call's arguments. Under L3 the server's loopback is its own, so
// a tool that fails to fetch one (node's bare "TypeError: fetch failed",
// which names nothing: issue 33's matrix) was refused a service of the
// host that only a network rule reaches.
func loopbackURLs(args []byte) []string {
	var out []string
	for _, m := range loopbackURL.FindAllSubmatch(args, 8) {
		port := string(m[3])
		if port == "" {
			port = "80"
			if s := strings.ToLower(string(m[1])); s == "https" || s == "wss" {
				port = "443"
			}
		}
		host := strings.Trim(string(m[2]), "[]")
		if strings.EqualFold(host, "localhost") {
			host = "127.0.0.1"
		}
		if d := net.JoinHostPort(host, port); !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}
