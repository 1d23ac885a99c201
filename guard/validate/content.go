package validate

import (
	"bytes"
	"encoding/binary"
	"regexp"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
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
	// Strong secret shapes: a match is a secret whatever surrounds it.
	strongSecrets = []pattern{
		mk("private_key", regexp.MustCompile(`-----BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----(?s:.*?)(-----END[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\z)`), "PRIVATE KEY"),
		mk("aws_access_key", regexp.MustCompile(`\b(AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b`), "AKIA", "ASIA", "AGPA", "AIDA", "AROA"),
		mk("aws_secret_key", regexp.MustCompile(`(?i)aws_?secret_?access_?key["']?\s*[:=]\s*["']?[A-Za-z0-9/+]{40}`), "secret"),
		mk("github_token", regexp.MustCompile(`\b(gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})`), "gh", "github_pat_"),
		mk("api_key", regexp.MustCompile(`\bsk-(proj-|ant-|live-)?[A-Za-z0-9_-]{20,}`), "sk-"),
		mk("slack_token", regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`), "xox"),
		mk("jwt", regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}`), "eyJ"),
	}
	// Credential assignments as found in .env files, shell profiles and
	// config files: NAME=value where NAME says secret. Used for redaction of
	// responses (the value is replaced, the name kept).
	assignedSecret = mk("credential_assignment",
		regexp.MustCompile(`(?im)\b([A-Z0-9_]*(SECRET|TOKEN|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIALS?)[A-Z0-9_]*)(["']?\s*[:=]\s*["']?)([^\s"',;]{6,})`),
		"secret", "token", "passw", "api_key", "apikey", "access_key", "accesskey", "private_key", "credential")

	// Passwords in URLs (connection strings: postgres://user:pw@host).
	urlCredentials = mk("url_credentials",
		regexp.MustCompile(`(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s/:@"']+:)([^\s/@"']+)@`), "://")

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
	// In tool descriptions a reference to credential files is itself a
	// poisoning sign: a description has no business pointing an agent at
	// ~/.ssh or .env files.
	descriptionOnly = []pattern{
		mk("credential_path", regexp.MustCompile(`(?i)(~|\$HOME|/home/[^/\s]+|/root)/\.(ssh|aws|gnupg|netrc|env)\b|\bid_(rsa|ed25519|ecdsa|dsa)\b|/etc/(passwd|shadow)\b|\bmcp\.json\b|\.env\b`), "ssh", "aws", "gnupg", "netrc", ".env", "id_", "/etc/", "mcp.json"),
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

// FindSecret reports a strong secret shape in s (private keys, cloud and
// service tokens): such a value in an argument is about to leave the machine.
func FindSecret(s string) (Finding, bool) {
	if f, ok := scan(s, strongSecrets); ok {
		return f, true
	}
	if anyFold(s, urlCredentials.anchors) {
		for _, m := range urlCredentials.re.FindAllStringSubmatchIndex(s, -1) {
			if secretLike(s[m[4]:m[5]]) {
				return Finding{Kind: urlCredentials.kind, Start: m[0], End: m[1]}, true
			}
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
func hasPrefixFold(b, low []byte) bool {
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

// The indexes are read-only after package init.
var (
	// argAnchors: what FindSecret and FindEnvReference could match.
	argAnchors = newAnchorIndex(strongSecrets, envRefs, []pattern{urlCredentials})
	// resultAnchors: what a result's secret, credential and injection
	// checks could match.
	resultAnchors = newAnchorIndex(strongSecrets, injections, []pattern{assignedSecret, urlCredentials})
)

// FindEnvReference reports an environment reference in s ($VAR, ${...},
// %VAR%, /proc/self/environ): a server that expands it hands its
// environment to whoever chose the argument.
func FindEnvReference(s string) (Finding, bool) { return scan(s, envRefs) }

// FindInjection reports a prompt-injection phrase in s as a model would
// read it: in s itself; in text hidden in Unicode tag characters or
// variation selectors; in s normalised (invisible characters removed, so
// that a soft hyphen or a zero-width space cannot split a word, NFKC,
// lower case) and with homoglyphs mapped to Latin; in other languages; and
// in printable text decoded from base64 runs.
func FindInjection(s string) (Finding, bool) {
	return findInjection(s, true)
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

// FindSecretDeep is FindSecret over s as it can be read back: as is, with
// invisible characters removed and NFKC applied (a zero-width space or a
// soft hyphen inside a key, full-width letters), and in text decoded from
// base64 runs.
func FindSecretDeep(s string) (Finding, bool) {
	if f, ok := FindSecret(s); ok {
		return f, true
	}
	if !isASCII(s) {
		if f, ok := FindSecret(norm.NFKC.String(StripHidden(s))); ok {
			f.Start, f.End = 0, len(s)
			f.Kind = "obfuscated_" + f.Kind
			return f, true
		}
	}
	for _, d := range decodedRuns(s) {
		if f, ok := FindSecret(d); ok {
			f.Start, f.End = 0, len(s)
			f.Kind = "base64_" + f.Kind
			return f, true
		}
	}
	return Finding{}, false
}

// FindPoisoning reports why a tool description looks poisoned: an
// injection phrase, hidden characters or a pointer to credential files
// (normalised as FindInjection does).
func FindPoisoning(s string) (Finding, bool) {
	if f, ok := FindHidden(s); ok {
		return f, true
	}
	if f, ok := FindInjection(s); ok {
		return f, true
	}
	if f, ok := scan(s, descriptionOnly); ok {
		return f, true
	}
	if !isASCII(s) {
		return scan(Skeleton(s), descriptionOnly)
	}
	return Finding{}, false
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

// RedactSecrets replaces secrets in s (strong shapes whole, credential
// assignments by value) and reports the kinds it replaced.
func RedactSecrets(s string) (string, []string) {
	var kinds []string
	for i := range strongSecrets {
		p := &strongSecrets[i]
		if !anyFold(s, p.anchors) || !p.re.MatchString(s) {
			continue
		}
		s = p.re.ReplaceAllLiteralString(s, "[REDACTED:"+p.kind+"]")
		kinds = append(kinds, p.kind)
	}
	var ok bool
	if anyFold(s, urlCredentials.anchors) {
		if s, ok = replaceSecretGroup(s, urlCredentials.re, 2, "[REDACTED:password]"); ok {
			kinds = append(kinds, urlCredentials.kind)
		}
	}
	if anyFold(s, assignedSecret.anchors) {
		if s, ok = replaceSecretGroup(s, assignedSecret.re, 4, "[REDACTED:credential]"); ok {
			kinds = append(kinds, assignedSecret.kind)
		}
	}
	return s, kinds
}

// secretLike reports whether a value found where a secret is expected (a
// NAME=value whose name says secret, a URL's password) looks like one:
// at least 12 characters mixing letters and digits, as generated keys and
// tokens do. Placeholders ("changeme", "your-api-key-here", "xxxx") do not,
// and stay readable.
func secretLike(v string) bool {
	if len(v) < 12 {
		return false
	}
	var letter, digit bool
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= '0' && c <= '9':
			digit = true
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			letter = true
		}
	}
	return letter && digit
}

// replaceSecretGroup replaces submatch group of every match of re in s
// whose value is secretLike, and reports whether it replaced any.
func replaceSecretGroup(s string, re *regexp.Regexp, group int, repl string) (string, bool) {
	var b strings.Builder
	last, done := 0, false
	for _, m := range re.FindAllStringSubmatchIndex(s, -1) {
		start, end := m[2*group], m[2*group+1]
		if start < 0 || !secretLike(s[start:end]) {
			continue
		}
		b.WriteString(s[last:start])
		b.WriteString(repl)
		last, done = end, true
	}
	if !done {
		return s, false
	}
	b.WriteString(s[last:])
	return b.String(), true
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
