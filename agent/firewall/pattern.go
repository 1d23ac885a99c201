package firewall

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Pattern is one named regular expression of a Regex scanner. Go's regexp
// has no DFA, so running case-insensitive alternations over a 128 KiB tool
// output costs about a millisecond per KiB; Triggers, when set, are
// lower-case literals the pattern cannot match without, and the regexp then
// runs only on a window around each trigger found.
type Pattern struct {
	Name     string
	Re       *regexp.Regexp
	Triggers []string
}

// window is how far around a trigger a pattern is looked for: the longest
// match of the default patterns is under 150 bytes.
const windowBefore, windowAfter = 96, 192

// DefaultPatterns catch common prompt-injection phrasings in tool output.
// They are a cheap first line, not a classifier: rephrasing defeats them.
func DefaultPatterns() []Pattern {
	p := func(name, re string, triggers ...string) Pattern {
		return Pattern{Name: name, Re: regexp.MustCompile(re), Triggers: triggers}
	}
	return []Pattern{
		p("ignore-instructions", `(?i)\b(ignore|disregard|forget|override)\b[^.\n]{0,40}\b(previous|prior|above|earlier|all|your|the)\b[^.\n]{0,20}\b(instructions?|prompts?|rules|directions|guidelines)\b`,
			"ignore", "disregard", "forget", "override"),
		p("new-instructions", `(?i)\b(new|updated|real|actual)\s+(system\s+)?instructions?\s*:`, "instruction"),
		p("role-override", `(?i)\byou\s+are\s+now\s+(a|an|in|the|my)\b|\bact\s+as\s+(an?\s+)?(unrestricted|jailbroken|developer\s+mode)`,
			"you", "act"),
		p("system-prompt", `(?i)\b(reveal|print|show|output|repeat)\b[^.\n]{0,30}\bsystem\s+prompt\b`, "prompt"),
		p("chat-template-token", `<\|(im_start|im_end|system|endoftext|start_header_id|eot_id)\|>|\[/?INST\]|<<SYS>>`, "<|", "inst]", "<<sys>>"),
		p("hidden-directive", `(?i)<\s*(important|system|instructions?)\s*>`, "important", "system", "instruction"),
		p("exfiltrate", `(?i)\b(send|post|upload|exfiltrate|forward)\b[^.\n]{0,40}\b(api[_ -]?keys?|passwords?|secrets?|credentials|tokens?|\.ssh|id_rsa|\.env)\b`,
			"key", "password", "secret", "credential", "token", ".ssh", "id_rsa", ".env"),
	}
}

// Regex blocks a message matching any of its patterns.
type Regex struct {
	patterns []Pattern
}

// NewRegex returns a scanner over patterns (DefaultPatterns when none).
func NewRegex(patterns ...Pattern) *Regex {
	if len(patterns) == 0 {
		patterns = DefaultPatterns()
	}
	return &Regex{patterns: patterns}
}

// Name implements Scanner.
func (r *Regex) Name() string { return "regex" }

// Scan implements Scanner.
func (r *Regex) Scan(_ context.Context, msg Message, _ []Message) (Decision, error) {
	s := msg.Content
	var lower string // ASCII-lowered copy, same byte offsets as s
	for _, p := range r.patterns {
		var loc []int
		if len(p.Triggers) == 0 {
			loc = p.Re.FindStringIndex(s)
		} else {
			if lower == "" {
				lower = asciiLower(s)
			}
			loc = findNearTriggers(p, s, lower)
		}
		if loc != nil {
			return Decision{Action: Block, Score: 1, Scanner: r.Name(),
				Reason: fmt.Sprintf("pattern %s matched %.60q", p.Name, s[loc[0]:loc[1]])}, nil
		}
	}
	return Decision{Action: Allow, Scanner: r.Name()}, nil
}

// findNearTriggers runs p.Re on the windows around p's triggers in lower,
// overlapping windows merged, each widened to whole words so that \b means
// what it means in the whole text.
func findNearTriggers(p Pattern, s, lower string) []int {
	match := func(lo, hi int) []int {
		if lo < 0 {
			return nil
		}
		for lo > 0 && isWordByte(s[lo-1]) {
			lo--
		}
		for hi < len(s) && isWordByte(s[hi]) {
			hi++
		}
		if loc := p.Re.FindStringIndex(s[lo:hi]); loc != nil {
			return []int{lo + loc[0], lo + loc[1]}
		}
		return nil
	}
	for _, t := range p.Triggers {
		lo, hi := -1, -1
		for from := 0; ; {
			i := strings.Index(lower[from:], t)
			if i < 0 {
				break
			}
			i += from
			wlo, whi := max(0, i-windowBefore), min(len(s), i+len(t)+windowAfter)
			if lo >= 0 && wlo <= hi {
				hi = whi
			} else {
				if loc := match(lo, hi); loc != nil {
					return loc
				}
				lo, hi = wlo, whi
			}
			from = i + len(t)
		}
		if loc := match(lo, hi); loc != nil {
			return loc
		}
	}
	return nil
}

func isWordByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// asciiLower lowers ASCII letters only, keeping every byte offset.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// HiddenASCII blocks text carrying Unicode tag characters (U+E0000 to
// U+E007F): invisible to a human, read by models as the ASCII they mirror,
// so they smuggle instructions past a reviewer.
type HiddenASCII struct{}

// NewHiddenASCII returns the scanner.
func NewHiddenASCII() *HiddenASCII { return &HiddenASCII{} }

// Name implements Scanner.
func (h *HiddenASCII) Name() string { return "hidden_ascii" }

// tagLead is the first byte of every tag character's UTF-8 encoding
// (U+E0000..U+E007F is F3 A0 80 80 .. F3 A0 81 BF): a cheap pre-check.
const tagLead = "\xf3\xa0"

// Scan implements Scanner. The reason carries the decoded hidden text.
func (h *HiddenASCII) Scan(_ context.Context, msg Message, _ []Message) (Decision, error) {
	s := msg.Content
	if !strings.Contains(s, tagLead) {
		return Decision{Action: Allow, Scanner: h.Name()}, nil
	}
	var hidden strings.Builder
	n := 0
	for i := strings.Index(s, tagLead); i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r >= 0xE0000 && r <= 0xE007F {
			n++
			if c := r - 0xE0000; c >= 0x20 && c < 0x7F && hidden.Len() < 80 {
				hidden.WriteRune(c)
			}
		}
		i += size
	}
	if n == 0 {
		return Decision{Action: Allow, Scanner: h.Name()}, nil
	}
	return Decision{Action: Block, Score: 1, Scanner: h.Name(),
		Reason: fmt.Sprintf("%d Unicode tag characters hiding %q", n, hidden.String())}, nil
}
