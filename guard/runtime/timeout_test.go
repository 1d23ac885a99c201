package runtime

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestTimeoutFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env  string
		opt  time.Duration
		want time.Duration
	}{
		{"", 0, 20 * time.Second},
		{"3m", 0, 3 * time.Minute},
		{"3m", 5 * time.Second, 5 * time.Second}, // an explicit option wins
		{"soon", 0, 20 * time.Second},            // not a duration: the default
		{"-1s", 0, 20 * time.Second},
	} {
		t.Setenv(TimeoutEnv, tc.env)
		assert.Equal(t, tc.want, New(Options{Timeout: tc.opt}).o.Timeout, "%s=%q, option %v", TimeoutEnv, tc.env, tc.opt)
	}
}
