//go:build linux

package vm

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/mcpguard/mcpguard/internal/testenv"
)

// fakeModule is a minimal relocatable ELF with a .modinfo section, which is
// all the runner reads from a module.
func fakeModule(t *testing.T, modinfo ...string) []byte {
	t.Helper()
	info := []byte(strings.Join(modinfo, "\x00") + "\x00")
	shstr := []byte("\x00.modinfo\x00.shstrtab\x00")
	const hdr = 64
	shoff := (hdr + len(info) + len(shstr) + 7) &^ 7
	var b bytes.Buffer
	h := elf.Header64{
		Type: uint16(elf.ET_REL), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Shoff: uint64(shoff), Ehsize: hdr, Shentsize: 64, Shnum: 3, Shstrndx: 2,
	}
	copy(h.Ident[:], "\x7fELF")
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	require.NoError(t, binary.Write(&b, binary.LittleEndian, h))
	b.Write(info)
	b.Write(shstr)
	b.Write(make([]byte, shoff-b.Len()))
	for _, s := range []elf.Section64{
		{},
		{Name: 1, Type: uint32(elf.SHT_PROGBITS), Off: hdr, Size: uint64(len(info)), Addralign: 1},
		{Name: 10, Type: uint32(elf.SHT_STRTAB), Off: uint64(hdr + len(info)), Size: uint64(len(shstr)), Addralign: 1},
	} {
		require.NoError(t, binary.Write(&b, binary.LittleEndian, s))
	}
	return b.Bytes()
}

// fakeModules lays out lib/modules/<release> with the given dependencies.
func fakeModules(t *testing.T, deps map[string]string, builtin ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "lib", "modules", "6.1.0-test")
	for name, d := range deps {
		p := filepath.Join(dir, "kernel", "drivers", strings.ReplaceAll(name, "_", "-")+".ko")
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, fakeModule(t, "license=GPL", "depends="+d, "name="+name), 0o644))
	}
	var lines []string
	for _, b := range builtin {
		lines = append(lines, "kernel/drivers/"+b+".ko")
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "modules.builtin"), []byte(strings.Join(lines, "\n")), 0o644))
	return dir
}

// cpioEntry is one member of a newc archive, as the kernel would see it.
type cpioEntry struct {
	name         string
	mode         uint32
	rmaj, rmin   uint32
	data         []byte
	alignedStart bool
}

// readCPIO parses a newc archive independently of the writer.
func readCPIO(t *testing.T, b []byte) []cpioEntry {
	t.Helper()
	var out []cpioEntry
	off := 0
	field := func(i int) uint32 {
		v, err := strconv.ParseUint(string(b[off+6+8*i:off+14+8*i]), 16, 32)
		require.NoError(t, err)
		return uint32(v)
	}
	for {
		require.LessOrEqual(t, off+110, len(b), "truncated header")
		require.Equal(t, "070701", string(b[off:off+6]), "magic at %d", off)
		mode, size, rmaj, rmin, nameSize := field(1), field(6), field(9), field(10), field(11)
		name := string(b[off+110 : off+110+int(nameSize)-1])
		require.Equal(t, byte(0), b[off+110+int(nameSize)-1])
		dataOff := (off + 110 + int(nameSize) + 3) &^ 3
		if name == "TRAILER!!!" {
			rest := b[dataOff:]
			assert.Equal(t, 0, len(b)%512, "archive padded to 512 bytes")
			assert.Equal(t, make([]byte, len(rest)), rest, "only zeros after the trailer")
			return out
		}
		out = append(out, cpioEntry{name: name, mode: mode, rmaj: rmaj, rmin: rmin,
			data: b[dataOff : dataOff+int(size)], alignedStart: dataOff%4 == 0})
		off = (dataOff + int(size) + 3) &^ 3
	}
}

func TestResolveModules(t *testing.T) {
	dir := fakeModules(t, map[string]string{
		"9p":                    "9pnet,netfs,fscache",
		"9pnet":                 "",
		"9pnet_virtio":          "9pnet,virtio_ring,virtio",
		"virtio":                "",
		"virtio_ring":           "",
		"netfs":                 "",
		"fscache":               "netfs",
		"virtio_pci":            "virtio_pci_legacy_dev,virtio_pci_modern_dev,virtio,virtio_ring",
		"virtio_pci_legacy_dev": "",
		"virtio_pci_modern_dev": "",
		"unrelated":             "",
	}, "virtio_console")
	mods, err := resolveModules(dir, []string{"virtio_pci", "9pnet_virtio", "9p", "virtio_console"})
	require.NoError(t, err)
	pos := map[string]int{}
	for i, m := range mods {
		_, dup := pos[m.name]
		require.False(t, dup, "%s twice", m.name)
		pos[m.name] = i
	}
	assert.Len(t, mods, 10, "the closure, without the builtin or unrelated ones: %v", pos)
	assert.NotContains(t, pos, "unrelated")
	for _, m := range mods {
		for _, d := range m.deps {
			assert.Less(t, pos[d], pos[m.name], "%s must load before %s", d, m.name)
		}
	}

	_, err = resolveModules(dir, []string{"missing"})
	assert.ErrorContains(t, err, "module missing not found")

	cyc := fakeModules(t, map[string]string{"a": "b", "b": "a"})
	_, err = resolveModules(cyc, []string{"a"})
	assert.ErrorContains(t, err, "cycle")
}

func TestInitramfsContents(t *testing.T) {
	dir := fakeModules(t, map[string]string{"9p": "9pnet", "9pnet": ""})
	mods, err := resolveModules(dir, []string{"9p"})
	require.NoError(t, err)
	init := []byte("\x7fELF pretend init, odd length")
	var buf bytes.Buffer
	require.NoError(t, writeInitramfs(&buf, init, mods))

	zr, err := gzip.NewReader(&buf)
	require.NoError(t, err)
	raw, err := io.ReadAll(zr)
	require.NoError(t, err)
	byName := map[string]cpioEntry{}
	var names []string
	for _, e := range readCPIO(t, raw) {
		assert.True(t, e.alignedStart, "%s data 4-byte aligned", e.name)
		byName[e.name] = e
		names = append(names, e.name)
	}
	require.Contains(t, byName, "init")
	assert.Equal(t, init, byName["init"].data)
	assert.Equal(t, uint32(cpioFile|0o755), byName["init"].mode, "init is an executable file")
	assert.Equal(t, uint32(cpioChar|0o600), byName["dev/console"].mode)
	assert.Equal(t, [2]uint32{5, 1}, [2]uint32{byName["dev/console"].rmaj, byName["dev/console"].rmin})
	for _, d := range []string{"dev", "proc", "sys", "newroot", "scratch", "modules"} {
		assert.Equal(t, uint32(cpioDir|0o755), byName[d].mode, d)
	}
	// The init loads modules in name order: dependencies first.
	var got []string
	for _, n := range names {
		if strings.HasPrefix(n, "modules/") {
			got = append(got, n)
		}
	}
	assert.Equal(t, []string{"modules/00-9pnet.ko", "modules/01-9p.ko"}, got)
	assert.Equal(t, fakeModule(t, "license=GPL", "depends=9pnet", "name=9p"), byName["modules/01-9p.ko"].data)
}

func TestBzPayload(t *testing.T) {
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	fmt.Fprint(zw, "uncompressed kernel")
	require.NoError(t, zw.Close())
	bz := make([]byte, 5*512+100+z.Len()+4)
	bz[0x1f1] = 4 // setup sectors
	copy(bz[0x202:], "HdrS")
	binary.LittleEndian.PutUint16(bz[0x206:], 0x20f)
	binary.LittleEndian.PutUint32(bz[0x248:], 100)
	binary.LittleEndian.PutUint32(bz[0x24c:], uint32(z.Len()))
	copy(bz[5*512+100:], z.Bytes())
	p, err := bzPayload(bz)
	require.NoError(t, err)
	out, err := decompress(t.Context(), p)
	require.NoError(t, err)
	assert.Equal(t, "uncompressed kernel", string(out))

	_, err = bzPayload([]byte("MZ not a kernel"))
	assert.Error(t, err)
	binary.LittleEndian.PutUint32(bz[0x24c:], 1<<30)
	_, err = bzPayload(bz)
	assert.Error(t, err, "payload past the end")
	assert.False(t, hasPVHEntry(out))
}

func TestParseKernelPackage(t *testing.T) {
	pkg, err := parseKernelPackage([]byte("linux-image-amd64\n  Depends: linux-image-6.1.0-57-amd64\n"))
	require.NoError(t, err)
	assert.Equal(t, "linux-image-6.1.0-57-amd64", pkg)
	_, err = parseKernelPackage([]byte("W: No packages found"))
	assert.ErrorIs(t, err, ErrNoKernel)
}

func TestInitramfsCache(t *testing.T) {
	cache := t.TempDir()
	mods := fakeModules(t, map[string]string{
		"virtio_pci": "", "9pnet_virtio": "9pnet", "9pnet": "", "9p": "9pnet",
		"virtio_console": "", "overlay": "", "fuse": "",
	})
	init := filepath.Join(t.TempDir(), "vminit")
	require.NoError(t, os.WriteFile(init, []byte("init v1"), 0o755))
	k := kernel{image: "vmlinuz", modules: mods}
	p1, err := initramfs(cache, init, k)
	require.NoError(t, err)
	p2, err := initramfs(cache, init, k)
	require.NoError(t, err)
	assert.Equal(t, p1, p2, "reused while the init and modules are the same")

	require.NoError(t, os.WriteFile(init, []byte("init v2"), 0o755))
	p3, err := initramfs(cache, init, k)
	require.NoError(t, err)
	assert.NotEqual(t, p1, p3, "rebuilt for a new init")
	assert.FileExists(t, p1, "a recent image stays for runs booting it")

	_, err = initramfs(cache, init, kernel{modules: fakeModules(t, map[string]string{"9p": "9pnet"})})
	assert.ErrorContains(t, err, "not found", "missing guest modules are an error, not a VM that cannot mount its root")
}
