package objcmp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The testdata objects are bpf/decide/decide.bpf.c built by bpf2go with
// clang-19: decide.o and decide-reordered.o from one commit in two clones
// whose paths differ in length (their .BTF orders two forward declarations
// differently: the byte difference CI's check must accept); the others each
// from a one-line edit of the source that a loader would see.
func TestDiff(t *testing.T) {
	for _, tc := range []struct {
		other string
		want  string // a substring of the differences; "" for none
	}{
		{"decide.o", ""},
		{"decide-reordered.o", ""},
		{"decide-constant.o", "program decide differs"},
		{"decide-fieldname.o", "BTF types differ"},
		{"decide-maxentries.o", "map rules differs"},
	} {
		t.Run(tc.other, func(t *testing.T) {
			base := readFile(t, "decide.o")
			other := readFile(t, tc.other)
			if tc.other == "decide-reordered.o" {
				require.NotEqual(t, base, other, "the reordered object must differ in bytes for this case to mean anything")
			}
			diffs, err := Diff(strings.NewReader(base), strings.NewReader(other))
			require.NoError(t, err)
			if tc.want == "" {
				require.Empty(t, diffs)
				return
			}
			require.NotEmpty(t, diffs)
			require.Contains(t, strings.Join(diffs, "\n"), tc.want)
		})
	}
}

func TestDiffRefusesNonELF(t *testing.T) {
	_, err := Diff(strings.NewReader("not an object"), strings.NewReader(readFile(t, "decide.o")))
	require.Error(t, err)
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return string(b)
}
