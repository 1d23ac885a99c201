package eval

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func res(id, cat, verdict string, denied ...int) *Result {
	return &Result{ID: id, Category: cat, Attack: cat != Benign, Verdict: verdict, Denied: denied}
}

func TestSummarize(t *testing.T) {
	c0 := []*Result{
		res("A-1", FileRead, Succeeded), res("A-2", FileRead, Succeeded),
		res("A-3", Exfiltration, Blocked), // not viable: fails even under C0
		res("A-4", CrossLanguage, Succeeded),
		res("B-1", Benign, Passed), res("B-2", Benign, Passed),
	}
	viable := Viable(c0)
	assert.Equal(t, map[string]bool{"A-1": true, "A-2": true, "A-4": true}, viable)

	guarded := []*Result{
		res("A-1", FileRead, Blocked, 0), res("A-2", FileRead, Succeeded),
		res("A-3", Exfiltration, Blocked), res("A-4", CrossLanguage, Blocked),
		res("B-1", Benign, Passed), res("B-2", Benign, FalsePositive, 0),
		{ID: "A-5", Category: FileRead, Attack: true, Verdict: Error, Err: "boom"},
	}
	s := Summarize("C-x", guarded, viable)
	assert.Equal(t, Count{3, 4}, s.Blocked)
	assert.Equal(t, Count{2, 3}, s.ViableBlocked)
	assert.Equal(t, Count{1, 2}, s.FalsePositives)
	assert.Equal(t, Count{1, 2}, s.PerCategory[FileRead])
	assert.Equal(t, Count{1, 1}, s.PerCategory[CrossLanguage])
	assert.Equal(t, 1, s.Errors)
	assert.Equal(t, 2, s.Denied)
	assert.InDelta(t, 0.75, s.APR(), 1e-9)
	assert.InDelta(t, 2.0/3, s.VAPR(), 1e-9)
	assert.InDelta(t, 0.5, s.FPR(), 1e-9)
	assert.True(t, math.IsNaN(Summarize("C-x", guarded, nil).VAPR()), "V-APR unknown without a C0 run")

	var b bytes.Buffer
	require.NoError(t, WriteTable(&b, []*Report{
		{Config: "C0", Summary: Summarize("C0", c0, viable)},
		{Config: "C-x", Summary: s},
		{Config: "C-y", Skipped: "kernel refused"},
	}))
	out := b.String()
	assert.Contains(t, out, "75.0% (3/4)")
	assert.Contains(t, out, "66.7%")
	assert.Contains(t, out, "C-y: skipped: kernel refused")
	assert.Contains(t, out, "C-x: 1 harness errors")
	assert.NotContains(t, out, "INVALID")

	// Benign servers that die at start: no false-positive rate, a failure.
	broken := []*Result{
		res("B-1", Benign, FalsePositive), res("B-2", Benign, Passed),
	}
	broken[0].StartError = "start server: fork/exec ./notes: operation not permitted"
	bs := Summarize("C-ebpf", broken, viable)
	assert.Equal(t, 1, bs.BenignNotStarted)
	b.Reset()
	require.NoError(t, WriteTable(&b, []*Report{{Config: "C-ebpf", Summary: bs}}))
	assert.Contains(t, b.String(), "INVALID (1/2 benign did not start)")
	assert.Contains(t, b.String(), "FAILED: C-ebpf: 1 of 2 benign cases did not start")
	assert.NotContains(t, b.String(), "50.0% (1/2)", "no false-positive rate for a broken setup")
}

func TestGoldenRoundTrip(t *testing.T) {
	rs := []*Result{res("B-1", Benign, Passed), res("A-1", FileRead, Succeeded), res("A-2", FileRead, Blocked)}
	g := Golden(rs)
	assert.Equal(t, "A-1 succeeded\nA-2 blocked\nB-1 passed\n", g)
	m, err := ParseGolden([]byte(g))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"A-1": Succeeded, "A-2": Blocked, "B-1": Passed}, m)
	_, err = ParseGolden([]byte("A-1 won\n"))
	assert.Error(t, err)
	_, err = ParseGolden([]byte("A-1\n"))
	assert.Error(t, err)
}

func TestAggregate(t *testing.T) {
	mk := func(run string, blocked int, verdictA1 string) *Report {
		return &Report{RunID: run, Config: "C-x", Summary: Summary{
			Blocked: Count{blocked, 4}, ViableBlocked: Count{blocked, 4}, FalsePositives: Count{0, 2},
		}, Results: []*Result{res("A-1", FileRead, verdictA1), res("B-1", Benign, Passed)}}
	}
	aggs := AggregateReports([]*Report{mk("r1", 2, Blocked), mk("r2", 3, Blocked), mk("r3", 4, Succeeded),
		{RunID: "r4", Config: "C-y", Skipped: "no"}})
	require.Len(t, aggs, 1)
	a := aggs[0]
	assert.Equal(t, []string{"r1", "r2", "r3"}, a.Runs)
	assert.InDelta(t, 0.75, a.APR.Mean, 1e-9)
	assert.InDelta(t, 0.25, a.APR.StdDev, 1e-9)
	assert.InDelta(t, 0.5, a.APR.Min, 1e-9)
	assert.InDelta(t, 1.0, a.APR.Max, 1e-9)
	assert.Equal(t, []string{"A-1"}, a.Flaky)

	dir := t.TempDir()
	p := filepath.Join(dir, "r.json")
	var b bytes.Buffer
	require.NoError(t, WriteJSON(&b, mk("r1", 2, Blocked)))
	require.NoError(t, writeFile(p, b.Bytes()))
	got, err := ReadReport(p)
	require.NoError(t, err)
	assert.Equal(t, "C-x", got.Config)
	require.NoError(t, writeFile(p, []byte(`{"x": 1}`)))
	_, err = ReadReport(p)
	assert.Error(t, err, "not a report")
}

func TestSmoke(t *testing.T) {
	f := false
	mk := func(id, server, cat string) *Case {
		return &Case{ID: id, Server: server, Category: cat, VisibleInArguments: &f}
	}
	cases := []*Case{
		mk("A-1", "big", FileRead), mk("A-2", "big", FileRead), mk("A-3", "big", FileRead),
		mk("A-4", "big", FileRead), mk("A-5", "big", FileRead), mk("A-6", "big", FileRead), mk("A-7", "big", FileRead),
		mk("M-1", "mixed", FileRead), mk("M-2", "mixed", Benign), mk("M-3", "mixed", Benign), mk("M-4", "mixed", EnvLeak),
	}
	got := Smoke(cases)
	var ids []string
	for _, c := range got {
		ids = append(ids, c.ID)
	}
	assert.Equal(t, []string{"M-1", "M-2", "M-4"}, ids, "one server with attacks and benign, one benign case")
	assert.Len(t, Smoke(cases[:7]), SmokeSize)
}

func writeFile(path string, b []byte) error { return os.WriteFile(path, b, 0o644) }
