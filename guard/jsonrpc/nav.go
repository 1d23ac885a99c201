package jsonrpc

// Navigation over a JSON value the Scanner accepted, without decoding it:
// the members of an object and the elements of an array as spans into the
// value, so that a layer reads a large result in place (its memory is the
// result's, not a tree's). The grammar is not checked again.

// Members calls f with each member of the object v (its key, unescaped,
// and its value's span in v), in order, until f returns false. It does
// nothing when v is not an object.
func Members(v []byte, f func(key string, val Span) bool) {
	i := skipWS(v, 0)
	if i >= len(v) || v[i] != '{' {
		return
	}
	i++
	for {
		i = skipWS(v, i)
		if i >= len(v) || v[i] == '}' {
			return
		}
		if v[i] == ',' {
			i++
			continue
		}
		k := i
		i = stringEnd(v, i)
		key := Unquote(v[k:i])
		i = skipWS(v, i)
		i = skipWS(v, i+1) // the colon
		end := valueEnd(v, i)
		if !f(key, Span{i, end}) {
			return
		}
		i = end
	}
}

// Member returns the span of the member key of the object v, or the zero
// Span.
func Member(v []byte, key string) Span {
	var out Span
	Members(v, func(k string, val Span) bool {
		if k == key {
			out = val
			return false
		}
		return true
	})
	return out
}

// Elements calls f with the span of each element of the array v, in
// order, until f returns false. It does nothing when v is not an array.
func Elements(v []byte, f func(el Span) bool) {
	i := skipWS(v, 0)
	if i >= len(v) || v[i] != '[' {
		return
	}
	i++
	for {
		i = skipWS(v, i)
		if i >= len(v) || v[i] == ']' {
			return
		}
		if v[i] == ',' {
			i++
			continue
		}
		end := valueEnd(v, i)
		if !f(Span{i, end}) {
			return
		}
		i = end
	}
}

func skipWS(v []byte, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r') {
		i++
	}
	return i
}

// valueEnd returns the index just past the value that starts at v[i].
func valueEnd(v []byte, i int) int {
	depth := 0
	for i < len(v) {
		switch v[i] {
		case '"':
			i = stringEnd(v, i)
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	return i
}

// FilterMember returns the object obj with its array member key holding
// only the elements keep accepts (each element's bytes, in order), and
// whether keep refused any; out is obj itself when none was. ok is false
// when obj has no such member, or it is not an array.
func FilterMember(obj []byte, key string, keep func(el []byte) bool) (out []byte, removed, ok bool) {
	span := Member(obj, key)
	if !span.Present() || obj[span.Off] != '[' {
		return obj, false, false
	}
	arr := span.In(obj)
	var kept []Span
	Elements(arr, func(el Span) bool {
		if keep(el.In(arr)) {
			kept = append(kept, el)
		} else {
			removed = true
		}
		return true
	})
	if !removed {
		return obj, false, true
	}
	out = make([]byte, 0, len(obj))
	out = append(out, obj[:span.Off]...)
	out = append(out, '[')
	for i, el := range kept {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, el.In(arr)...)
	}
	out = append(out, ']')
	return append(out, obj[span.End:]...), true, true
}
