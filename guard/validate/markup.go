package validate

import (
	"html"
	"strings"
)

// Content that means the same reads the same: a model reads "Ignore
// **all** previous instructions", "Ignore <b>all</b> previous
// instructions", "ig&#110;ore all previous instructions" and the same
// words in a code fence as the plain sentence, so the content checks read
// each text also with its markup reduced.

// markupBytes are the characters markup is written with; a text without
// any has nothing to reduce. (A Markdown backslash escape is of one of
// them; a JSON escape's backslash is not markup.)
const markupBytes = "*_~`<&["

// hasMarkup reports whether s may hold markup.
func hasMarkup(s string) bool { return strings.ContainsAny(s, markupBytes) }

// blockTags are the HTML elements a renderer breaks a line at: they read
// as a space, where an inline tag (<b>, <span>) reads as nothing.
var blockTags = map[string]bool{
	"br": true, "p": true, "div": true, "li": true, "ul": true, "ol": true, "tr": true, "td": true,
	"th": true, "table": true, "h1": true, "h2": true, "h3": true, "h4": true, "h5": true, "h6": true,
	"hr": true, "pre": true, "blockquote": true, "section": true, "article": true,
}

// Demarkup returns the readings of s with its markup reduced: HTML
// comments and tags removed (a block tag read as a space), character
// references decoded, Markdown links and images read as their text
// ("[Ignore all](u) previous" is "Ignore all previous"), emphasis,
// strike-through, code spans and fences and backslash escapes removed
// ("ig**no**re" is "ignore"), underscores read as spaces. It returns nil
// when s has no markup, or when reducing it changes nothing.
func Demarkup(s string) []string {
	if !hasMarkup(s) {
		return nil
	}
	t := stripLinks(stripTags(s))
	if strings.ContainsRune(t, '&') {
		t = html.UnescapeString(t)
	}
	t = strings.ReplaceAll(t, "```", " ")
	if r := emphasis.Replace(t); r != s {
		return []string{r}
	}
	return nil
}

// emphasis removes Markdown's markers: "**all**" is "all", "`x`" is "x".
// An underscore reads as a space ("ignore_all_previous" is three words):
// one reading is enough, as every reading costs a pass of every pattern.
var emphasis = strings.NewReplacer(`\*`, "", `\_`, " ", "**", "", "__", " ", "~~", "", "*", "", "_", " ", "`", "", "\\", "")

// stripTags removes HTML comments and tags (a "<" followed by a letter,
// "/" or "!", up to the next ">", at most 256 bytes on).
func stripTags(s string) string {
	if !strings.ContainsRune(s, '<') {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c != '<' || i+1 >= len(s) {
			b.WriteByte(c)
			i++
			continue
		}
		if strings.HasPrefix(s[i:], "<!--") {
			end := strings.Index(s[i+4:], "-->")
			if end < 0 {
				i = len(s) // an open comment hides the rest
				continue
			}
			i += 4 + end + 3
			continue
		}
		n := s[i+1]
		if !(n == '/' || n == '!' || n >= 'a' && n <= 'z' || n >= 'A' && n <= 'Z') {
			b.WriteByte(c)
			i++
			continue
		}
		end := strings.IndexByte(s[i+1:min(len(s), i+257)], '>')
		if end < 0 {
			b.WriteByte(c)
			i++
			continue
		}
		tag := s[i+1 : i+1+end]
		if blockTags[tagName(tag)] {
			b.WriteByte(' ')
		}
		i += 1 + end + 1
	}
	return b.String()
}

// tagName returns the lower-cased element name of a tag's inside ("/p" and
// "br /" are p and br).
func tagName(tag string) string {
	tag = strings.TrimLeft(tag, "/! \t")
	end := strings.IndexAny(tag, " \t\n/")
	if end >= 0 {
		tag = tag[:end]
	}
	return strings.ToLower(tag)
}

// stripLinks reads Markdown links and images as their text, as a renderer
// shows them: "[text](url)", "![text](url)" and "[text][ref]" are "text".
// The text is at most 256 bytes, the target 2048, neither nested.
func stripLinks(s string) string {
	if !strings.Contains(s, "](") && !strings.Contains(s, "][") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		at := i
		if s[i] == '!' && i+1 < len(s) && s[i+1] == '[' {
			at = i + 1
		}
		if s[at] == '[' {
			if text, end, ok := mdLink(s, at); ok {
				b.WriteString(text)
				i = end
				continue
			}
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// mdLink reads the link whose "[" is at s[i]: its text and the index
// after its target.
func mdLink(s string, i int) (text string, end int, ok bool) {
	closeText := strings.IndexAny(s[i+1:min(len(s), i+1+256)], "[]")
	if closeText < 0 || s[i+1+closeText] != ']' {
		return "", 0, false
	}
	j := i + 1 + closeText + 1
	if j >= len(s) || s[j] != '(' && s[j] != '[' {
		return "", 0, false
	}
	opener, closer := s[j], byte(')')
	if opener == '[' {
		closer = ']'
	}
	depth := 0 // a URL may hold balanced parentheses
	for k := j + 1; k < min(len(s), j+1+2048); k++ {
		switch s[k] {
		case opener:
			depth++
		case closer:
			if depth == 0 {
				return s[i+1 : i+1+closeText], k + 1, true
			}
			depth--
		}
	}
	return "", 0, false
}
