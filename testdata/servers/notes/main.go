// Command notes is the corpus's benign notes MCP server: 180 synthetic
// fixture notes plus the notes it adds under WS/notes. See
// testdata/servers/README.md.
package main

import (
	"os"

	"github.com/mcpguard/mcpguard/lab/corpus/tools"
)

func main() {
	cfg, err := tools.Parse("notes", os.Args[1:], os.Stderr, nil)
	if err != nil {
		os.Exit(2)
	}
	n, err := tools.NewNotes(cfg.WS())
	if err != nil {
		tools.Exit("notes", err)
	}
	tools.Main("notes", n.Tools())
}
