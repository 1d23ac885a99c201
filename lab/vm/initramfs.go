//go:build linux

package vm

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// guestModules are the modules the init needs, beyond what Debian's kernel
// has built in: virtio-pci, 9p over virtio for the host's root, the
// virtio-serial ports for the command's I/O, and overlay for writable
// copies of host directories, and fuse for the supervised write roots
// (guard/namefs) of the Landlock backend and policy init. Their
// dependencies come along.
var guestModules = []string{"virtio_pci", "9pnet_virtio", "9p", "virtio_console", "overlay", "fuse"}

// module is one kernel module file.
type module struct {
	name string // canonical: dashes as underscores
	path string
	deps []string
}

// moduleIndex maps module names to files under a lib/modules/<release> tree.
func moduleIndex(dir string) (map[string]string, error) {
	idx := map[string]string{}
	err := filepath.WalkDir(filepath.Join(dir, "kernel"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() || !strings.HasSuffix(name, ".ko") {
			if strings.Contains(name, ".ko.") {
				return fmt.Errorf("compressed module %s not supported", p)
			}
			return nil
		}
		idx[canonModule(strings.TrimSuffix(name, ".ko"))] = p
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("index modules: %w", err)
	}
	return idx, nil
}

func canonModule(name string) string { return strings.ReplaceAll(name, "-", "_") }

// moduleDeps reads the "depends=" entry of a module's .modinfo section:
// the package ships no modules.dep (depmod makes it at install time).
func moduleDeps(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", path, err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("module %s: no .modinfo", path)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", path, err)
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			var deps []string
			for _, d := range strings.Split(string(v), ",") {
				if d != "" {
					deps = append(deps, canonModule(d))
				}
			}
			return deps, nil
		}
	}
	return nil, nil
}

// resolveModules returns the modules named in roots and everything they
// depend on, dependencies before dependents. Names missing from the index
// are assumed built in (the kernel's modules.builtin lists them).
func resolveModules(dir string, roots []string) ([]module, error) {
	idx, err := moduleIndex(dir)
	if err != nil {
		return nil, err
	}
	builtin := map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(dir, "modules.builtin")); err == nil {
		for _, l := range strings.Fields(string(b)) {
			builtin[canonModule(strings.TrimSuffix(filepath.Base(l), ".ko"))] = true
		}
	}
	var (
		out   []module
		state = map[string]int{} // 1 visiting, 2 done
		visit func(name string, from string) error
	)
	visit = func(name, from string) error {
		switch state[name] {
		case 1:
			return fmt.Errorf("module dependency cycle at %s", name)
		case 2:
			return nil
		}
		p, ok := idx[name]
		if !ok {
			if builtin[name] {
				state[name] = 2
				return nil
			}
			if from != "" {
				return fmt.Errorf("module %s (needed by %s) not found in %s", name, from, dir)
			}
			return fmt.Errorf("module %s not found in %s", name, dir)
		}
		state[name] = 1
		deps, err := moduleDeps(p)
		if err != nil {
			return err
		}
		sort.Strings(deps)
		for _, d := range deps {
			if err := visit(d, name); err != nil {
				return err
			}
		}
		state[name] = 2
		out = append(out, module{name: name, path: p, deps: deps})
		return nil
	}
	for _, r := range roots {
		if err := visit(canonModule(r), ""); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// writeInitramfs writes a gzip-compressed newc cpio archive holding the
// init and the modules, named so that their sorted order loads
// dependencies first.
func writeInitramfs(w io.Writer, init []byte, mods []module) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return err
	}
	c := newCPIOWriter(zw)
	for _, d := range []string{"dev", "proc", "sys", "newroot", "scratch", "modules"} {
		if err := c.Dir(d, 0o755); err != nil {
			return err
		}
	}
	if err := c.CharDev("dev/console", 0o600, 5, 1); err != nil {
		return err
	}
	if err := c.File("init", 0o755, init); err != nil {
		return err
	}
	for i, m := range mods {
		data, err := os.ReadFile(m.path)
		if err != nil {
			return err
		}
		if err := c.File(fmt.Sprintf("modules/%02d-%s.ko", i, m.name), 0o644, data); err != nil {
			return err
		}
	}
	if err := c.Close(); err != nil {
		return err
	}
	return zw.Close()
}
