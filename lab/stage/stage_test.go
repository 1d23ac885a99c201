package stage_test

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/lab/stage"
)

func TestProgress(t *testing.T) {
	assert.Equal(t, "[2/5 eval] 0/100 cases, 3s, estimating what is left",
		stage.Progress("2/5 eval", 0, 100, "cases", 3*time.Second))
	assert.Equal(t, "[2/5 eval] 25/100 cases, 1m00s, ~3m00s left",
		stage.Progress("2/5 eval", 25, 100, "cases", time.Minute))
	assert.Equal(t, "[x] 100/100 runs, 10s, finishing", stage.Progress("x", 100, 100, "runs", 10*time.Second))
	assert.Equal(t, "[x] 7 runs, 10s", stage.Progress("x", 7, 0, "runs", 10*time.Second))
}

// TestRun counts the child's lines on both streams, keeps its output, and
// reports its exit status and the CPU it used.
func TestRun(t *testing.T) {
	var out, errOut, progress bytes.Buffer
	s := stage.Stage{Name: "t", Total: 13, Unit: "cases", Done: regexp.MustCompile(`^case `),
		Skip: regexp.MustCompile(`skipped$`), SkipUnits: 10, Every: 10 * time.Millisecond}
	script := `echo case 1; echo case 2 >&2; echo other; echo C-ebpf skipped >&2; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo case 3`
	res := stage.Run(s, []string{"sh", "-c", script}, &out, &errOut, &progress, false)
	require.NoError(t, res.Err)
	assert.Equal(t, 13, res.Done)
	assert.Equal(t, "case 1\nother\ncase 3\n", out.String())
	assert.Equal(t, "case 2\nC-ebpf skipped\n", errOut.String())
	assert.Positive(t, res.CPU, "the child's CPU time")
	assert.GreaterOrEqual(t, res.Wall, res.CPU/4)

	res = stage.Run(s, []string{"sh", "-c", "exit 3"}, nil, nil, &progress, false)
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "exit status 3")
	res = stage.Run(s, []string{"/nonexistent/prog"}, nil, nil, &progress, false)
	require.Error(t, res.Err)
	assert.True(t, strings.HasPrefix(res.Err.Error(), "start "))
}
