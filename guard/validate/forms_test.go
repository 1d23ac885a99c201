package validate

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestForms: the forms a decoding or normalising server turns a value
// into, each decoding and normalisation applied to what the other gave.
func TestForms(t *testing.T) {
	assert.Nil(t, Forms("plain/ascii.txt", true))
	assert.Nil(t, Forms("100%", true), "not an escape")
	assert.Nil(t, Forms("..%2f", false), "no decoding asked")
	assert.Equal(t, []string{"../x"}, Forms("..%2fx", true))
	assert.Equal(t, []string{"%2e%2e/x", "../x"}, Forms("%252e%252e/x", true))
	assert.Equal(t, []string{"../x"}, Forms("\uff0e\uff0e\uff0fx", true))
	assert.Equal(t, []string{"../x"}, Forms("\u2025/x", false))
	// A fullwidth percent sign normalises to an escape, which decodes.
	assert.Equal(t, []string{"%2e%2e/x", "../x"}, Forms("\uff05\uff12\uff45\uff05\uff12\uff45/x", true))
	assert.True(t, slices.Contains(Forms("\uff0e\uff0e%2fx", true), "../x"))
}

// FuzzForms: Forms never returns s itself, a repeated form or more than
// maxForms forms, and ASCII without "%" has none.
func FuzzForms(f *testing.F) {
	for _, s := range []string{"..%2f", "%252e", "\uff0e\uff0e\uff0f", "\u2025", "a%zz", "\uff05\uff12\uff45"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, decode bool) {
		got := Forms(s, decode)
		if len(got) > maxForms {
			t.Fatalf("%d forms", len(got))
		}
		for i, g := range got {
			if g == s || slices.Contains(got[i+1:], g) {
				t.Fatalf("form %q repeated in %q", g, got)
			}
		}
		if !mayHaveForms(s, decode) && got != nil {
			t.Fatalf("%q has forms %q", s, got)
		}
	})
}
