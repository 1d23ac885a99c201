//go:build linux

package vm

import (
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// Under TCG the kernel's own decompressor is slow: unpacking Debian's
// xz-compressed bzImage took 13 s of a 27 s boot on the build machines.
// A kernel built with CONFIG_PVH has an entry point qemu can jump to in the
// uncompressed ELF, so the runner unpacks the bzImage once, into the cache,
// and boots that.

// bzPayload returns the compressed kernel inside a bzImage, using the boot
// protocol's setup header (Documentation/arch/x86/boot.rst).
func bzPayload(bz []byte) ([]byte, error) {
	if len(bz) < 0x250 || string(bz[0x202:0x206]) != "HdrS" {
		return nil, errors.New("not a bzImage")
	}
	if binary.LittleEndian.Uint16(bz[0x206:]) < 0x208 {
		return nil, errors.New("bzImage boot protocol too old for payload fields")
	}
	setupSects := int(bz[0x1f1])
	if setupSects == 0 {
		setupSects = 4
	}
	off := (setupSects+1)*512 + int(binary.LittleEndian.Uint32(bz[0x248:]))
	n := int(binary.LittleEndian.Uint32(bz[0x24c:]))
	if off < 0 || n <= 0 || off+n > len(bz) {
		return nil, errors.New("bzImage payload out of range")
	}
	return bz[off : off+n], nil
}

// decompress unpacks a kernel payload by its magic number.
func decompress(ctx context.Context, p []byte) ([]byte, error) {
	switch {
	case bytes.HasPrefix(p, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(bytes.NewReader(p))
		if err != nil {
			return nil, err
		}
		zr.Multistream(false)
		return io.ReadAll(zr)
	case bytes.HasPrefix(p, []byte("\xfd7zXZ\x00")):
		return filter(ctx, p, "xz", "-dc")
	case bytes.HasPrefix(p, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return filter(ctx, p, "zstd", "-dc")
	}
	return nil, errors.New("kernel payload compression not supported")
}

// filter pipes in through a decompressor. The kernel appends the
// uncompressed size after the stream, which xz calls trailing garbage, so
// only the output is judged (by the ELF check that follows).
func filter(ctx context.Context, in []byte, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = bytes.NewReader(in)
	var out bytes.Buffer
	cmd.Stdout = &out
	err := cmd.Run()
	if out.Len() == 0 {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return out.Bytes(), nil
}

// hasPVHEntry reports whether an ELF kernel carries the Xen
// PHYS32_ENTRY note qemu needs to boot it directly.
func hasPVHEntry(vmlinux []byte) bool {
	f, err := elf.NewFile(bytes.NewReader(vmlinux))
	if err != nil {
		return false
	}
	defer f.Close()
	const xenElfNotePhys32Entry = 18
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		data, err := io.ReadAll(p.Open())
		if err != nil {
			continue
		}
		for len(data) >= 12 {
			nameSz := int(binary.LittleEndian.Uint32(data))
			descSz := int(binary.LittleEndian.Uint32(data[4:]))
			typ := binary.LittleEndian.Uint32(data[8:])
			name := align4(nameSz)
			if 12+name+align4(descSz) > len(data) {
				break
			}
			if typ == xenElfNotePhys32Entry && bytes.HasPrefix(data[12:12+nameSz], []byte("Xen")) {
				return true
			}
			data = data[12+name+align4(descSz):]
		}
	}
	return false
}

func align4(n int) int { return (n + 3) &^ 3 }

// pvhKernel returns an uncompressed PVH-bootable copy of the bzImage at
// path, made once next to it, or "" when the kernel cannot be booted so.
func pvhKernel(ctx context.Context, path string) (string, error) {
	out := filepath.Join(filepath.Dir(path), "pvh-"+filepath.Base(path))
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	bz, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	p, err := bzPayload(bz)
	if err != nil {
		return "", err
	}
	vmlinux, err := decompress(ctx, p)
	if err != nil {
		return "", err
	}
	if !hasPVHEntry(vmlinux) {
		return "", errors.New("kernel has no PVH entry point")
	}
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, vmlinux, 0o644); err != nil {
		return "", err
	}
	return out, os.Rename(tmp, out)
}
