//go:build linux

// Package probe holds a tiny BPF LSM program that denies one process opening
// chosen files. TestVMProbe uses it to show that a kernel really enforces
// BPF LSM (run it with `mcpguard vm -- go test -bpf ./vm/...`); on a kernel
// that refuses BPF LSM, loading fails with guard.ErrKernelRefused.
package probe

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-19 -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -type file_id probe probe.bpf.c

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/guard"
)

// Denier is the attached program. Close detaches it.
type Denier struct {
	objs probeObjects
	link link.Link
}

// DenyOpen loads and attaches the program so that process pid cannot open
// the given files (existing paths). Errors that mean the kernel refuses BPF
// LSM here wrap guard.ErrKernelRefused.
func DenyOpen(pid int, paths ...string) (*Denier, error) {
	spec, err := loadProbe()
	if err != nil {
		return nil, fmt.Errorf("load probe spec: %w", err)
	}
	if err := spec.Variables["target_tgid"].Set(uint32(pid)); err != nil {
		return nil, fmt.Errorf("set target: %w", err)
	}
	d := &Denier{}
	if err := spec.LoadAndAssign(&d.objs, nil); err != nil {
		return nil, refused("load deny_open", err)
	}
	for _, p := range paths {
		id, err := fileID(p)
		if err != nil {
			d.Close()
			return nil, err
		}
		if err := d.objs.Denied.Put(id, uint8(1)); err != nil {
			d.Close()
			return nil, fmt.Errorf("deny %s: %w", p, err)
		}
	}
	d.link, err = link.AttachLSM(link.LSMOptions{Program: d.objs.DenyOpen})
	if err != nil {
		d.Close()
		return nil, refused("attach lsm/file_open", err)
	}
	return d, nil
}

// Denials reports how many opens the program has denied.
func (d *Denier) Denials() (uint64, error) {
	var n uint64
	if err := d.objs.Denials.Lookup(uint32(0), &n); err != nil {
		return 0, fmt.Errorf("read denials: %w", err)
	}
	return n, nil
}

// Close detaches and unloads the program.
func (d *Denier) Close() error {
	var errs []error
	if d.link != nil {
		errs = append(errs, d.link.Close())
		d.link = nil
	}
	errs = append(errs, d.objs.Close())
	return errors.Join(errs...)
}

// fileID names a file as the program sees it: the inode number and the
// kernel's dev_t (major<<20 | minor), which differs from stat's encoding.
func fileID(path string) (probeFileId, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return probeFileId{}, fmt.Errorf("stat %s: %w", path, err)
	}
	return probeFileId{Ino: st.Ino, Dev: unix.Major(st.Dev)<<20 | unix.Minor(st.Dev)}, nil
}

// refused wraps err with guard.ErrKernelRefused when it says the kernel
// will not run BPF LSM programs (EPERM under lockdown or without BPF in
// lsm=, no BTF, an unsupported program type), keeping the kernel's reason.
func refused(what string, err error) error {
	if errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, unix.EPERM) ||
		errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, syscall.Errno(524) /* ENOTSUPP */) {
		return fmt.Errorf("%s: %w: %w", what, guard.ErrKernelRefused, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
