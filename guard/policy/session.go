package policy

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/mcpguard/mcpguard/guard/validate"
)

// Session is what L2 remembers of one session's calls, so that what no
// single call shows is still seen: a secret sent in pieces over several
// calls (the server appends them), and a credential given to a secret
// argument and then sent elsewhere. It is safe for concurrent use; one per
// proxy session (Stage makes it).
type Session struct {
	mu sync.Mutex
	// tail is the end of the session's string arguments so far, in call
	// order, joined as a server that appends them joins them.
	tail string
	// known are the values given to secret arguments (kind secret).
	known []string
}

// NewSession returns an empty session.
func NewSession() *Session { return &Session{} }

const (
	// maxSplitWindow bounds the text on each side of a call boundary that
	// is searched for a secret in pieces: a token that straddles the
	// boundary is found while each of its sides is whole in it (a JWT of
	// 700 bytes cut in the middle: TestSessionSplitLongToken; 256 would
	// lose it).
	maxSplitWindow = 512
	// maxKnown bounds how many secret values a session remembers.
	maxKnown = 16
	// minKnown is the shortest secret value remembered: shorter ones
	// would match ordinary text.
	minKnown = 8
)

// judged is what a call's check collected for the session: the strings of
// its arguments in order, split by whether their slot is a secret.
type judged struct {
	plain, secrets []string
}

// CheckCall is Check with the session's memory: after the call passes
// Check, its strings are searched, joined to the end of the session's
// earlier ones, for a secret none of them holds alone (args.secret), and
// for a credential given to a secret argument earlier; a call that passes
// is added to the session. With s nil it is Check.
func (e *Engine) CheckCall(ctx context.Context, toolName string, rawArgs json.RawMessage, s *Session) *Violation {
	if s == nil || !e.o.L2 {
		return e.Check(ctx, toolName, rawArgs)
	}
	j := &judged{}
	if v := e.check(ctx, toolName, rawArgs, j); v != nil {
		return v
	}
	t := e.tools[toolName]
	if t.waive[RuleSecret] {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := strings.Join(j.plain, "")
	if v := s.knownIn(j.plain); v != nil {
		return v
	}
	if v := s.split(cur); v != nil {
		return v
	}
	s.tail += cur
	if len(s.tail) > maxSplitWindow {
		s.tail = s.tail[len(s.tail)-maxSplitWindow:]
	}
	for _, k := range j.secrets {
		if len(k) >= minKnown && len(s.known) < maxKnown && !contains(s.known, k) {
			s.known = append(s.known, k)
		}
	}
	return nil
}

// split looks for a secret that straddles the boundary between the
// session's earlier strings and cur: found in the two joined, and in
// neither alone.
func (s *Session) split(cur string) *Violation {
	if s.tail == "" || cur == "" {
		return nil
	}
	head := cur
	if len(head) > maxSplitWindow {
		head = head[:maxSplitWindow]
	}
	// Each side was read in every encoding alone (by checkContent and the
	// splits before); across the boundary, the window is read as
	// FindSecretDeep reads it, but for the coded runs that do not cross.
	window := s.tail + head
	if !validate.MayCarryContentRisk([]byte(window)) {
		return nil
	}
	f, ok := validate.FindSecretAcross(window, len(s.tail))
	if !ok {
		return nil
	}
	if _, alone := validate.FindSecretDeep(s.tail); alone {
		return nil // an earlier secret the policy let through (waived)
	}
	return &Violation{Layer: LayerL2, Rule: RuleSecret, Target: "arguments",
		Reason: fmt.Sprintf("the arguments, appended to this session's earlier ones, complete a secret (%s) sent in pieces", f.Kind)}
}

// knownIn refuses a string that carries a credential an earlier call gave
// to a secret argument, as is, reversed, hex or base64.
func (s *Session) knownIn(plain []string) *Violation {
	for _, k := range s.known {
		forms := []string{k, reverseString(k), hex.EncodeToString([]byte(k)),
			base64.StdEncoding.EncodeToString([]byte(k)), base64.RawURLEncoding.EncodeToString([]byte(k))}
		for _, p := range plain {
			for _, f := range forms {
				if strings.Contains(p, f) {
					return &Violation{Layer: LayerL2, Rule: RuleSecret, Target: "arguments",
						Reason: "an argument carries the credential given to a secret argument earlier in this session"}
				}
			}
		}
	}
	return nil
}

func reverseString(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
