//go:build !linux

package main

import (
	"context"
	"runtime"
)

// cmdVM refuses off Linux: see errVMHost.
func cmdVM(ctx context.Context, s stdio, args []string) error {
	return errVMHost(runtime.GOOS)
}
