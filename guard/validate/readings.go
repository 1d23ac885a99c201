package validate

import (
	"encoding/json"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// Readings returns the texts a model reads in s, for a classifier that
// judges what the pattern lists cannot: s normalised as the content checks
// normalise it (invisible characters removed, NFKC, odd spaces folded),
// with its case kept, since a classifier's tokenizer is cased; the same
// with homoglyphs mapped to Latin, when that differs (a mixed-script
// "іgnоrе"); and the text hidden in Unicode tag characters, in variation
// selectors and in base64 runs. An ASCII s without base64 runs is
// returned alone.
func Readings(s string) []string {
	f := fold(s)
	out := []string{f}
	if !isASCII(f) {
		if h := homoglyphs.Replace(f); h != f {
			out = append(out, h)
		}
	}
	for _, t := range []string{decodeTags(s), decodeVariationSelectors(s)} {
		if t != "" {
			out = append(out, fold(t))
		}
	}
	for _, d := range decodedRuns(s) {
		out = append(out, fold(d))
	}
	return out
}

// ModelText returns the strings of a JSON value (a result, a message's
// params) a client shows, in the order they are written, without the
// values of keys that label rather than say something (type, mimeType,
// role, uri). It returns nil when raw is not JSON. (The content checks
// read keys too; a classifier gets the texts.)
func ModelText(raw json.RawMessage) []string {
	var sc jsonrpc.Scanner
	if len(raw) == 0 || sc.Value(raw) != nil {
		return nil
	}
	var texts []string
	eachString(raw, func(sp strSpan) bool {
		if !sp.Key && !sp.Label {
			texts = append(texts, sp.text(raw))
		}
		return true
	})
	return texts
}
