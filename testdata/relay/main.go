// Command relay is the floor of any stdio proxy, for the standalone
// benchmark: it starts the command after it and copies bytes both ways
// with read(2) and write(2), without looking at them.
package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: relay CMD [ARGS...]")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	go func() {
		copyPlain(in, os.Stdin)
		in.Close()
	}()
	copyPlain(os.Stdout, out)
	cmd.Wait()
}

// copyPlain copies with a buffer of its own, so that no splice(2) or other
// shortcut makes the floor lower than what a real proxy could reach.
func copyPlain(dst io.Writer, src io.Reader) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
