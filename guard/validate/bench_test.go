package validate

import (
	"path/filepath"
	"testing"
)

// BenchmarkCanonPath times canonicalising an existing workspace path (the
// kernel fast path) and a path whose last components do not exist yet (the
// component walk).
func BenchmarkCanonPath(b *testing.B) {
	_, ws := tree(b)
	for _, c := range []struct{ name, path string }{
		{"exists", filepath.Join(ws, "sub", "b.txt")},
		{"missing", filepath.Join(ws, "sub", "new", "file.txt")},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := CanonPath(c.path, PathOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
