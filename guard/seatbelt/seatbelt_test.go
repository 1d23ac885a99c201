package seatbelt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/policy"
	"github.com/mcpguard/mcpguard/internal/testenv"
)

var vars = map[string]string{"WS": "/Users/me/ws", "HOME": "/Users/me"}

// macCanon stands in for filepath.EvalSymlinks on a Mac, where /tmp and
// /var are links into /private.
func macCanon(p string) (string, error) {
	for _, l := range []string{"/tmp", "/var"} {
		if p == l || strings.HasPrefix(p, l+"/") {
			return "/private" + p, nil
		}
	}
	return p, nil
}

// TestCompileGolden pins the profile and notes compiled from each policy
// in testdata (NAME.json -> NAME.sb). Run with -update after an intended
// change and review the diff. The profiles have not been run on a Mac.
func TestCompileGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			p, err := policy.Parse(b, vars)
			require.NoError(t, err)
			prof, err := Compile(p, Options{
				Canon:   macCanon,
				Runtime: []string{"/usr/lib", "/System/Library", "/usr/local/bin/node"},
				Program: "/usr/local/bin/node",
				Tag:     "mcpguard-" + name,
			})
			require.NoError(t, err)
			got := prof.SBPL
			for _, n := range prof.Notes {
				got += ";; note: " + n + "\n"
			}
			golden := filepath.Join("testdata", name+".sb")
			if testenv.Update() {
				require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run with -update to create it")
			assert.Equal(t, string(want), got)
		})
	}
}

func TestCompileRefuses(t *testing.T) {
	for name, c := range map[string]struct {
		p policy.Policy
		o Options
	}{
		"relative root":   {p: policy.Policy{Filesystem: policy.Filesystem{Read: []string{"ws"}}}},
		"whole disk":      {p: policy.Policy{Filesystem: policy.Filesystem{Write: []string{"/"}}}},
		"newline in root": {p: policy.Policy{Filesystem: policy.Filesystem{Read: []string{"/ws\n(allow default)"}}}},
		"bad port":        {p: policy.Policy{Network: policy.Network{Allow: []policy.NetRule{{Host: "x", Ports: []int{70000}}}}}},
		"newline in tag":  {o: Options{Tag: "a\nb"}},
		"link to control": {p: policy.Policy{Exec: policy.Exec{Allow: []string{"/bin/x"}}},
			o: Options{Canon: func(string) (string, error) { return "/bin/\x00", nil }}},
	} {
		_, err := Compile(&c.p, c.o)
		assert.ErrorIs(t, err, ErrBadPolicy, name)
	}
}

// A path cannot close the string it is in: quotes and backslashes are
// escaped, so the profile has exactly the filters the policy asked for.
func TestQuote(t *testing.T) {
	assert.Equal(t, `"/a\"b\\c"`, quote(`/a"b\c`))
	prof, err := Compile(&policy.Policy{Filesystem: policy.Filesystem{Read: []string{`/ws") (allow default) ("`}}}, Options{})
	require.NoError(t, err)
	assert.NotContains(t, prof.SBPL, "\n(allow default)")
	assert.Contains(t, prof.SBPL, `(subpath "/ws\") (allow default) (\"")`)
}

func TestLoopback(t *testing.T) {
	for h, want := range map[string]bool{
		"localhost": true, "LOCALHOST": true, "127.0.0.1": true, "127.0.0.0/8": true, "::1": true,
		"::1/128": true, "127.0.0.0/7": false, "0.0.0.0/0": false, "10.0.0.1": false, "example.com": false,
	} {
		assert.Equal(t, want, isLoopback(h), h)
	}
}
