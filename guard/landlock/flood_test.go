//go:build linux

package landlock_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/landlock"
)

// TestAuditFloodBounded: a server that keeps writing protected names
// (red team F4: a loop on open(".bashrc", "w")) leaves a bounded audit
// log: at most audit.MaxPerTarget events per name and audit.MaxPerRule in
// all, then one summary at the end of the session that counts the rest,
// so the log says how many refusals there were without one line each.
func TestAuditFloodBounded(t *testing.T) {
	rootOrSkip(t)
	w := newWorld(t)
	const targets, each = 12, 150 // 1800 refusals: both caps bind
	var actions []string
	for i := range targets {
		d := filepath.Join(w.writeRoot, fmt.Sprintf("d%d", i))
		require.NoError(t, os.Mkdir(d, 0o755))
		for range each {
			actions = append(actions, "write:"+filepath.Join(d, ".envrc"))
		}
	}
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	f, err := os.Create(file)
	require.NoError(t, err)
	defer f.Close()
	sb, err := landlock.New(w.pol, landlock.Options{Audit: audit.New(f), Server: "flood", Config: "C-full-landlock"})
	landlockOrSkip(t, err)
	t.Cleanup(func() { sb.Close() })
	out, err := execChild(t, sb, actions...).Output()
	require.NoError(t, err)
	assert.Equal(t, targets*each, strings.Count(string(out), " denied\n"), "every write refused")

	b, err := os.ReadFile(file)
	require.NoError(t, err)
	written, suppressed, summaries := 0, 0, 0
	perTarget := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e audit.Event
		require.NoError(t, json.Unmarshal([]byte(line), &e), line)
		if e.Rule != "file.protected_denied" {
			continue
		}
		if e.Suppressed > 0 {
			summaries++
			suppressed += e.Suppressed
			assert.Equal(t, "flood", e.Server)
			assert.Contains(t, e.Reason, fmt.Sprintf("%d more file.protected_denied events suppressed this session", e.Suppressed))
			continue
		}
		written++
		perTarget[e.Target]++
	}
	t.Logf("audit log: %d bytes, %d events written, %d suppressed", len(b), written, suppressed)
	assert.Equal(t, audit.MaxPerRule, written)
	for target, n := range perTarget {
		assert.LessOrEqual(t, n, audit.MaxPerTarget, target)
	}
	assert.Equal(t, 1, summaries, "one summary for the rule")
	assert.Equal(t, targets*each, written+suppressed, "every refusal written or counted")
	assert.Less(t, len(b), (audit.MaxPerRule+10)*512, "the log stays bounded")
}
