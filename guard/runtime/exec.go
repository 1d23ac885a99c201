package runtime

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mcpguard/mcpguard/guard/launch"
)

// Interpreters returns what the kernel also executes to start path: its
// ELF interpreter (the dynamic loader), or for a #! script the named
// interpreter (for `#!/usr/bin/env NAME`, also NAME as found in pathEnv)
// and that one's own chain. Each needs the execute right.
func Interpreters(path, pathEnv string) ([]string, error) {
	return interpretersDepth(path, pathEnv, 0)
}

func interpretersDepth(path, pathEnv string, depth int) ([]string, error) {
	// The kernel gives up after a few levels of binfmt recursion too.
	if depth > 4 {
		return nil, fmt.Errorf("interpreter chain of %s too deep", path)
	}
	next, err := interpreterOf(path, pathEnv)
	if err != nil {
		return nil, fmt.Errorf("interpreter of %s: %w", path, err)
	}
	var out []string
	for _, n := range next {
		out = append(out, n)
		more, err := interpretersDepth(n, pathEnv, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}

// interpreterOf returns the direct interpreter(s) of path: nothing for a
// static binary, the PT_INTERP loader for a dynamic one, the #! program
// (and, for env NAME, NAME looked up in pathEnv) for a script.
func interpreterOf(path, pathEnv string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := f.Read(head)
	head = head[:n]
	switch {
	case bytes.HasPrefix(head, []byte("\x7fELF")):
		interp, err := elfInterpreter(f)
		if err != nil || interp == "" {
			return nil, err
		}
		return []string{interp}, nil
	case bytes.HasPrefix(head, []byte("#!")):
		line, _, _ := bufio.NewReader(bytes.NewReader(head[2:])).ReadLine()
		fields := strings.Fields(string(line))
		if len(fields) == 0 {
			return nil, fmt.Errorf("empty #! line")
		}
		out := []string{fields[0]}
		if filepath.Base(fields[0]) == "env" {
			if name := envTarget(fields[1:]); name != "" {
				found, err := lookPath(name, pathEnv, "/")
				if err != nil {
					return nil, err
				}
				// env runs NAME from PATH: NAME executes too.
				out = append(out, found)
			}
		}
		return out, nil
	}
	return nil, nil
}

// ELFInterpreter returns the PT_INTERP loader of the ELF program at path
// ("" for a static one or a file that is not ELF).
func ELFInterpreter(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	magic := make([]byte, 4)
	if _, err := io.ReadFull(f, magic); err != nil || string(magic) != "\x7fELF" {
		return "", nil
	}
	return elfInterpreter(f)
}

func elfInterpreter(f *os.File) (string, error) {
	ef, err := elf.NewFile(f)
	if err != nil {
		return "", err
	}
	for _, p := range ef.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return "", fmt.Errorf("read PT_INTERP: %w", err)
		}
		return string(bytes.TrimRight(b, "\x00")), nil
	}
	return "", nil
}

// directInterpreter is the program that reads the script at path: the
// #! program, or for `#!/usr/bin/env NAME` NAME as found in pathEnv.
func directInterpreter(path, pathEnv string) (string, error) {
	next, err := interpreterOf(path, pathEnv)
	if err != nil || len(next) == 0 {
		return "", err
	}
	return next[len(next)-1], nil
}

// envTarget is the program `env ARGS` runs: the first word that is not an
// option or an assignment (`env -S node --flag` splits its argument).
func envTarget(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-S" || a == "--split-string":
			continue
		case strings.HasPrefix(a, "-S"):
			if f := strings.Fields(a[2:]); len(f) > 0 {
				return f[0]
			}
		case a == "-u" || a == "--unset" || a == "-C" || a == "--chdir":
			i++
		case strings.HasPrefix(a, "-"), strings.Contains(a, "="):
		default:
			return a
		}
	}
	return ""
}

// isScript reports whether path starts with "#!".
func isScript(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, 2)
	n, _ := f.Read(b)
	return n == 2 && string(b) == "#!"
}

// isELF reports whether path is an ELF file.
func isELF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, 4)
	n, _ := f.Read(b)
	return n == 4 && string(b) == "\x7fELF"
}

// ask runs a helper confined, with the resolver's timeout (scaled). The
// helper's program and the chain the kernel runs to start it (its ELF
// loader, its #! interpreter) are executable in its sandbox. With a Cache
// and a witness (the files an answer came from, besides the helper's
// programs and grants), an answer kept from an earlier run is reused
// while those files are unchanged (Cache).
func (r *Resolver) ask(ctx context.Context, scale int, h launch.Helper, witness func(out []byte) []string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, r.o.Timeout*time.Duration(max(scale, 1)))
	defer cancel()
	var more []string
	for _, p := range append([]string{h.Argv[0]}, h.Exec...) {
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if real, err := filepath.EvalSymlinks(p); err == nil && real != p {
			more = append(more, real)
		}
		if chain, err := Interpreters(p, envValue(h.Env, "PATH")); err == nil {
			more = append(more, chain...)
		}
	}
	h.Exec = append(h.Exec, more...)
	cache := r.o.Cache
	if witness == nil {
		cache = nil
	}
	key := ""
	if cache != nil {
		key = helperKey(h)
		if out, ok := cache.get(key); ok {
			return out, nil
		}
	}
	started := time.Now()
	out, err := r.o.Run(ctx, h)
	if err == nil && cache != nil {
		paths := append(append(append([]string{h.Argv[0]}, h.Exec...), h.Read...), witness(out)...)
		cache.put(key, out, started, paths)
	}
	return out, err
}

// systemPrograms are the trees a helper that is a shell script (a version
// manager) may execute from: the system's programs and loaders.
var systemPrograms = []string{"/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/lib", "/lib", "/lib64", "/usr/lib64", "/usr/libexec"}

// helperEnv is a helper's whole environment: PATH with the system's
// program directories after dirs, HOME and LANG of env, and env's
// variables whose names start with one of keep. Nothing else of the
// server's or the user's environment (tokens, keys) reaches a helper.
func helperEnv(env []string, dirs []string, keep ...string) []string {
	path := append(slices.Clone(dirs), "/usr/local/bin", "/usr/bin", "/bin")
	out := []string{"PATH=" + strings.Join(slices.Compact(path), ":")}
	for _, k := range []string{"HOME", "LANG"} {
		if v := envValue(env, k); v != "" {
			out = append(out, k+"="+v)
		}
	}
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if name == "PATH" || name == "HOME" || name == "LANG" {
			continue
		}
		for _, p := range keep {
			if strings.HasPrefix(name, p) {
				out = append(out, kv)
				break
			}
		}
	}
	return out
}
