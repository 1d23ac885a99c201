package validate

import (
	"bytes"
	"encoding/binary"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Finding is one match of a content rule.
type Finding struct {
	// Kind names what matched ("private_key", "aws_access_key", "ignore_instructions", ...).
	Kind       string
	Start, End int
}

type pattern struct {
	kind string
	re   *regexp.Regexp
	// anchors: at least one must occur (ASCII, case-insensitively) before
	// the regexp runs; a cheap filter that keeps benign calls fast. They
	// are stored lower-cased.
	anchors [][]byte
}

func mk(kind string, re *regexp.Regexp, anchors ...string) pattern {
	p := pattern{kind: kind, re: re}
	for _, a := range anchors {
		p.anchors = append(p.anchors, []byte(strings.ToLower(a)))
	}
	return p
}

// The patterns are read-only after package init.
var (
	envRefs = []pattern{
		mk("env_var", regexp.MustCompile(`\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|%[A-Za-z_][A-Za-z0-9_]*%`), "$", "%"),
		mk("proc_environ", regexp.MustCompile(`(?i)/proc/(self|thread-self|[0-9]+)(/task/[0-9]+)?/environ`), "environ"),
	}

	injections = []pattern{
		mk("ignore_instructions", regexp.MustCompile(`(?i)\b(ignore|disregard|forget|override)\s+(all\s+|any\s+)?(of\s+)?(the\s+|your\s+|my\s+)?(previous|prior|above|earlier|preceding|original|system)\s+(instructions|directions|prompts?|rules|guidelines|context)`), "ignore", "disregard", "forget", "override"),
		mk("role_tag", regexp.MustCompile(`(?i)<\s*/?\s*(important|system|instructions?|admin|assistant|im_start|im_end)\s*>|<\|im_(start|end)\|>|\[/?(INST|SYSTEM)\]`), "important", "system", "instruction", "admin", "assistant", "im_start", "im_end", "inst]"),
		mk("conceal_from_user", regexp.MustCompile(`(?i)\b(do\s+not|don't|never)\s+(tell|inform|mention|reveal|notify)\s+(the\s+user\s+(about|of)\s+(this|it|that)\b|(this|it|that|anything)\s+to\s+the\s+user)`), "user"),
		mk("new_instructions", regexp.MustCompile(`(?i)\b(new|updated|real)\s+(system\s+)?instructions\s*:|\bsystem\s+prompt\s*:`), "instructions", "system prompt"),
		// The same request in other languages (Spanish, French, German,
		// Italian, Portuguese, Russian, Chinese, Japanese). They run on
		// normalised (lower-cased, NFKC) text.
		mk("ignore_instructions_foreign", regexp.MustCompile(`(?i)\b(ignor\pL*|olvid\pL*|oubli\pL*|vergiss\pL*|dimentic\pL*|desconsider\pL*)\s+(\pL+\s+){0,4}?(instruc\pL*|instruç\pL*|anweisung\pL*|istruzion\pL*|consigne\pL*|regla\pL*|règle\pL*|regeln|vorgaben)`),
			"ignor", "olvid", "oubli", "vergiss", "dimentic", "desconsider"),
		mk("ignore_instructions_foreign", regexp.MustCompile(`(игнорир\pL*|забудь\pL*|не\s+обращай\pL*)\s+(\pL+\s+){0,4}?(инструкц\pL*|указани\pL*|правил\pL*)`),
			"игнорир", "забудь", "не обращай"),
		mk("ignore_instructions_foreign", regexp.MustCompile(`(忽略|无视|無視|忘记|忘記|不要理会|不要理會)[^。\n]{0,16}(指令|指示|说明|說明|提示|规则|規則)|(指示|命令|ルール)を(すべて)?無視`),
			"忽略", "无视", "無視", "忘记", "忘記", "不要理"),
	}
)

// scan returns the first match of any pattern in s.
func scan(s string, ps []pattern) (Finding, bool) {
	for i := range ps {
		p := &ps[i]
		if !anyFold(s, p.anchors) {
			continue
		}
		if loc := p.re.FindStringIndex(s); loc != nil {
			return Finding{Kind: p.kind, Start: loc[0], End: loc[1]}, true
		}
	}
	return Finding{}, false
}

// MayCarryContentRisk is a cheap filter over a call's raw JSON arguments:
// false means no string in them can match FindSecret or FindEnvReference,
// so the per-string walk can be skipped. JSON escapes (\u0024 is "$")
// always count as a possible risk.
func MayCarryContentRisk(raw []byte) bool {
	return riskyBytes(raw) || argAnchors.inFold(raw)
}

// riskyBytes reports whether raw has a non-ASCII byte, a \u or \/ escape
// or a base64 run (hasB64Run). Texts are long and mostly plain: the first
// two are searched for eight bytes at a time, and the byte-by-byte search
// for a base64 run runs only where mayHaveB64Run finds room for one.
//
// The anchors and base64 runs are looked for in the raw bytes, so an
// escape that decodes to a character they contain must count as a risk:
// "\u0024" is "$", and "\/" is "/", which is in "://" (credentials in a
// URL written postgres:\/\/user:pw@host) and in base64 (a run cut into
// short pieces by escaped slashes). JSON's other escapes decode to
// quotes, backslashes and control characters, which no anchor and no
// base64 run holds.
func riskyBytes(raw []byte) bool {
	if bytes.Contains(raw, []byte(`\u`)) || bytes.Contains(raw, []byte(`\/`)) {
		return true
	}
	i := 0
	for ; i+8 <= len(raw); i += 8 {
		if binary.LittleEndian.Uint64(raw[i:])&0x8080808080808080 != 0 {
			return true
		}
	}
	for ; i < len(raw); i++ {
		if raw[i] >= utf8.RuneSelf {
			return true
		}
	}
	return mayHaveB64Run(raw) && hasB64Run(raw)
}

// mayHaveB64Run is false where hasB64Run is: a run it reports is at least
// minB64Run (24) base64 characters, so it covers two consecutive 8-byte
// words of raw (counted from raw[0]) entirely.
func mayHaveB64Run(raw []byte) bool {
	prev := false
	for i := 0; i+8 <= len(raw); i += 8 {
		w := raw[i : i+8 : i+8]
		all := b64Byte[w[0]] & b64Byte[w[1]] & b64Byte[w[2]] & b64Byte[w[3]] &
			b64Byte[w[4]] & b64Byte[w[5]] & b64Byte[w[6]] & b64Byte[w[7]]
		if all == 0 {
			prev = false
			continue
		}
		if prev {
			return true
		}
		prev = true
	}
	return false
}

// b64Byte is b64Char as a table (1 for base64 characters).
var b64Byte = func() (t [256]uint8) {
	for c := range 256 {
		if b64Char(byte(c)) {
			t[c] = 1
		}
	}
	return t
}()

// anchorIndex finds any of a set of lower-case anchors in one pass. A bit
// set of the anchors' first two bytes rules out almost every position at
// the cost of one lookup; the anchors are then grouped by first byte.
type anchorIndex struct {
	single  [256]bool        // one-byte anchors ("$", "%")
	pairs   [65536 / 8]uint8 // first two bytes of longer anchors
	byFirst [256][][]byte
}

func newAnchorIndex(groups ...[]pattern) *anchorIndex {
	ix := &anchorIndex{}
	for _, ps := range groups {
		for _, p := range ps {
			for _, a := range p.anchors {
				if len(a) == 1 {
					ix.single[a[0]] = true
					continue
				}
				k := uint16(a[0])<<8 | uint16(a[1])
				ix.pairs[k>>3] |= 1 << (k & 7)
				ix.byFirst[a[0]] = append(ix.byFirst[a[0]], a)
			}
		}
	}
	return ix
}

// inFold is in(appendLower(nil, b)), without the copy: b is lower-cased
// (ASCII only, as appendLower does) as it is read.
func (ix *anchorIndex) inFold(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	// Each position i-1 is checked when b[i] is read: its byte alone,
	// and the pair it starts.
	prev := foldASCII[b[0]]
	for i := 1; i < len(b); i++ {
		c := foldASCII[b[i]]
		if ix.single[prev] {
			return true
		}
		if k := uint16(prev)<<8 | uint16(c); ix.pairs[k>>3]&(1<<(k&7)) != 0 {
			for _, a := range ix.byFirst[prev] {
				if a[1] == c && hasPrefixFold(b[i-1:], a) {
					return true
				}
			}
		}
		prev = c
	}
	return ix.single[prev]
}

// foldASCII lower-cases ASCII letters, as appendLower does.
var foldASCII = func() (t [256]byte) {
	for c := range 256 {
		t[c] = lowerASCII(byte(c))
	}
	return t
}()

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		c += 'a' - 'A'
	}
	return c
}

// hasPrefixFold is bytes.HasPrefix(appendLower(nil, b), low).
func hasPrefixFold[S ~string | ~[]byte](b S, low []byte) bool {
	if len(b) < len(low) {
		return false
	}
	for j, c := range low {
		if lowerASCII(b[j]) != c {
			return false
		}
	}
	return true
}

// in reports whether low (already lower-cased) holds any anchor.
func (ix *anchorIndex) in(low []byte) bool {
	for i := 0; i < len(low); i++ {
		c := low[i]
		if ix.single[c] {
			return true
		}
		if i+1 == len(low) {
			break
		}
		k := uint16(c)<<8 | uint16(low[i+1])
		if ix.pairs[k>>3]&(1<<(k&7)) == 0 {
			continue
		}
		for _, a := range ix.byFirst[c] {
			if bytes.HasPrefix(low[i:], a) {
				return true
			}
		}
	}
	return false
}

// riskIndex is an anchor index over the hand-written patterns, plus the
// secret ruleset's own prefilter (a rule's keyword, or the keyword
// reversed, and a run of token characters as long as its matches hold:
// ruleset.mayMatch); assignments says whether the ruleset's assignment
// rules count.
type riskIndex struct {
	*anchorIndex
	assignments bool
}

// inFold reports whether b, in any case, may hold a match.
func (ix *riskIndex) inFold(b []byte) bool {
	return ix.anchorIndex.inFold(b) || secrets.mayMatch(b, ix.assignments)
}

// in is inFold for lower-cased text.
func (ix *riskIndex) in(low []byte) bool {
	return ix.anchorIndex.in(low) || secrets.mayMatch(low, ix.assignments)
}

// The indexes are read-only after package init.
var (
	// argAnchors: what FindSecret and FindEnvReference could match.
	argAnchors = &riskIndex{anchorIndex: newAnchorIndex(envRefs, []pattern{urlCredentials})}
	// resultAnchors: what a result's secret, credential and injection
	// checks could match. "%": FindSecretDeep reads percent-encoded text.
	resultAnchors = &riskIndex{anchorIndex: newAnchorIndex(injections,
		[]pattern{assignedSecret, urlCredentials, mk("percent_encoded", nil, "%")}), assignments: true}
)

// FindEnvReference reports an environment reference in s ($VAR, ${...},
// %VAR%, /proc/self/environ): a server that expands it hands its
// environment to whoever chose the argument.
func FindEnvReference(s string) (Finding, bool) { return scan(s, envRefs) }

// FindInjection reports a prompt-injection phrase in s as a model would
// read it: in s itself; in text hidden in Unicode tag characters or
// variation selectors; in s normalised (invisible characters removed, so
// that a soft hyphen or a zero-width space cannot split a word, NFKC,
// lower case) and with homoglyphs mapped to Latin; in other languages; in
// printable text decoded from base64 runs; and in each of these with the
// markup reduced (Demarkup: "Ignore **all** previous instructions").
func FindInjection(s string) (Finding, bool) {
	if f, ok := findInjection(s, true); ok {
		return f, true
	}
	for _, r := range Demarkup(s) {
		if f, ok := findInjection(r, true); ok {
			f.Kind = "markup_" + f.Kind
			f.Start, f.End = 0, len(s)
			return f, true
		}
	}
	return Finding{}, false
}

func findInjection(s string, decode bool) (Finding, bool) {
	if f, ok := scan(s, injections); ok {
		return f, true
	}
	whole := func(f Finding, prefix string) (Finding, bool) {
		f.Kind = prefix + f.Kind
		f.Start, f.End = 0, len(s)
		return f, true
	}
	for _, t := range []string{decodeTags(s), decodeVariationSelectors(s)} {
		if t == "" {
			continue
		}
		if f, ok := scan(Skeleton(t), injections); ok {
			return whole(f, "hidden_")
		}
	}
	if !isASCII(s) {
		if f, ok := scan(Normalize(s), injections); ok {
			return whole(f, "obfuscated_")
		}
		if f, ok := scan(Skeleton(s), injections); ok {
			return whole(f, "homoglyph_")
		}
	}
	if decode {
		for _, d := range decodedRuns(s) {
			if f, ok := findInjection(d, false); ok {
				return whole(f, "base64_")
			}
		}
	}
	return Finding{}, false
}

// FindPoisoning reports why a tool description looks poisoned: an
// injection phrase, hidden characters, or an instruction to read or hand
// over credentials or another tool's data (findLeakInstruction; a file
// name alone, such as ".env" in a search tool's examples, is not one).
func FindPoisoning(s string) (Finding, bool) {
	if f, ok := FindHidden(s); ok {
		return f, true
	}
	if f, ok := FindInjection(s); ok {
		return f, true
	}
	return findLeakInstruction(s)
}

// shellMeta are the characters that make a shell do more than run one
// command with arguments.
const shellMeta = ";|&`$<>\n\r(){}"

// FindShellInjection reports a shell metacharacter in an argument that
// reaches a shell.
func FindShellInjection(s string) (Finding, bool) {
	if i := strings.IndexAny(s, shellMeta); i >= 0 {
		return Finding{Kind: "shell_metachar", Start: i, End: i + 1}, true
	}
	return Finding{}, false
}

// hidden reports characters that render as nothing or reorder text:
// Unicode tag characters, bidi controls, zero-width and every other format
// character (soft hyphen, invisible operators), Hangul fillers and the
// non-emoji variation selectors; see invisible.
func hidden(r rune) bool {
	return invisible(r) || r == 0x180E
}

// FindHidden reports the first hidden character in s.
func FindHidden(s string) (Finding, bool) {
	if isASCII(s) {
		return Finding{}, false
	}
	for i, r := range s {
		if hidden(r) {
			kind := "format_character"
			switch {
			case r >= 0xE0000 && r <= 0xE007F:
				kind = "tag_characters"
			case r >= 0xFE00 && r <= 0xFE0F, r >= 0xE0100 && r <= 0xE01EF:
				kind = "variation_selectors"
			case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069, r == 0x200E, r == 0x200F, r == 0x061C:
				kind = "bidi_control"
			case r >= 0x200B && r <= 0x200D, r == 0x2060, r == 0xFEFF, r == 0x180E:
				kind = "zero_width"
			}
			return Finding{Kind: kind, Start: i, End: i + utf8.RuneLen(r)}, true
		}
	}
	return Finding{}, false
}

// StripHidden removes hidden characters from s.
func StripHidden(s string) string {
	if _, ok := FindHidden(s); !ok {
		return s
	}
	return strings.Map(func(r rune) rune {
		if hidden(r) {
			return -1
		}
		return r
	}, s)
}

// decodeTags returns the ASCII text smuggled in Unicode tag characters
// (U+E0020..U+E007E mirror ASCII), or "" when there is none.
func decodeTags(s string) string {
	if isASCII(s) {
		return ""
	}
	var b strings.Builder
	for _, r := range s {
		if r >= 0xE0020 && r <= 0xE007E {
			b.WriteByte(byte(r - 0xE0000))
		}
	}
	return b.String()
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// anyFold reports whether s contains any of the lower-cased anchors, ASCII
// case-insensitively. s is lower-cased once, on the stack when it is short.
func anyFold(s string, anchors [][]byte) bool {
	var arr [512]byte
	low := appendLower(arr[:0], s)
	return anyAnchor(low, anchors)
}

func anyAnchor(low []byte, anchors [][]byte) bool {
	for _, a := range anchors {
		if bytes.Contains(low, a) {
			return true
		}
	}
	return false
}

func appendLower[S ~string | ~[]byte](dst []byte, s S) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}
