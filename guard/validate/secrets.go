package validate

import (
	"regexp"
	"slices"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// The secret detection: what a secret looks like in an argument, a result
// or a listing, and how it is redacted. The response side (layer.go,
// definitions.go) and the argument side (guard/policy) call it through
// FindSecret, FindSecretDeep and RedactSecrets.

// The patterns are read-only after package init.
var (
	// Strong secret shapes: a match is a secret whatever surrounds it.
	// They are the ruleset's rules (ruleset.go); this is their view as
	// patterns, for the anchor indexes.
	strongSecrets = secrets.patterns(false)
	// The ruleset's assignment rules (gitleaks's generic-api-key), for the
	// result filter's anchors.
	assignmentRules = secrets.patterns(true)
	// Credential assignments as found in .env files, shell profiles and
	// config files: NAME=value where NAME says secret. Used for redaction of
	// responses (the value is replaced, the name kept).
	assignedSecret = mk("credential_assignment",
		regexp.MustCompile(`(?im)\b([A-Z0-9_]*(SECRET|TOKEN|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIALS?)[A-Z0-9_]*)(["']?\s*[:=]\s*["']?)([^\s"',;]{6,})`),
		"secret", "token", "passw", "api_key", "apikey", "access_key", "accesskey", "private_key", "credential")

	// Passwords in URLs (connection strings: postgres://user:pw@host).
	urlCredentials = mk("url_credentials",
		regexp.MustCompile(`(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s/:@"']+:)([^\s/@"']+)@`), "://")
)

// FindSecret reports a strong secret shape in s (a rule of the ruleset,
// or a password in a URL): such a value in an argument is about to leave
// the machine. The kind is the rule's id.
func FindSecret(s string) (Finding, bool) {
	if ms := secrets.find(s, false, false); len(ms) > 0 {
		return Finding{Kind: ms[0].rule.kind, Start: ms[0].start, End: ms[0].end}, true
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

// FindSecretDeep is FindSecret over s as it can be read back: as is;
// with invisible characters removed and NFKC applied (a zero-width space
// or a soft hyphen inside a key, full-width letters); reversed; and in
// text decoded from base64, base32 and hex runs and from percent-encoding
// (encodings.go).
func FindSecretDeep(s string) (Finding, bool) {
	return findRead(s, decodings)
}

// FindSecretAcross is FindSecretDeep for a secret that straddles position
// at of s, the boundary between two texts each read whole before (the end
// of a session's earlier arguments and the start of a call's): the same
// readings, but of the base64, base32 and hex runs only the one that
// crosses at is decoded.
func FindSecretAcross(s string, at int) (Finding, bool) {
	return findRead(s, func(s string) []decoding { return decodingsAcross(s, at) })
}

// findRead is FindSecret over s, then over its NFKC reading and the
// readings read makes of it.
func findRead(s string, read func(string) []decoding) (Finding, bool) {
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
	for _, d := range read(s) {
		if f, ok := FindSecret(d.text); ok {
			f.Start, f.End = 0, len(s)
			f.Kind = d.name + "_" + f.Kind
			return f, true
		}
	}
	return Finding{}, false
}

// RedactSecrets replaces secrets in s (each rule's secret, the whole
// match where the rule names no group; credential assignments and URL
// passwords by value) and reports the kinds it replaced.
func RedactSecrets(s string) (string, []string) {
	var kinds []string
	if ms := secrets.find(s, true, true); len(ms) > 0 {
		s, kinds = redactMatches(s, ms)
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

// redactMatches replaces the secret of each match (overlapping ones
// merged) with [REDACTED:rule] and returns the rules' kinds, once each.
func redactMatches(s string, ms []secretMatch) (string, []string) {
	// By position; at one position a rule of a shape before one that
	// found the secret by its name, so the redaction names the shape.
	slices.SortFunc(ms, func(a, b secretMatch) int {
		if a.secretStart != b.secretStart {
			return a.secretStart - b.secretStart
		}
		switch {
		case a.rule.d.Assignment == b.rule.d.Assignment:
			return 0
		case b.rule.d.Assignment:
			return -1
		}
		return 1
	})
	var b strings.Builder
	var kinds []string
	last := 0
	for _, m := range ms {
		if !slices.Contains(kinds, m.rule.kind) {
			kinds = append(kinds, m.rule.kind)
		}
		if m.secretStart < last {
			last = max(last, m.secretEnd) // inside one already replaced
			continue
		}
		b.WriteString(s[last:m.secretStart])
		b.WriteString("[REDACTED:" + m.rule.kind + "]")
		last = m.secretEnd
	}
	b.WriteString(s[last:])
	return b.String(), kinds
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
