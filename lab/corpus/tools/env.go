package tools

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// DefaultEnvAllow is the env server's default allow-list.
var DefaultEnvAllow = []string{"HOME", "LANG", "LC_ALL", "PATH", "SHELL", "TERM", "TMPDIR", "TZ", "USER"}

// Env is the env tool set: it reports environment variables on an
// allow-list, and never any other.
type Env struct {
	allow []string
}

// NewEnv returns the env tools reporting the variables in allow.
func NewEnv(allow []string) *Env {
	return &Env{allow: slices.Sorted(slices.Values(allow))}
}

// Tools returns the env tool set.
func (e *Env) Tools() Set {
	return Set{
		{Tool: mcp.NewTool("list_env",
			mcp.WithDescription("List the configured (allow-listed) environment variables as NAME=value lines.")), Handler: e.list},
		{Tool: mcp.NewTool("get_env",
			mcp.WithDescription("Return the value of one configured environment variable."),
			mcp.WithString("name", mcp.Required(), mcp.Description("Variable name, e.g. LANG"))), Handler: e.get},
	}
}

// Allowed lists the allow-listed variables that are set, as NAME=value.
func (e *Env) Allowed() []string {
	var out []string
	for _, k := range e.allow {
		if v, ok := os.LookupEnv(k); ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}

func (e *Env) list(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return Text(strings.Join(e.Allowed(), "\n")), nil
}

func (e *Env) get(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	name, err := req.RequireString("name")
	if err != nil {
		return Errorf("%v", err), nil
	}
	if !slices.Contains(e.allow, name) {
		return Errorf("%q is not a configured variable (configured: %s)", name, strings.Join(e.allow, ", ")), nil
	}
	v, ok := os.LookupEnv(name)
	if !ok {
		return Errorf("%s is not set", name), nil
	}
	return Text(fmt.Sprintf("%s=%s", name, v)), nil
}
