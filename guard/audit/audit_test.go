package audit_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/audit"
	_ "github.com/mcpguard/mcpguard/internal/testenv"
)

func TestLogWritesOneJSONLinePerEvent(t *testing.T) {
	var buf bytes.Buffer
	l := audit.New(&buf)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			require.NoError(t, l.Log(audit.Event{Server: "fs", Config: "C-app", Layer: "L1", Rule: "path.outside_roots",
				Tool: "read_file", Decision: audit.Deny, Reason: strings.Repeat("x", i), ArgsDigest: audit.Digest([]byte(`{"path":"/etc/shadow"}`))}))
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	require.Len(t, lines, 50, "no event lost or interleaved")
	for _, line := range lines {
		var e audit.Event
		require.NoError(t, json.Unmarshal([]byte(line), &e), line)
		assert.False(t, e.Time.IsZero(), "time filled in")
		assert.Equal(t, "path.outside_roots", e.Rule)
		assert.NotContains(t, line, "/etc/shadow", "the log holds a digest, not the arguments")
	}
}

func TestNilLoggerDrops(t *testing.T) {
	var l *audit.Logger
	assert.NoError(t, l.Log(audit.Event{Rule: "x"}))
}

func TestDigest(t *testing.T) {
	assert.Empty(t, audit.Digest(nil))
	d := audit.Digest([]byte("a"))
	assert.True(t, strings.HasPrefix(d, "sha256:"))
	assert.Equal(t, d, audit.Digest([]byte("a")))
	assert.NotEqual(t, d, audit.Digest([]byte("b")))
}
