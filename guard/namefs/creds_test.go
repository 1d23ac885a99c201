//go:build linux

package namefs

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// threadStatus is the calling thread's credentials from
// /proc/thread-self/status: Uid and Gid (real, effective, saved, fs),
// Groups, CapEff, CapPrm.
func threadStatus(t *testing.T) map[string]string {
	b, err := os.ReadFile("/proc/thread-self/status")
	require.NoError(t, err)
	m := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ":")
		switch k {
		case "Uid", "Gid", "Groups", "CapEff", "CapPrm":
			m[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return m
}

// TestAsCaller: the thread asCaller runs on has the caller's fsuid and
// fsgid, no supplementary groups and every effective capability but
// CAP_SYS_RESOURCE; become and restore leave a thread as it was.
func TestAsCaller(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing a thread's fsuid and groups needs root")
	}
	const nobody = 65534
	type states struct{ before, during, after map[string]string }
	got := make(chan states, 1)
	go func() {
		// Never unlocked: should restore fail, the thread ends with
		// this goroutine.
		runtime.LockOSThread()
		var s states
		defer func() { got <- s }()
		s.before = threadStatus(t)
		var th thread
		if e := th.become(nobody, nobody); e != 0 {
			t.Errorf("become: %v", e)
		}
		s.during = threadStatus(t)
		if err := th.restore(); err != nil {
			t.Errorf("restore: %v", err)
		}
		s.after = threadStatus(t)
	}()
	s := <-got
	require.NotNil(t, s.after)
	assert.Equal(t, s.before, s.after, "restored")
	f := func(m map[string]string, k string, i int) string { return strings.Fields(m[k])[i] }
	assert.Equal(t, "65534", f(s.during, "Uid", 3), "fsuid")
	assert.Equal(t, "65534", f(s.during, "Gid", 3), "fsgid")
	assert.Equal(t, f(s.before, "Uid", 1), f(s.during, "Uid", 1), "euid unchanged")
	assert.Empty(t, s.during["Groups"], "no supplementary groups")
	eff, err := strconv.ParseUint(s.before["CapEff"], 16, 64)
	require.NoError(t, err)
	assert.Equal(t, eff&^(1<<unix.CAP_SYS_RESOURCE), mustHex(t, s.during["CapEff"]), "effective: all but CAP_SYS_RESOURCE")
	assert.Equal(t, s.before["CapPrm"], s.during["CapPrm"], "permitted unchanged")

	var in map[string]string
	require.Zero(t, asCaller(nobody, nobody, func() { in = threadStatus(t) }))
	assert.Equal(t, s.during, in, "asCaller runs fn as become leaves the thread")
}

func mustHex(t *testing.T, s string) uint64 {
	v, err := strconv.ParseUint(s, 16, 64)
	require.NoError(t, err)
	return v
}

// BenchmarkAsCaller is what judging one request as its caller adds to it
// (a goroutine locked to its thread, 14 system calls).
func BenchmarkAsCaller(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("changing a thread's fsuid and groups needs root")
	}
	for b.Loop() {
		if e := asCaller(65534, 65534, func() {}); e != 0 {
			b.Fatal(e)
		}
	}
}
