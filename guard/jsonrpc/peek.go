package jsonrpc

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Header is what the proxy needs to route a message: its kind, id and
// method. Peek fills it without copying params or result, so forwarding a
// large message costs one scan, not a copy.
type Header struct {
	Kind   Kind
	ID     json.RawMessage
	Method string
}

type present bool

func (p *present) UnmarshalJSON([]byte) error { *p = true; return nil }

type skip struct{}

func (*skip) UnmarshalJSON([]byte) error { return nil }

type header struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  skip            `json:"params"`
	Result  present         `json:"result"`
	Error   present         `json:"error"`
}

// Peek classifies one framed message, with the same checks and errors as
// Parse. On an error the returned Header still carries the id when one
// could be read, so the error response can go to the right request.
func Peek(line []byte) (Header, error) {
	b := bytes.TrimSpace(line)
	if len(b) == 0 || b[0] != '{' {
		if len(b) > 0 && !json.Valid(b) {
			return Header{}, syntaxErr(b)
		}
		return Header{}, ErrNotObject
	}
	var h header
	if err := json.Unmarshal(b, &h); err != nil {
		// JSON-RPC: when the id cannot be read reliably, the error goes to
		// id null. (The proxy still uses PeekID to attribute a broken
		// response from the server to the request waiting for it.)
		return Header{}, err
	}
	out := Header{ID: h.ID, Method: h.Method}
	// Validate UTF-8 after decoding: encoding/json would silently replace
	// bad bytes with U+FFFD, which is a change a transparent proxy must not make.
	if !utf8.Valid(b) {
		return out, ErrInvalidUTF8
	}
	if h.JSONRPC != Version {
		return out, ErrBadVersion
	}
	if len(h.ID) > 0 && !validID(h.ID) {
		out.ID = nil
		return out, ErrBadID
	}
	switch {
	case h.Method != "" && hasID(h.ID):
		out.Kind = KindRequest
	case h.Method != "":
		out.Kind = KindNotification
	case bool(h.Result) || bool(h.Error):
		out.Kind = KindResponse
	default:
		return out, ErrNoMethodOrResult
	}
	return out, nil
}

func validID(id json.RawMessage) bool {
	switch id[0] {
	case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// PeekID finds the top-level "id" of a message that is too large or too
// broken to decode whole, reading only as far as it must. It returns nil
// when it cannot tell.
func PeekID(b []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil
		}
		if k == "id" {
			var id json.RawMessage
			if dec.Decode(&id) != nil || !validID(id) {
				return nil
			}
			return id
		}
		var v skip
		if dec.Decode(&v) != nil {
			return nil
		}
	}
	return nil
}
