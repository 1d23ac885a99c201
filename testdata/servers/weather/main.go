// Command weather is the corpus's benign weather MCP server: a client of the
// HTTP API at --weather-url (the harness serves it on 127.0.0.2). See
// testdata/servers/README.md.
package main

import (
	"os"

	"github.com/mcpguard/mcpguard/lab/corpus/tools"
)

func main() {
	cfg, err := tools.Parse("weather", os.Args[1:], os.Stderr, nil)
	if err != nil {
		os.Exit(2)
	}
	w, err := tools.NewWeather(cfg.WeatherURL)
	if err != nil {
		tools.Exit("weather", err)
	}
	w.Client.Timeout = cfg.Scale(w.Client.Timeout)
	tools.Main("weather", w.Tools())
}
