package jsonrpc

import "testing"

// FuzzCompareFolded: the order wide objects are sorted in agrees with
// FoldKey on which keys are one.
func FuzzCompareFolded(f *testing.F) {
	f.Add([]byte("path"), []byte("PATH"))
	f.Add([]byte("k"), []byte("\u212a"))
	f.Add([]byte("ſ"), []byte("S"))
	f.Add([]byte("a"), []byte("ab"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		same := FoldKey(a) == FoldKey(b)
		if (compareFolded(a, b) == 0) != same {
			t.Fatalf("%q %q: compareFolded %d, FoldKey equal %v", a, b, compareFolded(a, b), same)
		}
		if compareFolded(a, b) != -compareFolded(b, a) && !(compareFolded(a, b) > 0 && compareFolded(b, a) < 0) {
			t.Fatalf("%q %q: not antisymmetric", a, b)
		}
	})
}
