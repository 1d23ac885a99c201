//go:build !linux

package testenv

import "testing"

// KernelAudit skips tb: the kernel's audit records (Landlock's denials)
// are Linux's.
func KernelAudit(tb testing.TB) {
	tb.Helper()
	tb.Skip("the kernel's audit records are Linux's")
}
