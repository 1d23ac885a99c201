//go:build !linux

package main

import (
	"context"
	"fmt"
	"io"

	"github.com/mcpguard/mcpguard/guard/policy"
	"github.com/mcpguard/mcpguard/guard/runtime"
)

// learnRuntime needs fanotify, which only Linux has: --learn fails here
// with runtime.ErrNoObserver rather than propose a policy from nothing.
func learnRuntime(context.Context, *initBox, []string, io.Writer, []learnCall) ([]policy.ToolInfo, *runtime.Learned, error) {
	_, err := runtime.Observe()
	return nil, nil, fmt.Errorf("policy init --learn: %w", err)
}
