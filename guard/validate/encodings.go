package validate

import (
	"encoding/base32"
	"encoding/hex"
	"net/url"
	"strings"
)

// The encodings a secret is read back from (FindSecretDeep): a token an
// agent is led to send percent-encoded, hex, base32, base64 or reversed
// to an allowed host is the same token. Each decoding is tried once, and
// each decoded text also reversed (a token reversed, then encoded).

// decoding is one reading of a string: its text and the encoding's name.
type decoding struct {
	name, text string
}

// minCodedRun is the shortest hex or base32 run worth decoding: the
// shortest secret the rules find is longer than 12 bytes.
const minCodedRun = 24

// decodings returns s read back from every encoding it may be in: s
// reversed; percent-decoded (up to percentDecodeRounds rounds); the
// texts of its base64, base32 and hex runs (textIn); and each of those
// reversed.
func decodings(s string) []decoding {
	return appendCoded(textReadings(s), s)
}

// decodingsAcross is decodings for a secret that straddles position at of
// s, where s[:at] and s[at:] were each read before: s is reversed and
// percent-decoded whole, but of its coded runs only the one that crosses
// at is decoded (a run on one side was decoded with that side).
func decodingsAcross(s string, at int) []decoding {
	out := textReadings(s)
	i, j := at, at
	for i > 0 && codedByte(s[i-1]) {
		i--
	}
	for j < len(s) && codedByte(s[j]) {
		j++
	}
	if i == at || j == at {
		return out // no run crosses at
	}
	return appendCoded(out, s[i:j])
}

// codedByte: the bytes of base64 (either alphabet, with its padding), of
// which base32 and hex are subsets.
func codedByte(c byte) bool { return b64Char(c) || c == '=' }

// textReadings returns s reversed and percent-decoded.
func textReadings(s string) []decoding {
	out := []decoding{{"reversed", reverse(s)}}
	if strings.IndexByte(s, '%') >= 0 {
		cur := s
		for range percentDecodeRounds {
			dec, err := url.QueryUnescape(cur)
			if err != nil {
				dec, err = url.PathUnescape(cur)
			}
			if err != nil || dec == cur {
				break
			}
			out = append(out, decoding{"percent", dec})
			cur = dec
		}
	}
	return out
}

// appendCoded appends to out the texts (textIn) of the base64, base32
// and hex runs of s, and each of those reversed.
func appendCoded(out []decoding, s string) []decoding {
	n := len(out)
	for _, d := range decodedRuns(s) {
		out = append(out, decoding{"base64", d})
	}
	for _, d := range hexRuns(s) {
		out = append(out, decoding{"hex", d})
	}
	for _, d := range base32Runs(s) {
		out = append(out, decoding{"base32", d})
	}
	for _, d := range out[n:] {
		out = append(out, decoding{d.name + "_reversed", reverse(d.text)})
	}
	return out
}

// reverse returns s with its characters in reverse order.
func reverse(s string) string {
	if isASCII(s) {
		b := []byte(s)
		for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
			b[i], b[j] = b[j], b[i]
		}
		return string(b)
	}
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

// runs returns the runs of s of at least minCodedRun bytes that in
// admits, at most maxDecoded of them.
func runs(s string, in func(byte) bool) []string {
	var out []string
	for i := 0; i < len(s) && len(out) < maxDecoded; {
		if !in(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && in(s[j]) {
			j++
		}
		if j-i >= minCodedRun {
			out = append(out, s[i:j])
		}
		i = j
	}
	return out
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// decodedBy returns the texts (textIn) that the runs of s in admits
// decode to with dec.
func decodedBy(s string, in func(byte) bool, dec func(string) ([]byte, error)) []string {
	var out []string
	for _, r := range runs(s, in) {
		if b, err := dec(r); err == nil && len(b) > 0 {
			if t := textIn(b); t != "" {
				out = append(out, t)
			}
		}
	}
	return out
}

// hexRuns returns the texts hex runs of s decode to.
func hexRuns(s string) []string {
	return decodedBy(s, isHex, func(r string) ([]byte, error) { return hex.DecodeString(r[:len(r)&^1]) })
}

func isBase32(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '2' && c <= '7'
}

// base32Runs returns the texts base32 runs of s (RFC 4648, in
// either case; the padding is not part of a run) decode to.
func base32Runs(s string) []string {
	return decodedBy(s, isBase32, func(r string) ([]byte, error) {
		return base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(strings.ToUpper(r))
	})
}
