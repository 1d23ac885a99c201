// Command objcmp exits 0 when two BPF ELF objects load the same programs,
// maps and BTF types (package objcmp), and 1 with the differences when not.
//
//	go run ./lab/objcmp/cmd/objcmp a.o b.o
package main

import (
	"fmt"
	"os"

	"github.com/mcpguard/mcpguard/lab/objcmp"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: objcmp A.o B.o")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "objcmp:", err)
		os.Exit(1)
	}
}

func run(pa, pb string) error {
	a, err := os.Open(pa)
	if err != nil {
		return err
	}
	defer a.Close()
	b, err := os.Open(pb)
	if err != nil {
		return err
	}
	defer b.Close()
	diffs, err := objcmp.Diff(a, b)
	if err != nil {
		return err
	}
	for _, d := range diffs {
		fmt.Fprintln(os.Stderr, d)
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%s and %s differ", pa, pb)
	}
	return nil
}
