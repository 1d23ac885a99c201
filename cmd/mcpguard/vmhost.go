package main

import "fmt"

// errVMHost is what `mcpguard vm` says on a host that is not Linux: the
// command builds a Linux init, boots Debian's kernel under qemu (TCG),
// shares the host's root read-only over 9p and runs the host's binaries
// inside, none of which a macOS or Windows host can give it.
func errVMHost(goos string) error {
	return fmt.Errorf("needs a Linux host (it boots Debian's kernel under qemu and runs this host's Linux binaries inside over 9p); this is %s: run it on a Linux machine or inside a Linux VM", goos)
}
