package clients

import (
	"path/filepath"
	"regexp"
	"strings"
)

var (
	// ${NAME} and ${NAME:-default}: Claude Code (.mcp.json) and Gemini CLI.
	shellVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}`)
	// $NAME: Gemini CLI.
	bareVar = regexp.MustCompile(`\$([A-Za-z_][A-Za-z0-9_]*)`)
	// ${workspaceFolder}, ${userHome}, ${env:NAME}, ${input:ID}: VS Code
	// and Cursor.
	editorVar = regexp.MustCompile(`\$\{([A-Za-z]+)(?::([^}]*))?\}`)
)

// Expand resolves in v the variables the client expands in an entry
// before it starts the server, as far as they can be known outside the
// client: environment variables, the project directory and the home
// directory. It returns the value and the variables it could not resolve
// (VS Code's ${input:ID}, which the editor asks the user for, and
// ${workspaceFolder} in a user-level file).
func Expand(f File, e Env, v string) (string, []string) {
	var missing []string
	switch f.Client {
	case ClaudeCode, Gemini:
		v = shellVar.ReplaceAllStringFunc(v, func(m string) string {
			sub := shellVar.FindStringSubmatch(m)
			if x := e.getenv(sub[1]); x != "" {
				return x
			}
			if strings.Contains(m, ":-") {
				return sub[2]
			}
			missing = append(missing, m)
			return ""
		})
		if f.Client == Gemini {
			v = bareVar.ReplaceAllStringFunc(v, func(m string) string { return e.getenv(m[1:]) })
		}
	case VSCode, Cursor:
		v = editorVar.ReplaceAllStringFunc(v, func(m string) string {
			sub := editorVar.FindStringSubmatch(m)
			switch sub[1] {
			case "userHome":
				return e.Home
			case "env":
				return e.getenv(sub[2])
			case "pathSeparator":
				return string(filepath.Separator)
			case "workspaceFolder", "workspaceRoot":
				if f.Scope == "project" {
					return e.Project
				}
			}
			missing = append(missing, m)
			return m
		})
	}
	return v, missing
}
