//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcpguard/mcpguard/lab/vm"
)

func cmdVM(ctx context.Context, s stdio, args []string) error {
	fs := newFlags(s, "vm", "[flags] -- CMD [ARGS...]",
		"Runs CMD as root inside a qemu VM (TCG) whose kernel enforces BPF LSM, with the host's\n"+
			"root shared read-only, the current directory and environment kept, and CMD's stdout and\n"+
			"stderr streamed back. Exits with CMD's status. Downloads Debian's kernel into the cache\n"+
			"and installs qemu with apt-get when missing. Example: mcpguard vm -- go test ./... -bpf")
	var (
		cfg      vm.Config
		writable stringList
		debug    bool
		verbose  bool
		stdin    bool
	)
	fs.StringVar(&cfg.Kernel, "kernel", "", "boot this `bzImage` instead of Debian's (modules from <root>/lib/modules beside <root>/boot, or --modules)")
	fs.StringVar(&cfg.Modules, "modules", "", "lib/modules/<release> `dir` for --kernel")
	fs.StringVar(&cfg.Append, "append", "", "extra kernel command line `args`")
	fs.IntVar(&cfg.Memory, "mem", 2048, "guest memory in `MiB`")
	fs.IntVar(&cfg.CPUs, "cpus", 0, "guest CPUs (default: the host's, at most 8)")
	fs.DurationVar(&cfg.Timeout, "timeout", time.Hour, "give up after this long, boot included (0: never)")
	fs.StringVar(&cfg.CacheDir, "cache", "", "cache `dir` for the kernel, init and initramfs (default $XDG_CACHE_HOME/mcpguard/vm)")
	fs.StringVar(&cfg.Init, "init", "", "use this prebuilt static vm/vminit `binary` instead of building it")
	fs.Var(&writable, "writable", "make this host `dir` writable inside, copy on write (repeatable; $HOME and the Go caches always are)")
	fs.BoolVar(&stdin, "stdin", false, "pass standard input to CMD (default: CMD reads /dev/null)")
	fs.BoolVar(&verbose, "v", false, "report progress and boot timing on stderr")
	fs.BoolVar(&debug, "debug", false, "show the kernel console on stderr (implies -v)")
	fs.BoolVar(&debug, "keep", false, "same as --debug")
	flags, cmd := splitDashes(args)
	if err := fs.Parse(flags); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		if cmd != nil {
			return fmt.Errorf("%w: unexpected %q before --", errUsage, fs.Arg(0))
		}
		cmd = fs.Args()
	}
	if len(cmd) == 0 {
		return fmt.Errorf("%w: no command (mcpguard vm [flags] -- CMD [ARGS...])", errUsage)
	}
	if w := goTestFlagOrder(cmd); w != "" {
		fmt.Fprintln(s.err, "mcpguard vm: warning:", w)
	}
	cfg.Writable = writable
	cfg.Stdout, cfg.Stderr = s.out, s.err
	if stdin {
		cfg.Stdin = s.in
	}
	if verbose || debug {
		cfg.Log = s.err
	}
	if debug {
		cfg.Console = s.err
	}
	if wd, err := os.Getwd(); err == nil {
		cfg.Dir = wd
	}
	status, err := vm.Run(ctx, cfg, cmd)
	if err != nil {
		return err
	}
	if status != 0 {
		return &exitCode{code: status}
	}
	return nil
}

// goTestFlagOrder warns about `go test -bpf ./...`: go test stops reading
// packages at the first flag it does not know, so ./... would go to the
// test binary and only the current directory's package would be tested.
func goTestFlagOrder(cmd []string) string {
	if len(cmd) < 3 || filepath.Base(cmd[0]) != "go" || cmd[1] != "test" {
		return ""
	}
	for i, a := range cmd[2:] {
		if a != "-bpf" && a != "--bpf" && a != "-update" && a != "--update" {
			continue
		}
		for _, p := range cmd[2+i+1:] {
			if strings.HasPrefix(p, "./") || strings.HasSuffix(p, "...") {
				return fmt.Sprintf("go test takes %s as a test binary argument after %s, not a package; put packages first (go test %s %s)", p, a, p, a)
			}
		}
	}
	return ""
}
