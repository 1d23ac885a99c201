// Command shell is the corpus's benign shell MCP server: it runs a fixed
// allow-list of programs (no shell) in the workspace. See
// testdata/servers/README.md.
package main

import (
	"os"

	"github.com/mcpguard/mcpguard/lab/corpus/tools"
)

func main() {
	cfg, err := tools.Parse("shell", os.Args[1:], os.Stderr, nil)
	if err != nil {
		os.Exit(2)
	}
	s, err := tools.NewShell(cfg.WS())
	if err != nil {
		tools.Exit("shell", err)
	}
	s.Timeout = cfg.Scale(s.Timeout)
	tools.Main("shell", s.Tools())
}
