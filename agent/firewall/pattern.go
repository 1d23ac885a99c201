package firewall

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Pattern is one named regular expression of a Regex scanner.
type Pattern struct {
	Name string
	Re   *regexp.Regexp
}

// DefaultPatterns catch common prompt-injection phrasings in tool output.
// They are a cheap first line, not a classifier: rephrasing defeats them.
func DefaultPatterns() []Pattern {
	p := func(name, re string) Pattern { return Pattern{Name: name, Re: regexp.MustCompile(re)} }
	return []Pattern{
		p("ignore-instructions", `(?i)\b(ignore|disregard|forget|override)\b[^.\n]{0,40}\b(previous|prior|above|earlier|all|your|the)\b[^.\n]{0,20}\b(instructions?|prompts?|rules|directions|guidelines)\b`),
		p("new-instructions", `(?i)\b(new|updated|real|actual)\s+(system\s+)?instructions?\s*:`),
		p("role-override", `(?i)\byou\s+are\s+now\s+(a|an|in|the|my)\b|\bact\s+as\s+(an?\s+)?(unrestricted|jailbroken|developer\s+mode)`),
		p("system-prompt", `(?i)\b(reveal|print|show|output|repeat)\b[^.\n]{0,30}\bsystem\s+prompt\b`),
		p("chat-template-token", `<\|(im_start|im_end|system|endoftext|start_header_id|eot_id)\|>|\[/?INST\]|<<SYS>>`),
		p("hidden-directive", `(?i)<\s*(important|system|instructions?)\s*>`),
		p("exfiltrate", `(?i)\b(send|post|upload|exfiltrate|forward)\b[^.\n]{0,40}\b(api[_ -]?keys?|passwords?|secrets?|credentials|tokens?|\.ssh|id_rsa|\.env)\b`),
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
	for _, p := range r.patterns {
		if loc := p.Re.FindStringIndex(msg.Content); loc != nil {
			return Decision{Action: Block, Score: 1, Scanner: r.Name(),
				Reason: fmt.Sprintf("pattern %s matched %.60q", p.Name, msg.Content[loc[0]:loc[1]])}, nil
		}
	}
	return Decision{Action: Allow, Scanner: r.Name()}, nil
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
