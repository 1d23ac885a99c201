// Command git is the corpus's benign git MCP server on the repository in
// the workspace (created as a small fixture when there is none). See
// testdata/servers/README.md.
package main

import (
	"context"
	"flag"
	"os"

	"github.com/mcpguard/mcpguard/lab/corpus/tools"
)

func main() {
	var initRepo bool
	cfg, err := tools.Parse("git", os.Args[1:], os.Stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&initRepo, "init-repo", true, "create the fixture repository when the workspace has none")
	})
	if err != nil {
		os.Exit(2)
	}
	g, err := tools.NewGit(cfg.WS())
	if err != nil {
		tools.Exit("git", err)
	}
	g.Timeout = cfg.Scale(g.Timeout)
	if initRepo {
		if err := g.InitFixture(context.Background()); err != nil {
			tools.Exit("git", err)
		}
	}
	tools.Main("git", g.Tools())
}
