// Command sqlite is the corpus's benign SQLite MCP server (pure-Go
// modernc.org/sqlite) on a database file in the workspace. See
// testdata/servers/README.md.
package main

import (
	"flag"
	"os"
	"path/filepath"

	"github.com/mcpguard/mcpguard/lab/corpus/tools"
	_ "modernc.org/sqlite" // the pure-Go "sqlite" driver
)

func main() {
	var db string
	cfg, err := tools.Parse("sqlite", os.Args[1:], os.Stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&db, "db", "", "database file (default WS/data.db)")
	})
	if err != nil {
		os.Exit(2)
	}
	if db == "" {
		if cfg.WS() == "" {
			tools.Exit("sqlite", tools.ErrNoWorkspace)
		}
		db = filepath.Join(cfg.WS(), "data.db")
	}
	tools.Main("sqlite", tools.NewSQLite(db).Tools())
}
