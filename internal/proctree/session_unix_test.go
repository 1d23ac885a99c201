//go:build linux

package proctree_test

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/internal/proctree"
)

// A prepared process leads a session of its own (no controlling
// terminal: /dev/tty and TIOCSTI cannot reach the guard's), and a file
// given as its stderr reaches it as a pipe, never as the file itself.
func TestOwnSessionNoGuardFiles(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	require.NoError(t, err)
	defer f.Close()
	var out bytes.Buffer
	cmd := exec.Command("/bin/sh", "-c", `cat /proc/$$/stat; readlink /proc/$$/fd/2; echo to-stderr >&2`)
	cmd.Stdout = &out
	cmd.Stderr = proctree.Pipe(f)
	proctree.Prepare(cmd)
	g, err := proctree.Start(cmd)
	require.NoError(t, err)
	<-g.Done()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2, out.String())
	stat := lines[0]
	fields := strings.Fields(stat[strings.LastIndexByte(stat, ')')+2:]) // state ppid pgrp session tty_nr
	pid := strconv.Itoa(cmd.Process.Pid)
	assert.Equal(t, pid, fields[2], "its own process group")
	assert.Equal(t, pid, fields[3], "its own session")
	assert.Equal(t, "0", fields[4], "no controlling terminal")
	assert.True(t, strings.HasPrefix(lines[1], "pipe:"), "stderr is a pipe, not the file: %s", lines[1])
	b, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	assert.Equal(t, "to-stderr\n", string(b), "what it writes reaches the file")
}
