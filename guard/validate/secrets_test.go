package validate

import (
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const pemKey = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU=\n-----END OPENSSH PRIVATE KEY-----\n"

// mixed is a deterministic string of n letters and digits with the spread
// of a generated key (the ruleset's entropy bounds hold for it).
func mixed(n int, alphabet string) string {
	var b strings.Builder
	x := uint32(2463534242)
	for range n {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b.WriteByte(alphabet[int(x)%len(alphabet)])
	}
	return b.String()
}

const (
	alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	lower = "abcdefghijklmnopqrstuvwxyz0123456789"
)

// providerKeys are keys of the shapes the issue named (the hand-written
// lists missed them), each with the rule that must find it.
func providerKeys() map[string]string {
	return map[string]string{
		"sk_live_" + mixed(24, alnum):                                               "stripe-access-token",
		"glpat-" + mixed(20, alnum):                                                 "gitlab-pat",
		"npm_" + mixed(36, lower):                                                   "npm-access-token",
		"AIza" + mixed(35, alnum):                                                   "gcp-api-key",
		"hf_" + mixed(34, "abcdefghijklmnopqrstuvwxyzABCDEFGH"):                     "huggingface-access-token",
		"machine api.example.com\n  login alice\n  password " + mixed(14, alnum):    "netrc-password",
		`{"auths": {"registry.example.com": {"auth": "` + mixed(28, alnum) + `"}}}`: "docker-config-auth",
		"PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPrivate-Lines: 1\n" + mixed(44, alnum) + "\n": "putty-private-key",
	}
}

func TestFindSecret(t *testing.T) {
	hits := map[string]string{
		"key: " + pemKey:       "private-key-block",
		"AKIAIOSFODNN7EXAMPLE": "aws-access-key-id",
		"aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY1": "aws-secret-access-key",
		"token ghp_abcdefghijklmnopqrstuvwxyz0123456789":                    "github-token",
		"OPENAI=sk-proj-abcdefghijklmnopqrstuvwx":                           "sk-api-key",
		"xoxb-1234567890-abcdefghij":                                        "slack-token",
	}
	for in, kind := range providerKeys() {
		hits[in] = kind
	}
	for in, kind := range hits {
		f, ok := FindSecret(in)
		if assert.True(t, ok, in) {
			assert.Equal(t, kind, f.Kind, in)
		}
	}
	for _, in := range []string{"hello world", "skate-park", "AKIA too short", "the task is done", "ghp_short",
		"machine learning is fun", "the default password policy", `{"auth": "none"}`} {
		f, ok := FindSecret(in)
		assert.False(t, ok, "%s: %s", in, f.Kind)
	}
}

// TestFindSecretEncoded: a key reads the same percent-encoded, hex,
// base32, base64, reversed, and reversed then encoded.
func TestFindSecretEncoded(t *testing.T) {
	key := "glpat-" + mixed(20, alnum)
	pct := func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{s[i]})))
		}
		return b.String()
	}
	for in, kind := range map[string]string{
		"q=" + url.QueryEscape("token "+key+"&x"): "gitlab-pat", // escaping leaves it plain
		"q=" + pct(key): "percent_gitlab-pat",
		"data=" + hex.EncodeToString([]byte(key)):                                              "hex_gitlab-pat",
		"d=" + base32.StdEncoding.EncodeToString([]byte(key)):                                  "base32_gitlab-pat",
		"d=" + strings.ToLower(base32.StdEncoding.WithPadding(-1).EncodeToString([]byte(key))): "base32_gitlab-pat",
		"v=" + reverse(key):                             "reversed_gitlab-pat",
		"v=" + hex.EncodeToString([]byte(reverse(key))): "hex_reversed_gitlab-pat",
	} {
		f, ok := FindSecretDeep(in)
		if assert.True(t, ok, in) {
			assert.Equal(t, kind, f.Kind, in)
		}
		assert.True(t, MayCarryContentRisk([]byte(`{"a":"`+in+`"}`)), "the argument filter must pass %q on", in)
	}
	for _, in := range []string{"sha256 " + hex.EncodeToString(make([]byte, 32)), "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "50% off"} {
		_, ok := FindSecretDeep(in)
		assert.False(t, ok, in)
	}
}

func TestRedactSecrets(t *testing.T) {
	in := "config:\n" + pemKey + "API_TOKEN=c4n4ry-value-123\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\nplain line\n" +
		"DATABASE_URL=postgres://app:s3cr3t-9f8e7d6c5b@db/app\nAPI_KEY=changeme\nDB=postgres://user:password@localhost/x\n"
	out, kinds := RedactSecrets(in)
	assert.NotContains(t, out, "b3BlbnNzaC1rZXkt")
	assert.NotContains(t, out, "c4n4ry-value-123")
	assert.NotContains(t, out, "AKIAIOSFODNN7EXAMPLE")
	assert.NotContains(t, out, "s3cr3t-9f8e7d6c5b")
	assert.Contains(t, out, "API_TOKEN=[REDACTED:credential]")
	assert.Contains(t, out, "postgres://app:[REDACTED:password]@db/app")
	assert.Contains(t, out, "plain line")
	// Placeholders are not secrets: a template stays readable.
	assert.Contains(t, out, "API_KEY=changeme")
	assert.Contains(t, out, "postgres://user:password@localhost/x")
	assert.Subset(t, kinds, []string{"private-key-block", "aws-access-key-id", "url_credentials", "credential_assignment"})
	_, ok := FindSecret("connect to postgres://user:password@localhost/x")
	assert.False(t, ok)
	_, ok = FindSecret("connect to postgres://app:s3cr3t-9f8e7d6c5b@db/app")
	assert.True(t, ok)
	out, kinds = RedactSecrets("nothing to see")
	assert.Equal(t, "nothing to see", out)
	assert.Empty(t, kinds)
	// Every provider key is redacted where it stands.
	for in, kind := range providerKeys() {
		out, kinds := RedactSecrets("before\n" + in + "\nafter")
		assert.Contains(t, kinds, kind, in)
		assert.Contains(t, out, "[REDACTED:"+kind+"]", in)
		assert.True(t, strings.HasPrefix(out, "before\n") && strings.HasSuffix(out, "after"), out)
		_, still := FindSecret(out)
		assert.False(t, still, "%q left a secret in %q", in, out)
	}
}

// TestRuleset: the embedded ruleset loads whole (a rule file that does
// not parse or a regex that does not compile fails the package's init).
func TestRuleset(t *testing.T) {
	require.Greater(t, len(secrets.rules), 200, "gitleaks's rules and the supplement")
	var ids []string
	for _, r := range secrets.rules {
		ids = append(ids, r.kind)
	}
	for _, id := range []string{"stripe-access-token", "gitlab-pat", "npm-access-token", "gcp-api-key",
		"huggingface-access-token", "netrc-password", "docker-config-auth", "putty-private-key", "generic-api-key"} {
		assert.Contains(t, ids, id)
	}
}

// TestFindSecretAcross holds FindSecretAcross to what it stands in for:
// for a key, as is and in every encoding, cut at every position, with a
// coded run on each side that does not cross the cut, it finds every
// secret FindSecretDeep finds in the two sides joined and in neither side
// alone.
func TestFindSecretAcross(t *testing.T) {
	var keys []string
	for k := range providerKeys() {
		keys = append(keys, k)
	}
	pad := base64.StdEncoding.EncodeToString([]byte("hello world, hello again")) // a coded run on each side
	crossings := 0
	for _, key := range keys {
		for _, enc := range []string{key, reverse(key), hex.EncodeToString([]byte(key)),
			base64.StdEncoding.EncodeToString([]byte(key)), base64.RawURLEncoding.EncodeToString([]byte(reverse(key))),
			base32.StdEncoding.EncodeToString([]byte(key)), url.PathEscape(key)} {
			for cut := 1; cut < len(enc); cut++ {
				tail, head := pad+" x "+enc[:cut], enc[cut:]+" y "+pad
				_, deep := FindSecretDeep(tail + head)
				_, left := FindSecretDeep(tail)
				_, right := FindSecretDeep(head)
				_, across := FindSecretAcross(tail+head, len(tail))
				if deep && !left && !right {
					crossings++
					require.True(t, across, "%q | %q: FindSecretDeep finds it joined, FindSecretAcross does not", tail, head)
				}
				if across {
					require.True(t, deep, "%q | %q: FindSecretAcross finds what FindSecretDeep does not", tail, head)
				}
			}
		}
	}
	require.NotZero(t, crossings, "no cut made a secret that only the joined text holds")
}

// TestFindSecretEncodedAmongBytes: decoded bytes are read as the text they
// hold wherever it sits (red team A11: base64url of "\xff\xfe" + a file
// with a GitHub token passed, the decoding not being text as a whole),
// in base64 of either alphabet, base32 and hex alike; bytes that hold no
// text of that length are not read as any.
func TestFindSecretEncodedAmongBytes(t *testing.T) {
	key := "glpat-" + mixed(20, alnum)
	file := []byte("\xff\xfe\x00\x01TOKEN=" + key + "\n\x80\x81")
	for in, kind := range map[string]string{
		base64.RawURLEncoding.EncodeToString(file):                          "base64_gitlab-pat",
		base64.StdEncoding.EncodeToString(file):                             "base64_gitlab-pat",
		base32.StdEncoding.WithPadding(-1).EncodeToString(file):             "base32_gitlab-pat",
		hex.EncodeToString(file):                                            "hex_gitlab-pat",
		base64.RawURLEncoding.EncodeToString([]byte("\xff" + reverse(key))): "base64_reversed_gitlab-pat",
	} {
		f, ok := FindSecretDeep(in)
		if assert.True(t, ok, in) {
			assert.Equal(t, kind, f.Kind, in)
		}
		_, ok = FindSecretAcross(in, len(in)/2) // a run sent in two halves
		assert.True(t, ok, "across: %s", in)
		assert.True(t, MayCarryContentRisk([]byte(`{"a":"`+in+`"}`)), "the argument filter must pass %q on", in)
	}
	assert.Equal(t, "", textIn([]byte("\xff\xfeshort text\x00\x01")), "a stretch shorter than a secret")
	assert.Equal(t, "a line of text\nanother line of it\n", textIn([]byte("\xffa line of text\x00\x80another line of it")))
	noise := make([]byte, 4096)
	for i := range noise {
		noise[i] = byte(i*7919>>3) ^ byte(i*31)
	}
	_, ok := FindSecretDeep(base64.StdEncoding.EncodeToString(noise))
	assert.False(t, ok, "bytes with no text")
}
