package audit_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcpguard/mcpguard/guard/audit"
)

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"read_file":          "read_file",
		"café \"résumé\"":    "café \"résumé\"",
		"a\x1b[6A\x1b[Jb":    `a\x1b[6A\x1b[Jb`,
		"x\ny\tz\r":          `x\ny\tz\r`,
		"rtl\u202eoverride":  `rtl\u202eoverride`,
		"bad\xffbyte":        `bad\xffbyte`,
		"\x1b]52;c;aGk=\x07": `\x1b]52;c;aGk=\a`,
	} {
		assert.Equal(t, want, audit.Printable(in), "%q", in)
	}
}
