// Command fs-naive is the filesystem server with the naive confinement many
// real servers shipped with (not malicious, vulnerable): the raw path must
// start with a root, and is cleaned only afterwards, so
// ROOT/../../x escapes; symlinks inside a root are followed. The harm of
// every attack on it is visible in the tool-call arguments. See
// testdata/servers/README.md.
package main

import (
	"os"

	"github.com/mcpguard/mcpguard/lab/corpus/tools"
)

func main() {
	cfg, err := tools.Parse("fs-naive", os.Args[1:], os.Stderr, nil)
	if err != nil {
		os.Exit(2)
	}
	fsys, err := tools.NewNaiveFS(cfg.Roots)
	if err != nil {
		tools.Exit("fs-naive", err)
	}
	tools.Main("fs-naive", fsys.Tools())
}
