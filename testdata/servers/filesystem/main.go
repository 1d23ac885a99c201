// Command filesystem is the corpus's benign filesystem MCP server: the tools
// of @modelcontextprotocol/server-filesystem, strictly confined to its roots
// (--ws DIR and positional arguments). See testdata/servers/README.md.
package main

import (
	"fmt"
	"os"

	"github.com/mcpguard/mcpguard/lab/corpus/tools"
)

func main() {
	cfg, err := tools.Parse("filesystem", os.Args[1:], os.Stderr, nil)
	if err != nil {
		os.Exit(2)
	}
	fsys, err := tools.NewFS(cfg.Roots)
	if err != nil {
		fmt.Fprintf(os.Stderr, "filesystem: %v\n", err)
		os.Exit(2)
	}
	tools.Main("filesystem", fsys.Tools())
}
