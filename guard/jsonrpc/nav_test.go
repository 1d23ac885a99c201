package jsonrpc_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

func TestFilterMember(t *testing.T) {
	obj := []byte(`{"tools" : [ {"name":"a"} , {"name":"b"}, "c" ], "nextCursor":"x"}`)
	out, removed, ok := jsonrpc.FilterMember(obj, "tools", func(el []byte) bool { return string(el) != `{"name":"b"}` })
	require.True(t, ok)
	assert.True(t, removed)
	assert.JSONEq(t, `{"tools":[{"name":"a"},"c"],"nextCursor":"x"}`, string(out))
	same, removed, ok := jsonrpc.FilterMember(obj, "tools", func([]byte) bool { return true })
	assert.True(t, ok)
	assert.False(t, removed)
	assert.Equal(t, string(obj), string(same), "nothing refused: the object itself")
	_, _, ok = jsonrpc.FilterMember(obj, "nextCursor", func([]byte) bool { return true })
	assert.False(t, ok, "not an array")
	_, _, ok = jsonrpc.FilterMember(obj, "Tools", func([]byte) bool { return true })
	assert.False(t, ok, "keys are exact")
}

// FuzzNav: on whatever value the Scanner accepts, Members, Member and
// Elements read what encoding/json decodes (every key, unescaped, with
// its value; every element), and FilterMember's output is a value the
// Scanner accepts that decodes to the object with that array filtered.
// The layers read results in place with these, so a difference would be
// a result judged otherwise than the client reads it.
func FuzzNav(f *testing.F) {
	f.Add([]byte(`{"tools":[{"name":"x"},{"name":"y"},3],"nextCursor":null}`))
	f.Add([]byte(` { "a\u0062" : [ 1 , "]" , {"}":[]} ] , "c":"\"" } `))
	f.Add([]byte("[\r\n1.5e3,\t\"x\",[],{}]"))
	f.Add([]byte(`"plain"`))
	f.Fuzz(func(t *testing.T, v []byte) {
		var sc jsonrpc.Scanner
		if sc.Value(v) != nil {
			return
		}
		var decoded any
		require.NoError(t, decodeNumbers(v, &decoded))
		switch d := decoded.(type) {
		case map[string]any:
			navObject(t, v, d)
		case []any:
			var got []any
			jsonrpc.Elements(v, func(el jsonrpc.Span) bool {
				var e any
				require.NoError(t, decodeNumbers(el.In(v), &e), "element %q of %q", el.In(v), v)
				got = append(got, e)
				return true
			})
			assert.Equal(t, len(d), len(got), "elements of %q", v)
			if len(d) > 0 {
				assert.Equal(t, d, got)
			}
		default:
			jsonrpc.Members(v, func(string, jsonrpc.Span) bool { t.Fatalf("members of a non-object %q", v); return false })
			jsonrpc.Elements(v, func(jsonrpc.Span) bool { t.Fatalf("elements of a non-array %q", v); return false })
		}
	})
}

// navObject checks the object v (decoded as d) member by member, and
// filters each array member, keeping every other element.
func navObject(t *testing.T, v []byte, d map[string]any) {
	got := map[string]any{}
	jsonrpc.Members(v, func(k string, val jsonrpc.Span) bool {
		var e any
		require.NoError(t, decodeNumbers(val.In(v), &e), "member %q of %q", k, v)
		got[k] = e
		return true
	})
	assert.Equal(t, d, got, "members of %q", v)
	for k, want := range d {
		sameValue(t, want, jsonrpc.Member(v, k).In(v), "member "+k)
		arr, isArr := want.([]any)
		i := 0
		out, removed, ok := jsonrpc.FilterMember(v, k, func([]byte) bool { i++; return i%2 == 1 })
		require.Equal(t, isArr, ok, "FilterMember %q of %q", k, v)
		if !ok {
			continue
		}
		assert.Equal(t, len(arr) > 1, removed)
		var sc jsonrpc.Scanner
		require.NoError(t, sc.Value(out), "filtered %q of %q", out, v)
		var kept []any
		for j, el := range arr {
			if j%2 == 0 {
				kept = append(kept, el)
			}
		}
		if kept == nil {
			kept = []any{}
		}
		filtered := map[string]any{}
		for kk, vv := range d {
			filtered[kk] = vv
		}
		filtered[k] = kept
		var back any
		require.NoError(t, decodeNumbers(out, &back))
		assert.Equal(t, filtered, back, "filtered %q of %q", out, v)
	}
}
