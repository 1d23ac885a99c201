package validate

import (
	"bytes"
	"encoding/json"
	"math"
	"sort"
	"strconv"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
)

// appendSorted appends v (a JSON value the Scanner accepted) as
// encoding/json writes what json.Unmarshal into an interface makes of it:
// object keys sorted, numbers as float64, strings escaped as Go escapes
// them; the digests of tools that policies pin were made that way, and
// must stay the same. It reads v in place, so a schema of many small
// values costs a small multiple of its size, not a tree; ok is false
// where json.Unmarshal fails (a number beyond float64).
func appendSorted(dst, v []byte) (_ []byte, ok bool) {
	i := 0
	for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r') {
		i++
	}
	if i >= len(v) {
		return dst, false
	}
	v = v[i:]
	switch c := v[0]; {
	case c == '{':
		return appendSortedObject(dst, v)
	case c == '[':
		dst = append(dst, '[')
		ok = true
		n := 0
		jsonrpc.Elements(v, func(el jsonrpc.Span) bool {
			if n > 0 {
				dst = append(dst, ',')
			}
			n++
			dst, ok = appendSorted(dst, el.In(v))
			return ok
		})
		return append(dst, ']'), ok
	case c == '"':
		b, err := json.Marshal(jsonrpc.Unquote(bytes.TrimRight(v, " \t\r\n")))
		return append(dst, b...), err == nil
	case c == 't', c == 'f', c == 'n':
		return append(dst, bytes.TrimRight(v, " \t\r\n")...), true
	}
	f, err := strconv.ParseFloat(string(bytes.TrimRight(v, " \t\r\n")), 64)
	if err != nil {
		return dst, false
	}
	return appendGoFloat(dst, f), true
}

// member is an object's member as offsets into the object: 16 bytes each,
// so that sorting a wide object costs little more than the object.
type member struct{ koff, kend, voff, vend int32 }

func appendSortedObject(dst, v []byte) ([]byte, bool) {
	var ms []member
	jsonrpc.Members(v, func(_ string, val jsonrpc.Span) bool {
		// the key's span: back from the value over the colon to its quotes
		k := val.Off - 1
		for v[k] != '"' {
			k--
		}
		kend := k + 1
		kstart := k - 1
		for {
			if v[kstart] == '"' {
				n := 0
				for j := kstart - 1; j >= 0 && v[j] == '\\'; j-- {
					n++
				}
				if n%2 == 0 {
					break
				}
			}
			kstart--
		}
		ms = append(ms, member{int32(kstart), int32(kend), int32(val.Off), int32(val.End)})
		return true
	})
	key := func(m member) string { return jsonrpc.Unquote(v[m.koff:m.kend]) }
	sort.Slice(ms, func(a, b int) bool {
		ka, kb := v[ms[a].koff+1:ms[a].kend-1], v[ms[b].koff+1:ms[b].kend-1]
		if bytes.IndexByte(ka, '\\') < 0 && bytes.IndexByte(kb, '\\') < 0 {
			return bytes.Compare(ka, kb) < 0
		}
		return key(ms[a]) < key(ms[b])
	})
	dst = append(dst, '{')
	ok := true
	for i, m := range ms {
		if i > 0 {
			dst = append(dst, ',')
		}
		b, err := json.Marshal(key(m))
		if err != nil {
			return dst, false
		}
		dst = append(append(dst, b...), ':')
		if dst, ok = appendSorted(dst, v[m.voff:m.vend]); !ok {
			return dst, false
		}
	}
	return append(dst, '}'), true
}

// appendGoFloat formats f as encoding/json does.
func appendGoFloat(dst []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}
