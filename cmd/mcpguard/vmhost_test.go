package main

import (
	"bytes"
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The message a macOS or Windows user gets from `mcpguard vm` names their
// system and what the command needs.
func TestVMHostError(t *testing.T) {
	for _, goos := range []string{"darwin", "windows"} {
		msg := errVMHost(goos).Error()
		assert.Contains(t, msg, "this is "+goos)
		assert.Contains(t, msg, "needs a Linux host")
	}
}

// Off Linux the command fails with that message and status 1 before
// looking at its arguments; on Linux it is the real command (vm_test.go).
func TestVMCommandOffLinux(t *testing.T) {
	if runtime.GOOS == "linux" {
		t.Skip("mcpguard vm is the real command on linux (see TestVMUsage)")
	}
	var errb bytes.Buffer
	code := run(context.Background(), stdio{new(bytes.Buffer), new(bytes.Buffer), &errb}, []string{"vm", "--", "true"})
	assert.Equal(t, 1, code)
	assert.Contains(t, errb.String(), "needs a Linux host")
}
