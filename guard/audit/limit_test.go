package audit_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/audit"
)

// lockedBuffer is a bytes.Buffer safe for the concurrent test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) events(t *testing.T) []audit.Event {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []audit.Event
	for _, line := range strings.Split(strings.TrimSuffix(l.b.String(), "\n"), "\n") {
		if line == "" {
			continue
		}
		var e audit.Event
		require.NoError(t, json.Unmarshal([]byte(line), &e), line)
		out = append(out, e)
	}
	return out
}

func denial(rule, target string) audit.Event {
	return audit.Event{Server: "srv", Config: "C-full-landlock", Layer: "L3", Rule: rule,
		Decision: audit.Deny, Target: target, Reason: "refused " + target}
}

// TestLimitedCaps: at most perTarget events of a rule and target and
// perRule of a rule are written, other rules keep their own counts, the
// parent logger is not limited, and Summarize writes one event per rule
// with the exact number suppressed (then nothing until more are).
func TestLimitedCaps(t *testing.T) {
	var buf lockedBuffer
	parent := audit.New(&buf)
	l := parent.Limited(3, 5)
	for range 10 {
		require.NoError(t, l.Log(denial("file.protected_denied", "/ws/.envrc")))
	}
	for _, target := range []string{"/ws/a/.envrc", "/ws/b/.envrc"} {
		for range 4 {
			require.NoError(t, l.Log(denial("file.protected_denied", target)))
		}
	}
	for range 2 {
		require.NoError(t, l.Log(denial("net.connect_denied", "10.0.0.1:443")))
	}
	for range 7 {
		require.NoError(t, parent.Log(denial("file.protected_denied", "/ws/.envrc")))
	}
	count := func() map[string]int {
		n := map[string]int{}
		for _, e := range buf.events(t) {
			n[e.Rule+" "+e.Target]++
		}
		return n
	}
	assert.Equal(t, map[string]int{
		"file.protected_denied /ws/.envrc":   3 + 7, // the parent's 7 are not limited
		"file.protected_denied /ws/a/.envrc": 2,     // the rule's cap (5) reached
		"net.connect_denied 10.0.0.1:443":    2,
	}, count())

	require.NoError(t, l.Summarize())
	events := buf.events(t)
	last := events[len(events)-1]
	assert.Equal(t, "file.protected_denied", last.Rule)
	assert.Equal(t, 10+8-5, last.Suppressed)
	assert.Equal(t, "srv", last.Server)
	assert.Equal(t, "C-full-landlock", last.Config)
	assert.Equal(t, "L3", last.Layer)
	assert.Equal(t, audit.Deny, last.Decision)
	assert.Empty(t, last.Target)
	assert.Contains(t, last.Reason, "13 more file.protected_denied events suppressed this session")
	assert.False(t, last.Time.IsZero())
	assert.Len(t, events, 3+2+2+7+1, "one summary, none for a rule with nothing suppressed")

	require.NoError(t, l.Summarize())
	assert.Len(t, buf.events(t), 15, "nothing new suppressed, nothing written")
	require.NoError(t, l.Log(denial("file.protected_denied", "/ws/c/.envrc")))
	require.NoError(t, l.Summarize())
	events = buf.events(t)
	require.Len(t, events, 16)
	assert.Equal(t, 1, events[15].Suppressed, "counted again from the last summary")
}

// TestLimitedWritesAsBefore: an event under the caps is written exactly
// as the unlimited logger writes it.
func TestLimitedWritesAsBefore(t *testing.T) {
	e := denial("file.protected_denied", "/ws/.bashrc")
	e.Time = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	e.PID = 42
	var plain, limited bytes.Buffer
	require.NoError(t, audit.New(&plain).Log(e))
	require.NoError(t, audit.New(&limited).Limited(audit.MaxPerTarget, audit.MaxPerRule).Log(e))
	assert.Equal(t, plain.String(), limited.String())
	assert.NotContains(t, plain.String(), "suppressed", "the field is omitted on ordinary events")
}

// TestLimitedConcurrent: under concurrent use (run with -race) every
// event is either written or counted in the summary, and no caps are
// exceeded.
func TestLimitedConcurrent(t *testing.T) {
	var buf lockedBuffer
	l := audit.New(&buf).Limited(audit.MaxPerTarget, audit.MaxPerRule)
	const workers, each = 16, 500
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				rule := "file.protected_denied"
				if i%4 == 0 {
					rule = "net.connect_denied"
				}
				// 40 targets: the per-rule cap binds before the per-target one.
				assert.NoError(t, l.Log(denial(rule, fmt.Sprintf("/ws/%d/.envrc", (w*each+i)%40))))
			}
		}()
	}
	wg.Wait()
	require.NoError(t, l.Summarize())
	written := map[string]int{}
	perTarget := map[string]int{}
	suppressed := map[string]int{}
	for _, e := range buf.events(t) {
		if e.Suppressed > 0 {
			suppressed[e.Rule] += e.Suppressed
			continue
		}
		written[e.Rule]++
		perTarget[e.Rule+" "+e.Target]++
	}
	total := map[string]int{"net.connect_denied": workers * each / 4, "file.protected_denied": workers * each * 3 / 4}
	for rule, n := range total {
		assert.Equal(t, min(n, audit.MaxPerRule), written[rule], rule)
		assert.Equal(t, n, written[rule]+suppressed[rule], "%s: written and suppressed add up", rule)
	}
	for k, n := range perTarget {
		assert.LessOrEqual(t, n, audit.MaxPerTarget, k)
	}
}

// TestLimitedNil: a nil Logger stays nil (drops) when limited.
func TestLimitedNil(t *testing.T) {
	var l *audit.Logger
	assert.Nil(t, l.Limited(1, 1))
	assert.NoError(t, l.Limited(1, 1).Log(audit.Event{Rule: "x"}))
	assert.NoError(t, l.Summarize())
	assert.NoError(t, audit.New(&bytes.Buffer{}).Summarize(), "an unlimited logger has nothing to summarize")
}
