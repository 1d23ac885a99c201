//go:build linux

package launch_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/launch"
	_ "github.com/mcpguard/mcpguard/internal/testenv" // -bpf, which scripts/vmtest passes
)

// TestLimits: a server that starts threads without end, or allocates
// memory without end, is stopped at its limit and the session ends with
// the reason; the oracle is the server's own progress (it never reports
// more than the limit) and that it was killed. Before issue 31 the test
// itself had to stop 3000 threads.
func TestLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits launch.Limits
		step   [2]string
		rule   string
		most   int
	}{
		{"tasks", launch.Limits{Tasks: 64}, [2]string{"threads", "3000"}, launch.RuleLimitTasks, 64},
		{"memory", launch.Limits{MemoryMiB: 64}, [2]string{"alloc", "1024"}, launch.RuleLimitMemory, 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := rootSpec(t, t.TempDir())
			lim, err := launch.NewLimiter(tc.limits)
			require.NoError(t, err)
			defer lim.Close()
			breached := make(chan string, 1)
			lim.Watch(func(rule, why string) { breached <- rule + ": " + why })
			self, err := os.Executable()
			require.NoError(t, err)
			raw, _ := json.Marshal([][2]string{tc.step})
			cmd := exec.Command(self)
			cmd.Env = append(os.Environ(), stepsEnv+"="+string(raw))
			spec.Reach = []string{self}
			lim.Attach(cmd, &spec)
			l, err := launch.Prepare(cmd, spec, launch.Options{})
			require.NoError(t, err)
			defer l.Close()
			start := time.Now()
			out, err := cmd.CombinedOutput()
			t.Logf("after %v: %v\n%s", time.Since(start), err, tail(string(out), 400))
			assert.Error(t, err, "the server was stopped")
			for _, l := range strings.Split(string(out), "\n") {
				f := strings.Fields(l)
				if len(f) >= 2 && (f[0] == "threads" || f[0] == "alloc") {
					n, _ := strconv.Atoi(f[1])
					assert.LessOrEqual(t, n, tc.most, "the server went past its limit: %s", l)
				}
			}
			select {
			case why := <-breached:
				assert.True(t, strings.HasPrefix(why, tc.rule), why)
				assert.Equal(t, strings.TrimPrefix(why, tc.rule+": "), lim.Breach())
			case <-time.After(5 * time.Second):
				t.Fatal("no breach reported")
			}
		})
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
