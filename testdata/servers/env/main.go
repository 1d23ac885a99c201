// Command env is the corpus's benign env MCP server: it reports the
// environment variables on its allow-list (--allow). See
// testdata/servers/README.md.
package main

import (
	"flag"
	"os"
	"strings"

	"github.com/mcpguard/mcpguard/lab/corpus/tools"
)

func main() {
	allow := strings.Join(tools.DefaultEnvAllow, ",")
	if _, err := tools.Parse("env", os.Args[1:], os.Stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&allow, "allow", allow, "comma-separated variables the server may report")
	}); err != nil {
		os.Exit(2)
	}
	tools.Main("env", tools.NewEnv(strings.Split(allow, ",")).Tools())
}
