package promptguard_test

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/classify/promptguard"
	_ "github.com/mcpguard/mcpguard/internal/testenv"
)

func TestSegment(t *testing.T) {
	text := strings.Repeat("word ", 1000) + strings.Repeat("x", 5000) + " tail"
	segs := promptguard.Segment(text, 510, promptguard.EstimateTokens)
	assert.Equal(t, text, strings.Join(segs, ""))
	for _, s := range segs {
		assert.LessOrEqual(t, promptguard.EstimateTokens(s), 510)
	}
	assert.Greater(t, len(segs), 5)
	assert.Equal(t, []string{"short"}, promptguard.Segment("short", 510, promptguard.EstimateTokens))
	assert.Nil(t, promptguard.Segment("", 510, promptguard.EstimateTokens))
}

func FuzzSegment(f *testing.F) {
	f.Add("hello world, this is text", 5)
	f.Add(strings.Repeat("ab", 100)+"  \t\n日本", 3)
	f.Fuzz(func(t *testing.T, s string, budget int) {
		if budget < 1 || budget > 1000 || !utf8.ValidString(s) {
			t.Skip()
		}
		segs := promptguard.Segment(s, budget, promptguard.EstimateTokens)
		require.Equal(t, s, strings.Join(segs, ""))
		for _, seg := range segs {
			require.NotEmpty(t, seg)
			require.LessOrEqual(t, promptguard.EstimateTokens(seg), budget, "%q", seg)
		}
	})
}

// estimateRef is EstimateTokens written plainly, rune by rune.
func estimateRef(text string) int {
	n, run, spaces := 0, 0, 0
	single := true
	for _, r := range text {
		if unicode.IsSpace(r) {
			n += (run + 2) / 3
			run = 0
			spaces++
			single = single && r == ' '
			continue
		}
		if spaces > 1 || spaces == 1 && !single {
			n++
		}
		spaces, single = 0, true
		if r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			run++
			continue
		}
		n += (run + 2) / 3
		run = 0
		n++
	}
	n += (run + 2) / 3
	if spaces > 1 || spaces == 1 && !single {
		n++
	}
	return n
}

func FuzzEstimateTokens(f *testing.F) {
	f.Add("Hello,  world!\t\u00a0日本語 x\u0085y 123456")
	f.Add(" a  b\n")
	f.Fuzz(func(t *testing.T, s string) {
		require.Equal(t, estimateRef(s), promptguard.EstimateTokens(s))
	})
}
