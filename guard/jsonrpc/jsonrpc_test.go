package jsonrpc_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
	_ "github.com/mcpguard/mcpguard/internal/testenv"
)

func readAll(t *testing.T, r *jsonrpc.Reader) ([]string, error) {
	var out []string
	for {
		line, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		out = append(out, string(line))
	}
}

func TestReaderFraming(t *testing.T) {
	long := strings.Repeat("a", 200<<10) // longer than the internal buffer
	in := "one\r\n\n  \ntwo\n" + long + "\nlast-without-newline"
	got, err := readAll(t, jsonrpc.NewReader(iotest.OneByteReader(strings.NewReader(in))))
	require.NoError(t, err)
	assert.Equal(t, []string{"one", "two", long, "last-without-newline"}, got)
}

func TestReaderMax(t *testing.T) {
	in := `{"jsonrpc":"2.0","id":7,"method":"x","params":"` + strings.Repeat("z", 5000) + "\"}\nnext\n"
	r := jsonrpc.NewReader(strings.NewReader(in))
	r.Max = 1000
	head, err := r.Next()
	require.ErrorIs(t, err, jsonrpc.ErrTooLarge)
	assert.Equal(t, json.RawMessage("7"), jsonrpc.PeekID(head))
	line, err := r.Next()
	require.NoError(t, err)
	assert.Equal(t, "next", string(line), "the stream stays usable after a too-large message")
}

func TestPeekKinds(t *testing.T) {
	for line, want := range map[string]jsonrpc.Kind{
		`{"jsonrpc":"2.0","id":1,"method":"m"}`:       jsonrpc.KindRequest,
		`{"jsonrpc":"2.0","method":"m"}`:              jsonrpc.KindNotification,
		`{"jsonrpc":"2.0","id":null,"method":"m"}`:    jsonrpc.KindRequest,
		`{"jsonrpc":"2.0","id":1,"result":null}`:      jsonrpc.KindResponse,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1}}`: jsonrpc.KindResponse,
		` {"jsonrpc":"2.0","id":"x","result":{}}  `:   jsonrpc.KindResponse,
	} {
		h, err := jsonrpc.Peek([]byte(line))
		require.NoError(t, err, line)
		assert.Equal(t, want, h.Kind, line)
	}
}

func TestPeekErrors(t *testing.T) {
	for line, want := range map[string]error{
		`[]`:                                    jsonrpc.ErrNotObject,
		`{"jsonrpc":"1.0","id":1,"method":"m"}`: jsonrpc.ErrBadVersion,
		`{"jsonrpc":"2.0","id":true,"method":"m"}`:  jsonrpc.ErrBadID,
		`{"jsonrpc":"2.0","id":1}`:                  jsonrpc.ErrNoMethodOrResult,
		"{\"jsonrpc\":\"2.0\",\"method\":\"\xc3\"}": jsonrpc.ErrInvalidUTF8,
	} {
		_, err := jsonrpc.Peek([]byte(line))
		assert.ErrorIs(t, err, want, "%q", line)
	}
	_, err := jsonrpc.Peek([]byte(`{"jsonrpc":`))
	var se *jsonrpc.SyntaxError
	assert.ErrorAs(t, err, &se)
	assert.Equal(t, jsonrpc.CodeParseError, jsonrpc.ErrorCode(err))
}

// FuzzFraming: whatever bytes arrive, the Reader never panics, never loses
// or invents bytes, and Peek and Parse agree on what is valid.
func FuzzFraming(f *testing.F) {
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}}\n{\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n"))
	f.Add([]byte("\n\r\n{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{}}"))
	f.Add([]byte("[1,2]\n\xff\xfe\n{\"id\":{}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := jsonrpc.NewReader(bytes.NewReader(data))
		r.Max = 1 << 10
		var total int
		for {
			line, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if errors.Is(err, jsonrpc.ErrTooLarge) {
				jsonrpc.PeekID(line)
				total = -1 << 30
				continue
			}
			require.NoError(t, err)
			require.NotContains(t, string(line), "\n")
			total += len(line)
			h, perr := jsonrpc.Peek(line)
			m, merr := jsonrpc.Parse(line)
			require.Equal(t, perr == nil, merr == nil, "Peek and Parse disagree on %q: %v / %v", line, perr, merr)
			if perr == nil {
				require.Equal(t, h.Kind, m.Kind())
				require.Equal(t, string(h.ID), string(m.ID))
				require.Equal(t, h.Method, m.Method)
			}
		}
		if total >= 0 {
			require.LessOrEqual(t, total, len(data))
		}
	})
}
