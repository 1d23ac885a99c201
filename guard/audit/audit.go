// Package audit writes the guard's decisions as JSON lines: one event for
// every call a layer denied or changed.
package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"
)

// Decision values.
const (
	Deny    = "deny"
	Rewrite = "rewrite"
	Allow   = "allow"
)

// Event is one audit record. Args holds only a digest of the arguments, so
// the log does not become a second place where secrets leak.
type Event struct {
	Time     time.Time `json:"time"`
	Server   string    `json:"server"`
	Config   string    `json:"config"`
	Layer    string    `json:"layer"`
	Rule     string    `json:"rule"`
	Tool     string    `json:"tool,omitempty"`
	Decision string    `json:"decision"`
	Reason   string    `json:"reason"`
	// Target is what the rule was applied to (a path, host, executable), so
	// an override can be scoped to it.
	Target     string `json:"target,omitempty"`
	ArgsDigest string `json:"args_digest,omitempty"`
	PID        int    `json:"pid,omitempty"`
	// Identity is who made the request, when a transport knows it (the
	// gateway's bearer-token name).
	Identity string `json:"identity,omitempty"`
	// Suppressed, in the summary a Limited logger writes, is how many
	// events of Rule it counted but did not write.
	Suppressed int `json:"suppressed,omitempty"`
}

// Digest is the digest recorded for a call's arguments.
func Digest(args []byte) string {
	if len(args) == 0 {
		return ""
	}
	s := sha256.Sum256(args)
	return "sha256:" + hex.EncodeToString(s[:])
}

// Logger writes events to w; it is safe for concurrent use. A nil *Logger
// drops events, so layers can log unconditionally.
type Logger struct {
	out *output
	now func() time.Time
	// lim, when set, bounds what Log writes (Limited).
	lim *limits
}

// output is the writer a Logger and the Limited loggers made from it
// share, so their lines never interleave.
type output struct {
	mu sync.Mutex
	w  io.Writer
}

// New returns a Logger writing to w.
func New(w io.Writer) *Logger { return &Logger{out: &output{w: w}, now: time.Now} }

// Log writes e, filling in the time when it is zero. A Limited logger
// only counts e when its caps are reached.
func (l *Logger) Log(e Event) error {
	if l.drops() {
		return nil
	}
	if l.lim != nil && !l.lim.admit(e) {
		return nil
	}
	return l.write(e)
}

// drops reports whether l writes nothing (nil, or no writer).
func (l *Logger) drops() bool { return l == nil || l.out == nil || l.out.w == nil }

func (l *Logger) write(e Event) error {
	if e.Time.IsZero() {
		e.Time = l.now().UTC()
	}
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode audit event: %w", err)
	}
	b = append(b, '\n')
	l.out.mu.Lock()
	defer l.out.mu.Unlock()
	if _, err := l.out.w.Write(b); err != nil {
		return fmt.Errorf("write audit event: %w", err)
	}
	return nil
}

// Caps of the Limited logger a guarded session's L3 refusals go through:
// enough to show what a server tried, each target and each rule, while a
// server looping on a refused call writes a bounded log.
const (
	MaxPerTarget = 100
	MaxPerRule   = 1000
)

// Limited returns a Logger writing to l's writer that writes at most
// perTarget events of one rule and target and at most perRule events of
// one rule; the rest it counts, and Summarize writes how many. It is for
// events a guarded server can provoke at will (L3 refusals): one per
// session, so that a server repeating a refused call can neither fill the
// disk through the audit log nor drown the other events in it (red team
// F4). Limited of a nil Logger is nil.
func (l *Logger) Limited(perTarget, perRule int) *Logger {
	if l == nil {
		return nil
	}
	return &Logger{out: l.out, now: l.now, lim: &limits{perTarget: perTarget, perRule: perRule,
		pairs: map[string]int{}, rules: map[string]*ruleCount{}}}
}

// Summarize writes, for each rule a Limited logger suppressed events of
// since the last Summarize, one event saying how many (Event.Suppressed),
// so that nothing is lost silently; sessions call it when they end. It
// does nothing on other loggers.
func (l *Logger) Summarize() error {
	if l.drops() || l.lim == nil {
		return nil
	}
	var errs []error
	for _, e := range l.lim.summaries() {
		errs = append(errs, l.write(e))
	}
	return errors.Join(errs...)
}

// limits counts a Limited logger's events. pairs holds an entry for each
// rule and target written, so it stays within perRule entries per rule
// however many targets a server makes up.
type limits struct {
	perTarget, perRule int
	mu                 sync.Mutex
	pairs              map[string]int // rule NUL target: events written
	rules              map[string]*ruleCount
}

type ruleCount struct {
	written, suppressed int
	// first labels the summary (server, config, layer, decision).
	first Event
}

// admit reports whether e is to be written, and counts it.
func (m *limits) admit(e Event) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.rules[e.Rule]
	if r == nil {
		r = &ruleCount{first: e}
		m.rules[e.Rule] = r
	}
	k := e.Rule + "\x00" + e.Target
	if r.written >= m.perRule || m.pairs[k] >= m.perTarget {
		r.suppressed++
		return false
	}
	m.pairs[k]++
	r.written++
	return true
}

// summaries returns the summary events of the rules with suppressed
// events, by rule, and starts counting again.
func (m *limits) summaries() []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Event
	for rule, r := range m.rules {
		if r.suppressed == 0 {
			continue
		}
		out = append(out, Event{Server: r.first.Server, Config: r.first.Config, Layer: r.first.Layer,
			Rule: rule, Decision: r.first.Decision, Suppressed: r.suppressed,
			Reason: fmt.Sprintf("%d more %s events suppressed this session: at most %d are written per target and %d per rule",
				r.suppressed, rule, m.perTarget, m.perRule)})
		r.suppressed = 0
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rule < out[j].Rule })
	return out
}
