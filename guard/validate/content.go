package validate

import (
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
	// the regexp runs; a cheap filter that keeps benign calls fast.
	anchors []string
}

// The patterns are read-only after package init.
var (
	// Strong secret shapes: a match is a secret whatever surrounds it.
	strongSecrets = []pattern{
		{"private_key", regexp.MustCompile(`-----BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----(?s:.*?)(-----END[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\z)`), []string{"PRIVATE KEY"}},
		{"aws_access_key", regexp.MustCompile(`\b(AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b`), []string{"AKIA", "ASIA", "AGPA", "AIDA", "AROA"}},
		{"aws_secret_key", regexp.MustCompile(`(?i)aws_?secret_?access_?key["']?\s*[:=]\s*["']?[A-Za-z0-9/+]{40}`), []string{"secret"}},
		{"github_token", regexp.MustCompile(`\b(gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})`), []string{"gh", "github_pat_"}},
		{"api_key", regexp.MustCompile(`\bsk-(proj-|ant-|live-)?[A-Za-z0-9_-]{20,}`), []string{"sk-"}},
		{"slack_token", regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`), []string{"xox"}},
		{"jwt", regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}`), []string{"eyJ"}},
	}
	// Credential assignments as found in .env files, shell profiles and
	// config files: NAME=value where NAME says secret. Used for redaction of
	// responses (the value is replaced, the name kept).
	assignedSecret = pattern{"credential_assignment",
		regexp.MustCompile(`(?im)\b([A-Z0-9_]*(SECRET|TOKEN|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIALS?)[A-Z0-9_]*)(["']?\s*[:=]\s*["']?)([^\s"',;]{6,})`),
		[]string{"secret", "token", "passw", "api_key", "apikey", "access_key", "accesskey", "private_key", "credential"}}

	envRefs = []pattern{
		{"env_var", regexp.MustCompile(`\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|%[A-Za-z_][A-Za-z0-9_]*%`), []string{"$", "%"}},
		{"proc_environ", regexp.MustCompile(`(?i)/proc/(self|thread-self|[0-9]+)(/task/[0-9]+)?/environ`), []string{"environ"}},
	}

	injections = []pattern{
		{"ignore_instructions", regexp.MustCompile(`(?i)\b(ignore|disregard|forget|override)\s+(all\s+|any\s+)?(of\s+)?(the\s+|your\s+|my\s+)?(previous|prior|above|earlier|preceding|original|system)\s+(instructions|directions|prompts?|rules|guidelines|context)`), []string{"ignore", "disregard", "forget", "override"}},
		{"role_tag", regexp.MustCompile(`(?i)<\s*/?\s*(important|system|instructions?|admin|assistant|im_start|im_end)\s*>|<\|im_(start|end)\|>|\[/?(INST|SYSTEM)\]`), []string{"important", "system", "instruction", "admin", "assistant", "im_start", "im_end", "inst]"}},
		{"conceal_from_user", regexp.MustCompile(`(?i)\b(do\s+not|don't|never)\s+(tell|inform|mention|reveal|show|notify)\s+(this\s+|it\s+)?(to\s+)?(the\s+)?user`), []string{"user"}},
		{"new_instructions", regexp.MustCompile(`(?i)\b(new|updated|real)\s+(system\s+)?instructions\s*:|\byou\s+are\s+now\s+(a|an|in)\b|\bsystem\s+prompt\s*:`), []string{"instructions", "you are now", "system prompt"}},
	}
	// In tool descriptions a reference to credential files is itself a
	// poisoning sign: a description has no business pointing an agent at
	// ~/.ssh or .env files.
	descriptionOnly = []pattern{
		{"credential_path", regexp.MustCompile(`(?i)(~|\$HOME|/home/[^/\s]+|/root)/\.(ssh|aws|gnupg|netrc|env)\b|\bid_(rsa|ed25519|ecdsa|dsa)\b|/etc/(passwd|shadow)\b|\bmcp\.json\b|\.env\b`), []string{"ssh", "aws", "gnupg", "netrc", ".env", "id_", "/etc/", "mcp.json"}},
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
func FindSecret(s string) (Finding, bool) { return scan(s, strongSecrets) }

// FindEnvReference reports an environment reference in s ($VAR, ${...},
// %VAR%, /proc/self/environ): a server that expands it hands its
// environment to whoever chose the argument.
func FindEnvReference(s string) (Finding, bool) { return scan(s, envRefs) }

// FindInjection reports a prompt-injection phrase in s, including text
// hidden in Unicode tag characters.
func FindInjection(s string) (Finding, bool) {
	if f, ok := scan(s, injections); ok {
		return f, true
	}
	if t := decodeTags(s); t != "" {
		if f, ok := scan(t, injections); ok {
			f.Kind = "hidden_" + f.Kind
			f.Start, f.End = 0, len(s)
			return f, true
		}
	}
	return Finding{}, false
}

// FindPoisoning reports why a tool description looks poisoned: an
// injection phrase, hidden characters or a pointer to credential files.
func FindPoisoning(s string) (Finding, bool) {
	if f, ok := FindHidden(s); ok {
		return f, true
	}
	if f, ok := FindInjection(s); ok {
		return f, true
	}
	return scan(s, descriptionOnly)
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
// Unicode tag characters, bidi controls and zero-width characters.
func hidden(r rune) bool {
	switch {
	case r >= 0xE0000 && r <= 0xE007F: // tags
		return true
	case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069, r == 0x200E, r == 0x200F, r == 0x061C: // bidi
		return true
	case r >= 0x200B && r <= 0x200D, r == 0x2060, r == 0xFEFF, r == 0x180E: // zero width
		return true
	}
	return false
}

// FindHidden reports the first hidden character in s.
func FindHidden(s string) (Finding, bool) {
	if isASCII(s) {
		return Finding{}, false
	}
	for i, r := range s {
		if hidden(r) {
			kind := "zero_width"
			switch {
			case r >= 0xE0000:
				kind = "tag_characters"
			case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069, r == 0x200E, r == 0x200F, r == 0x061C:
				kind = "bidi_control"
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
	if anyFold(s, assignedSecret.anchors) && assignedSecret.re.MatchString(s) {
		s = assignedSecret.re.ReplaceAllString(s, "${1}${3}[REDACTED:credential]")
		kinds = append(kinds, assignedSecret.kind)
	}
	return s, kinds
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// anyFold reports whether s contains any of subs, ASCII case-insensitively.
func anyFold(s string, subs []string) bool {
	for _, sub := range subs {
		if containsFold(s, sub) {
			return true
		}
	}
	return false
}

func containsFold(s, sub string) bool {
	n := len(sub)
	if n == 0 {
		return true
	}
	first := lower(sub[0])
	for i := 0; i+n <= len(s); i++ {
		if lower(s[i]) != first {
			continue
		}
		j := 1
		for j < n && lower(s[i+j]) == lower(sub[j]) {
			j++
		}
		if j == n {
			return true
		}
	}
	return false
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
