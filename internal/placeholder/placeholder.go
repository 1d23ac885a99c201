// Package placeholder expands ${NAME} placeholders in JSON documents (policy
// files and AgentBound manifests), so both read a file the same way.
package placeholder

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// pattern matches ${NAME}; a bare "$" (as in a schema pattern "^a+$") is
// left alone.
var pattern = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// Expand replaces every ${NAME} in b with vars[NAME], escaped for a JSON
// string since the placeholder stands inside quotes. An unknown name is an
// error, not an empty string, so a typo cannot widen a root to "/".
func Expand(b []byte, vars map[string]string) ([]byte, error) {
	var missing []string
	out := pattern.ReplaceAllFunc(b, func(m []byte) []byte {
		k := string(m[2 : len(m)-1])
		v, ok := vars[k]
		if !ok {
			missing = append(missing, k)
			return nil
		}
		q, _ := json.Marshal(v)
		return q[1 : len(q)-1]
	})
	if len(missing) > 0 {
		return nil, fmt.Errorf("unknown placeholder(s) ${%s}", strings.Join(missing, "}, ${"))
	}
	return out, nil
}
