package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/mcpguard/mcpguard/internal/testenv"
	"github.com/mcpguard/mcpguard/lab/eval"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), stdio{strings.NewReader(""), &out, &errb}, args)
	return code, out.String(), errb.String()
}

func TestEvalUsageErrors(t *testing.T) {
	code, _, stderr := runCLI(t, "eval", "--config", "C-nope")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "unknown config")
	code, _, _ = runCLI(t, "eval", "--parallel", "0")
	assert.Equal(t, 2, code)
	code, _, stderr = runCLI(t, "eval", "aggregate")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "no report files")
}

func TestEvalMalformedCaseNamesFileAndField(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "FR-99.json"), []byte(`{"id": "FR-99", "category": "file_read",
	  "description": "d", "server": "filesystem", "visible_in_arguments": false,
	  "calls": [{"tool": "read_file"}], "oracle": {"kind": "canary_in_response", "canary": "ssh-key"}}`), 0o644))
	code, stdout, stderr := runCLI(t, "eval", "--cases", dir, "--results", t.TempDir())
	assert.Equal(t, 1, code)
	assert.Empty(t, stdout, "no table for a corpus that did not load")
	assert.Contains(t, stderr, "FR-99.json")
	assert.Contains(t, stderr, "oracle.canary")
}

func TestEvalAggregate(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for i, blocked := range []int{1, 2, 3} {
		rep := &eval.Report{RunID: string(rune('a' + i)), Config: "C-app", Summary: eval.Summary{
			Blocked: eval.Count{N: blocked, Total: 4}, ViableBlocked: eval.Count{N: blocked, Total: 4},
			FalsePositives: eval.Count{N: 0, Total: 2},
		}}
		p := filepath.Join(dir, rep.RunID+".json")
		require.NoError(t, writeJSONFile(p, rep))
		files = append(files, p)
	}
	out := filepath.Join(dir, "agg.json")
	code, stdout, stderr := runCLI(t, append([]string{"eval", "aggregate", "--json", out}, files...)...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "C-app")
	assert.Contains(t, stdout, "50.0% ± 25.0") // APR 1/4, 2/4, 3/4
	assert.FileExists(t, out)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.json"), []byte("{}"), 0o644))
	code, _, stderr = runCLI(t, "eval", "aggregate", filepath.Join(dir, "bad.json"))
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "bad.json")
}
