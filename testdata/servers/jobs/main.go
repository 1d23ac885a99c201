// Command jobs is the corpus's benign jobs MCP server: a batch worker on
// workspace files that uses worker threads, an in-memory table and System
// V shared memory of its own, within bounds (the benign twins of the
// process cases, BN-PX-*). See testdata/servers/README.md.
package main

import (
	"os"

	"github.com/mcpguard/mcpguard/lab/corpus/tools"
)

func main() {
	cfg, err := tools.Parse("jobs", os.Args[1:], os.Stderr, nil)
	if err != nil {
		os.Exit(2)
	}
	j, err := tools.NewJobs(cfg.WS())
	if err != nil {
		tools.Exit("jobs", err)
	}
	tools.Main("jobs", j.Tools())
}
