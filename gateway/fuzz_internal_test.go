package gateway

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"testing"
)

// refCanon is canonID the slow way: decode the id, then key it by value.
func refCanon(raw []byte) (string, bool) {
	raw = bytes.TrimSpace(raw)
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if !json.Valid(raw) || dec.Decode(&v) != nil {
		return "", false
	}
	switch x := v.(type) {
	case string:
		return "s" + x, true
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return "", false
		}
		if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return "n" + strconv.FormatInt(int64(f), 10), true
		}
		return "n" + strconv.FormatFloat(f, 'g', -1, 64), true
	}
	return "", false
}

// canonID's fast paths (plain integers, strings without escapes) key an
// id as decoding it would: ids that are one value are one key.
func FuzzCanonID(f *testing.F) {
	for _, s := range []string{`1`, `1.0`, `1e0`, `-0`, `0`, `"1"`, `"a\"b"`, `"é"`, `123456789012345`, `1234567890123456789`, `1e400`, `"\u00e9"`, `-12`, `01`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		want, ok := refCanon(raw)
		if !ok {
			return
		}
		if got := canonID(raw); got != want {
			t.Fatalf("canonID(%s) = %q, decoding gives %q", raw, got, want)
		}
	})
}

// lineSink hands on exactly the non-empty lines of what the proxy wrote,
// however its writes cut them.
func FuzzLineSink(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n{\"b\":2}\r\n\n"), uint8(3))
	f.Add([]byte("x\ny"), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, cut uint8) {
		var got [][]byte
		sink := &lineSink{deliver: func(l []byte) { got = append(got, l) }}
		step := int(cut)%7 + 1
		for i := 0; i < len(data); i += step {
			sink.Write(data[i:min(i+step, len(data))])
		}
		var want [][]byte
		lines := bytes.Split(data, []byte("\n"))
		for _, l := range lines[:len(lines)-1] { // the last has no newline yet
			if l = bytes.TrimRight(l, "\r"); len(l) > 0 {
				want = append(want, l)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%d lines, want %d", len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("line %d: %q, want %q", i, got[i], want[i])
			}
		}
	})
}

// An event id reads back as the stream and event it was made of, and a
// Last-Event-ID that is not one is refused, never misread.
func FuzzEventID(f *testing.F) {
	for _, s := range []string{"0-0", "12-5", "-1-2", "1-", "x", "9223372036854775807-1", "1-2-3", "+1-2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		no, seq, ok := parseEventID(s)
		if !ok {
			return
		}
		if no < 0 || seq < 0 {
			t.Fatalf("%q read as %d-%d", s, no, seq)
		}
		back, _, _ := parseEventID(string(eventID(nil, no, seq)))
		if back != no {
			t.Fatalf("%q: %d does not read back", s, no)
		}
	})
}
