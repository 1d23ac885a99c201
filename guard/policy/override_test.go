package policy

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadWithOverrides(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	pol := filepath.Join(dir, "fs.json")
	require.NoError(t, os.WriteFile(pol, []byte(testPolicy), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, OverridesDir), 0o755))
	write := func(name, body string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, OverridesDir, name), []byte(body), 0o644))
	}
	write("01-fs.json", `{"server":"fs","tool":"read_file","rule":"path.outside_roots","path":"${HOME}/.ssh/id_rsa.pub","access":"read"}`)
	write("02-fs.json", `[{"server":"fs","tool":"fetch","host":"api.other.com","ports":[443]},
	                      {"server":"fs","tool":"write_file","rule":"args.env_reference"}]`)
	write("03-other.json", `{"server":"other","tool":"x","rule":"tool.not_allowed"}`)
	write("04-fs.json", `{"server":"fs","tool":"delete_file","rule":"tool.not_allowed"}`)
	require.NoError(t, os.WriteFile(f.home+"/.ssh/id_rsa.pub", []byte("pub"), 0o644))

	p, err := LoadWithOverrides(pol, f.vars)
	require.NoError(t, err)
	assert.Equal(t, []string{f.home + "/.ssh/id_rsa.pub"}, p.Tools["read_file"].Read)
	assert.Empty(t, p.Tools["read_file"].Write)
	assert.Equal(t, []NetRule{{Host: "api.other.com", Ports: []int{443}}}, p.Tools["fetch"].Hosts)
	assert.Equal(t, []string{RuleEnvReference}, p.Tools["write_file"].Waive)
	assert.Contains(t, p.Tools, "delete_file")
	assert.NotContains(t, p.Tools, "x")

	e, err := Compile(p, EngineOptions{L2: true, Resolver: resolver()})
	require.NoError(t, err)
	ctx := context.Background()
	check := func(tool, args string) *Violation { return e.Check(ctx, tool, json.RawMessage(args)) }
	assert.Nil(t, check("read_file", `{"path":"`+f.home+`/.ssh/id_rsa.pub"}`))
	v := check("read_file", `{"path":"`+f.home+`/.ssh/id_rsa"}`)
	require.NotNil(t, v, "the neighbouring file stays denied")
	assert.Equal(t, RulePathOutside, v.Rule)
	v = check("write_file", `{"path":"`+f.home+`/.ssh/id_rsa.pub","content":"x"}`)
	require.NotNil(t, v, "the override is scoped to read_file")
	assert.Nil(t, check("write_file", `{"path":"`+f.ws+`/docs/a","content":"$HOME"}`))
	v = check("run", `{"command":"ls $HOME"}`)
	require.NotNil(t, v, "the waiver is scoped to write_file")

	// Broken override files are errors, not silently dropped.
	for _, bad := range []string{
		`{"server":"fs","tool":"read_file"}`,
		`{"server":"fs","path":"/x"}`,
		`{"server":"fs","tool":"read_file","path":"/x","host":"h"}`,
		`{"server":"fs","tool":"read_file","path":"/"}`,
		`{"server":"fs","tool":"read_file","path":"rel"}`,
		`{"server":"fs","tool":"fetch","host":"0.0.0.0/0"}`,
		`{"server":"fs","tool":"read_file","path":"/x","acess":"read"}`,
		`{"server":"fs","tool":"nope","path":"/x"}`,
		`not json`,
	} {
		write("99-bad.json", bad)
		_, err := LoadWithOverrides(pol, f.vars)
		assert.Error(t, err, bad)
	}
}
