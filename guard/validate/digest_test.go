package validate

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// FuzzSortedDigest: the in-place encoding is byte for byte what
// json.Marshal makes of json.Unmarshal into an interface (the form pinned
// digests were made of), and fails where json.Unmarshal does.
func FuzzSortedDigest(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"path":{"type":"string","description":"a <path> & more"},"n":{"type":"number","default":1.50e3}},"required":["path"]}`,
		`{"b":1,"a":[1e-7,1e21,-0,0.000001,123456789012345678901234,"\u2028\ud83d\ude00"],"\u0061b":null,"c":{"z":true,"y":false}}`,
		`[1e400]`, `"x"`, ` 12 `, `{"k\"ey":"v","k":"w"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var sc jsonrpc.Scanner
		if _, err := sc.Scan(append(append([]byte(`{"jsonrpc":"2.0","id":1,"result":`), data...), '}')); err != nil {
			return
		}
		if !json.Valid(data) {
			return // not one value (`{},"":[]` scans as result and a member): no span is that
		}
		got, ok := appendSorted(nil, data)
		var v any
		uerr := json.Unmarshal(data, &v)
		require.Equal(t, uerr == nil, ok, "%q: %v", data, uerr)
		if !ok {
			return
		}
		want, err := json.Marshal(v)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "%q", data)
	})
}
