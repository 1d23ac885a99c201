package validate

import (
	"math"
	"regexp"
	"strings"
	"sync"
)

// The secret shapes are data, not code: gitleaks's default ruleset
// (rules/gitleaks.toml, MIT, rules/LICENSE.gitleaks; maintained upstream,
// refreshed by copying the file from the module github.com/zricethezav/
// gitleaks/v8), and a short supplement in the same format
// (rules/mcpguard.toml) for what a guard must catch and a repository
// scanner deliberately lets pass. docs/policy.md says why the file and not
// the library. ruleset_gen.go holds both as Go data (TestRulesetGenerated
// rewrites it with -update), so a process pays no TOML parse at start, and
// a rule's regular expressions are compiled the first time its keywords
// occur: most never do.

// ruleDatum is one rule as the generator writes it.
type ruleDatum struct {
	ID       string
	Regex    string
	Group    int
	Entropy  float64
	Keywords []string
	// MinRun: every match of Regex holds a run of at least this many
	// token characters (tokenChar), computed from the regex's syntax by
	// the generator. A text whose longest such run is shorter cannot
	// match: with the keywords, the prefilter the anchor indexes use.
	MinRun int
	Allow  []allowDatum
	// Assignment: the rule finds a secret by the name it is assigned to
	// (gitleaks's generic-api-key): redacted in what servers send, not
	// refused in arguments, where "token: x" is ordinary text.
	Assignment bool
	// Gitleaks: the rule is gitleaks's, so its global allowlist applies
	// (the supplement exists for what that list lets pass).
	Gitleaks bool
}

type allowDatum struct {
	Target    string // "", "match" or "line"
	Regexes   []string
	StopWords []string
	And       bool
}

// secretRule is one rule: its pattern (kind = the rule id, anchors = its
// keywords; re stays nil: compiled() has it), compiled on first use.
type secretRule struct {
	pattern
	d    *ruleDatum
	once sync.Once
	c    compiledRule
}

type compiledRule struct {
	re    *regexp.Regexp
	allow []allowlist
}

func (r *secretRule) compiled() *compiledRule {
	r.once.Do(func() {
		// The data was compiled once by TestRulesetGenerated: a failure
		// here is a broken build, not bad input.
		r.c.re = regexp.MustCompile(r.d.Regex)
		for _, a := range r.d.Allow {
			r.c.allow = append(r.c.allow, compileAllowlist(a))
		}
	})
	return &r.c
}

type allowlist struct {
	target string
	res    []*regexp.Regexp
	stop   []string // lower case
	and    bool
}

func compileAllowlist(a allowDatum) allowlist {
	al := allowlist{target: a.Target, and: a.And}
	for _, s := range a.Regexes {
		al.res = append(al.res, regexp.MustCompile(s))
	}
	for _, w := range a.StopWords {
		al.stop = append(al.stop, strings.ToLower(w))
	}
	return al
}

// ruleset is every secret rule with two keyword indexes over all of
// them: fwd, the keywords as gitleaks's prefilter uses them (find), and
// both, the keywords and the keywords reversed (mayMatch: the anchor
// indexes also stand for FindSecretDeep's reversed reading).
type ruleset struct {
	rules     []*secretRule
	global    func() allowlist
	fwd, both keywordIndex
	// noKeyword lists rules that always run.
	noKeyword []int
}

// keywordIndex finds the rules whose keywords occur in a text. pairs is
// a bit set of the keywords' first two bytes, which rules out almost
// every position at the cost of one lookup; byFirst holds the keywords
// by first byte (one-byte keywords in single).
type keywordIndex struct {
	pairs   [65536 / 8]uint8
	byFirst [256][]keywordRule
	single  [256][]int
}

type keywordRule struct {
	kw   []byte
	rule int
}

func (ix *keywordIndex) add(kw []byte, rule int) {
	if len(kw) == 1 {
		ix.single[kw[0]] = append(ix.single[kw[0]], rule)
		return
	}
	k := uint16(kw[0])<<8 | uint16(kw[1])
	ix.pairs[k>>3] |= 1 << (k & 7)
	ix.byFirst[kw[0]] = append(ix.byFirst[kw[0]], keywordRule{kw, rule})
}

// secrets is the ruleset; read-only after package init but for each
// rule's compile-once.
var secrets = newRuleset(ruleData, globalAllow)

func newRuleset(data []ruleDatum, global allowDatum) *ruleset {
	rs := &ruleset{global: sync.OnceValue(func() allowlist { return compileAllowlist(global) })}
	for i := range data {
		d := &data[i]
		r := &secretRule{pattern: mk(d.ID, nil, d.Keywords...), d: d}
		rs.rules = append(rs.rules, r)
		if len(r.anchors) == 0 {
			rs.noKeyword = append(rs.noKeyword, i)
		}
		for _, kw := range r.anchors {
			rs.fwd.add(kw, i)
			rs.both.add(kw, i)
			if rev := []byte(reverse(string(kw))); string(rev) != string(kw) {
				rs.both.add(rev, i)
			}
		}
	}
	return rs
}

// tokenChar are the bytes of the runs MinRun counts: letters, digits, "_"
// and "-" (what most tokens are made of; not "/" or ".", which join the
// words of every path), and every byte of a non-ASCII character (a
// case-insensitive class admits K and ſ; a run of n such characters is at
// least n bytes).
var tokenChar = func() (t [256]bool) {
	for c := range 256 {
		b := byte(c)
		t[c] = b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '-' || b >= 0x80
	}
	return t
}()

// longestRun is the length of the longest run of token characters in b.
func longestRun[S ~string | ~[]byte](b S) int {
	best, cur := 0, 0
	for i := 0; i < len(b); i++ {
		if tokenChar[b[i]] {
			cur++
			best = max(best, cur)
		} else {
			cur = 0
		}
	}
	return best
}

// mayMatch reports whether a rule (a strong one, or any with assignments)
// could match b, which may be in any case, or b reversed: one of its
// keywords (or a keyword reversed) occurs and b has a run of token
// characters as long as its matches hold. The anchor indexes' secret
// part.
func (rs *ruleset) mayMatch(b []byte, assignments bool) bool {
	var idx [16]int
	cands := candidates(rs, &rs.both, b, idx[:0])
	if len(cands) == 0 {
		return false
	}
	run := longestRun(b)
	for _, i := range cands {
		if d := rs.rules[i].d; (assignments || !d.Assignment) && run >= d.MinRun {
			return true
		}
	}
	return false
}

// candidates returns the rules without keywords and those whose keywords
// in ix occur in b, in any ASCII case, in rule order, without duplicates,
// as gitleaks's prefilter does.
func candidates[S ~string | ~[]byte](rs *ruleset, ix *keywordIndex, b S, dst []int) []int {
	var seen [4]uint64 // up to 256 rules; more fall back to a map below
	var extra map[int]bool
	mark := func(i int) {
		if i < 256 {
			if seen[i>>6]&(1<<(i&63)) != 0 {
				return
			}
			seen[i>>6] |= 1 << (i & 63)
		} else {
			if extra == nil {
				extra = map[int]bool{}
			}
			if extra[i] {
				return
			}
			extra[i] = true
		}
		dst = append(dst, i)
	}
	for _, i := range rs.noKeyword {
		mark(i)
	}
	for i := 0; i < len(b); i++ {
		c := foldASCII[b[i]]
		for _, r := range ix.single[c] {
			mark(r)
		}
		if i+1 == len(b) {
			break
		}
		next := foldASCII[b[i+1]]
		if k := uint16(c)<<8 | uint16(next); ix.pairs[k>>3]&(1<<(k&7)) == 0 {
			continue
		}
		for _, kr := range ix.byFirst[c] {
			if kr.kw[1] == next && hasPrefixFold(b[i:], kr.kw) {
				mark(kr.rule)
			}
		}
	}
	return dst
}

// secretMatch is one finding of a rule: the match and the secret in it.
type secretMatch struct {
	rule                   *secretRule
	start, end             int // the match
	secretStart, secretEnd int // the secret (the rule's group, else the match)
}

// find returns the first match of a rule in s (strong rules only unless
// assignments is set), in rule order; all returns every match.
func (rs *ruleset) find(s string, assignments, all bool) []secretMatch {
	var idx [16]int
	var out []secretMatch
	run := -1
	for _, i := range candidates(rs, &rs.fwd, s, idx[:0]) {
		r := rs.rules[i]
		if r.d.Assignment && !assignments {
			continue
		}
		if run < 0 {
			run = longestRun(s)
		}
		if run < r.d.MinRun {
			continue // no match can fit
		}
		for _, m := range r.compiled().re.FindAllStringSubmatchIndex(s, -1) {
			sm, ok := rs.accept(r, s, m)
			if !ok {
				continue
			}
			out = append(out, sm)
			if !all {
				return out
			}
		}
	}
	return out
}

// accept applies a rule's secret group, entropy and allowlists to one
// match m (submatch indexes) in s, as gitleaks does.
func (rs *ruleset) accept(r *secretRule, s string, m []int) (secretMatch, bool) {
	sm := secretMatch{rule: r, start: m[0], end: m[1], secretStart: m[0], secretEnd: m[1]}
	if g := r.d.Group; len(m) > 2 {
		if g > 0 {
			if 2*g+1 < len(m) && m[2*g] >= 0 {
				sm.secretStart, sm.secretEnd = m[2*g], m[2*g+1]
			}
		} else {
			for g := 1; 2*g+1 < len(m); g++ {
				if m[2*g] >= 0 && m[2*g+1] > m[2*g] {
					sm.secretStart, sm.secretEnd = m[2*g], m[2*g+1]
					break
				}
			}
		}
	}
	secret := s[sm.secretStart:sm.secretEnd]
	if r.d.Entropy != 0 && shannon(secret) <= r.d.Entropy {
		return secretMatch{}, false
	}
	match := s[sm.start:sm.end]
	line := lineAround(s, sm.start, sm.end)
	if r.d.Gitleaks {
		if g := rs.global(); g.allows(secret, match, line) {
			return secretMatch{}, false
		}
	}
	c := r.compiled()
	for i := range c.allow {
		if c.allow[i].allows(secret, match, line) {
			return secretMatch{}, false
		}
	}
	return sm, true
}

func (a *allowlist) allows(secret, match, line string) bool {
	target := secret
	switch a.target {
	case "match":
		target = match
	case "line":
		target = line
	}
	re := false
	for _, x := range a.res {
		if x.MatchString(target) {
			re = true
			break
		}
	}
	stop := false
	if len(a.stop) > 0 {
		low := strings.ToLower(secret)
		for _, w := range a.stop {
			if strings.Contains(low, w) {
				stop = true
				break
			}
		}
	}
	if a.and {
		return (len(a.res) == 0 || re) && (len(a.stop) == 0 || stop) && (len(a.res) > 0 || len(a.stop) > 0)
	}
	return re || stop
}

// lineAround is the line of s that holds s[start:end].
func lineAround(s string, start, end int) string {
	i := strings.LastIndexByte(s[:start], '\n') + 1
	j := strings.IndexByte(s[end:], '\n')
	if j < 0 {
		return s[i:]
	}
	return s[i : end+j]
}

// shannon is the Shannon entropy of s in bits per character, as gitleaks
// computes it.
func shannon(s string) float64 {
	if s == "" {
		return 0
	}
	counts := map[rune]int{}
	for _, r := range s {
		counts[r]++
	}
	var e float64
	inv := 1 / float64(len(s))
	for _, c := range counts {
		f := float64(c) * inv
		e -= f * math.Log2(f)
	}
	return e
}

// patterns returns the rules as patterns (for the anchor indexes): the
// strong ones, or the assignments.
func (rs *ruleset) patterns(assignments bool) []pattern {
	var out []pattern
	for _, r := range rs.rules {
		if r.d.Assignment == assignments {
			out = append(out, r.pattern)
		}
	}
	return out
}
