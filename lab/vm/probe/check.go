//go:build linux

package probe

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// Check shows the kernel enforcing a BPF LSM program: this process is denied
// opening one file, by that program (its counter moves), while it may open
// others and other processes may open that one; detaching lifts the denial.
// dir is an empty scratch directory. An error wrapping guard.ErrKernelRefused
// means the kernel refused BPF LSM (tests skip on it, or fail under -bpf);
// any other error is a broken promise. It is exported so that any package's
// TestVMProbe can run it (go test stops reading packages at -bpf, so
// `go test -run TestVMProbe -bpf ./...` tests only the current directory).
func Check(dir string) error {
	secret, other := filepath.Join(dir, "secret"), filepath.Join(dir, "other")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(other, []byte("fine\n"), 0o644); err != nil {
		return err
	}
	d, err := DenyOpen(os.Getpid(), secret)
	if err != nil {
		return err
	}
	defer d.Close()

	denied := func(step string, want uint64, open func() error) error {
		err := open()
		if !errors.Is(err, syscall.EPERM) {
			return fmt.Errorf("%s: got %v, want EPERM from the program (we are root)", step, err)
		}
		n, err := d.Denials()
		if err != nil {
			return fmt.Errorf("%s: read counter: %w", step, err)
		}
		if n != want {
			return fmt.Errorf("%s: the program counted %d denials, want %d", step, n, want)
		}
		return nil
	}
	if err := denied("read secret", 1, func() error { _, err := os.ReadFile(secret); return err }); err != nil {
		return err
	}
	if b, err := os.ReadFile(other); err != nil || string(b) != "fine\n" {
		return fmt.Errorf("other files must open: %q, %v", b, err)
	}
	if out, err := exec.Command("cat", secret).Output(); err != nil || !bytes.Equal(out, []byte("s3cret\n")) {
		return fmt.Errorf("another process is not targeted, but cat got %q, %v", out, err)
	}
	if err := denied("open secret", 2, func() error {
		f, err := os.Open(secret)
		if err == nil {
			f.Close()
		}
		return err
	}); err != nil {
		return err
	}
	if err := d.Close(); err != nil {
		return fmt.Errorf("detach: %w", err)
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "s3cret\n" {
		return fmt.Errorf("detaching must lift the denial: %q, %v", b, err)
	}
	return nil
}
