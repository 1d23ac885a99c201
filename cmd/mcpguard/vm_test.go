//go:build linux

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	_ "github.com/mcpguard/mcpguard/internal/testenv"
)

func TestVMUsage(t *testing.T) {
	for name, args := range map[string][]string{
		"no command":    {"vm"},
		"empty command": {"vm", "--"},
		"bad flag":      {"vm", "--nope", "--", "true"},
		"stray arg":     {"vm", "x", "--", "true"},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), stdio{strings.NewReader(""), &out, &errb}, args)
			assert.Equal(t, 2, code, errb.String())
			assert.Empty(t, out.String())
		})
	}
}

func TestGoTestFlagOrder(t *testing.T) {
	assert.Contains(t, goTestFlagOrder(strings.Fields("go test -run X -bpf ./vm/...")), "put packages first (go test ./vm/... -bpf)")
	assert.NotEmpty(t, goTestFlagOrder(strings.Fields("/usr/local/go/bin/go test -bpf ./...")))
	for _, ok := range []string{"go test ./... -bpf", "go test -run X ./vm/... -bpf", "go vet -bpf ./...", "sh -c true", "go"} {
		assert.Empty(t, goTestFlagOrder(strings.Fields(ok)), ok)
	}
}
