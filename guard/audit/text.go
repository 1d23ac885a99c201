package audit

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable is s as a terminal should get it when a server supplied it (a
// tool's name, a file it wrote, a line of that file): control and format
// characters, which a terminal obeys (escape sequences that move the
// cursor, erase the lines above, write the clipboard; newlines that add
// lines of their own), and bytes that are not UTF-8, written as Go
// escapes; everything else as it is. Red team: a tool name erased its own
// scan finding, a changed file erased its own change report.
func Printable(s string) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, notGraphic) < 0 {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case notGraphic(r):
			q := strconv.QuoteRuneToGraphic(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}

func notGraphic(r rune) bool { return !unicode.IsGraphic(r) }
