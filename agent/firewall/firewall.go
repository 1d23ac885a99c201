// Package firewall holds the guardrails that sit in the agent loop, in the
// manner of LlamaFirewall: scanners that read a message (a user request, the
// agent's planned action, a tool's output) and the trace so far, and decide
// whether the run may go on. A firewall runs the scanners configured for the
// message's role and returns the most severe decision.
package firewall

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Role is who a message comes from.
type Role string

// The roles a message can have, as in chat-completion APIs.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one entry of an agent's trace.
type Message struct {
	Role    Role
	Content string
	// ToolName names the tool that produced a tool message, or the tool an
	// assistant message calls.
	ToolName string
	// ToolArgs are the arguments of an assistant's tool call (JSON).
	ToolArgs string
}

// Action is what a scanner wants done with a message.
type Action int

// Actions, in increasing severity.
const (
	Allow Action = iota
	HumanInTheLoop
	Block
)

func (a Action) String() string {
	switch a {
	case Allow:
		return "allow"
	case HumanInTheLoop:
		return "human_in_the_loop"
	case Block:
		return "block"
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// Decision is one scanner's verdict on one message.
type Decision struct {
	Action Action
	// Score is the scanner's confidence that the message is malicious, 0..1.
	Score float64
	// Reason says why, for the operator; empty for a plain allow.
	Reason string
	// Scanner names the scanner that decided.
	Scanner string
}

// Scanner reads a message and the trace before it. It returns an error only
// when it could not decide and its own error policy says to surface that;
// a scanner configured to fail closed returns a Block decision instead.
type Scanner interface {
	Name() string
	Scan(ctx context.Context, msg Message, trace []Message) (Decision, error)
}

// OnError is what a scanner does when its backend fails (down, slow,
// garbage): decide Block (fail closed, the default), Allow (fail open), or
// return the error to the caller.
type OnError int

// Error policies.
const (
	FailClosed OnError = iota
	FailOpen
	ReturnError
)

// ErrScanner wraps a backend failure returned under ReturnError.
var ErrScanner = errors.New("scanner failed")

// onError applies policy p to a backend error err of scanner name.
func onError(p OnError, name string, err error) (Decision, error) {
	switch p {
	case FailOpen:
		return Decision{Action: Allow, Scanner: name, Reason: "fail-open: " + err.Error()}, nil
	case ReturnError:
		return Decision{}, fmt.Errorf("%w: %s: %w", ErrScanner, name, err)
	}
	return Decision{Action: Block, Score: 1, Scanner: name, Reason: "fail-closed: " + err.Error()}, nil
}

// Timing is the time one scanner spent on one message.
type Timing struct {
	Scanner string
	Elapsed time.Duration
}

// Verdict is the firewall's answer for one message: the most severe decision
// (first one wins among equals), every scanner's decision and time.
type Verdict struct {
	Decision
	Decisions []Decision
	Timings   []Timing
}

// Firewall runs scanners per role, in the order given. A nil *Firewall
// allows everything.
type Firewall struct {
	scanners map[Role][]Scanner
}

// New returns a firewall running scanners[role] on messages of that role.
func New(scanners map[Role][]Scanner) *Firewall {
	m := make(map[Role][]Scanner, len(scanners))
	for r, s := range scanners {
		m[r] = append([]Scanner(nil), s...)
	}
	return &Firewall{scanners: m}
}

// Scanners returns the scanners configured for role.
func (f *Firewall) Scanners(r Role) []Scanner {
	if f == nil {
		return nil
	}
	return f.scanners[r]
}

// Scan runs the role's scanners on msg in order. It stops at the first Block
// (the later scanners cannot change the outcome) and returns the most severe
// decision. A scanner error ends the scan with that error.
func (f *Firewall) Scan(ctx context.Context, msg Message, trace []Message) (Verdict, error) {
	v := Verdict{Decision: Decision{Action: Allow}}
	for _, s := range f.Scanners(msg.Role) {
		start := time.Now()
		d, err := s.Scan(ctx, msg, trace)
		v.Timings = append(v.Timings, Timing{Scanner: s.Name(), Elapsed: time.Since(start)})
		if err != nil {
			return v, fmt.Errorf("scan %s message: %w", msg.Role, err)
		}
		if d.Scanner == "" {
			d.Scanner = s.Name()
		}
		v.Decisions = append(v.Decisions, d)
		if d.Action > v.Action {
			v.Decision = d
		}
		if d.Action == Block {
			break
		}
	}
	return v, nil
}
