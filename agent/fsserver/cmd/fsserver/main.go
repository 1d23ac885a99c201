// Command fsserver is the repository's MCP filesystem server over stdio:
//
//	fsserver DIR [DIR...]
//
// It serves read_file, write_file, list_directory, search_files and
// list_allowed_directories confined to the given directories.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcpguard/mcpguard/agent/fsserver"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" {
		fmt.Fprintln(os.Stderr, "usage: fsserver DIR [DIR...]\n\nAn MCP filesystem server over stdio, confined to the given directories.")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := fsserver.Serve(ctx, os.Args[1:], os.Stdin, os.Stdout)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "fsserver:", err)
		os.Exit(1)
	}
}
