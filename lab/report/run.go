package report

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// RunLine is one fact about the run that made a report's inputs: the
// machine, the commit, the settings, a stage's wall and CPU time.
type RunLine struct{ Key, Value string }

// ReadRun reads `key: value` lines (blank lines and lines starting with #
// are skipped), in order. A line without a colon is an error naming the
// file and the line.
func ReadRun(path string) ([]RunLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read run: %w", err)
	}
	defer f.Close()
	var out []RunLine
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("read run %s:%d: want key: value, got %q", path, n, line)
		}
		out = append(out, RunLine{strings.TrimSpace(k), strings.TrimSpace(v)})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read run %s: %w", path, err)
	}
	return out, nil
}
