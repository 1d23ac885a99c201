// Package audit writes the guard's decisions as JSON lines: one event for
// every call a layer denied or changed.
package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
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
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
}

// New returns a Logger writing to w.
func New(w io.Writer) *Logger { return &Logger{w: w, now: time.Now} }

// Log writes e, filling in the time when it is zero.
func (l *Logger) Log(e Event) error {
	if l == nil || l.w == nil {
		return nil
	}
	if e.Time.IsZero() {
		e.Time = l.now().UTC()
	}
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode audit event: %w", err)
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.w.Write(b); err != nil {
		return fmt.Errorf("write audit event: %w", err)
	}
	return nil
}
