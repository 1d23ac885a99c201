package jsonrpc

import (
	"encoding/json"
)

// Header is what the proxy needs to route a message: its kind, id and
// method. Peek fills it without copying params or result, so forwarding a
// large message costs one scan, not a copy.
type Header struct {
	Kind   Kind
	ID     json.RawMessage
	Method string
}

// Peek classifies one framed message, with the same checks and errors as
// Parse. On an error the returned Header still carries the id when one
// could be read, so the error response can go to the right request.
func Peek(line []byte) (Header, error) {
	var sc Scanner
	env, err := sc.Scan(line)
	return Header{Kind: env.Kind, ID: json.RawMessage(env.ID.In(line)), Method: env.MethodName}, err
}

func validID(id json.RawMessage) bool {
	switch id[0] {
	case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// PeekID finds the top-level "id" of a message that is too large or too
// broken to read whole, reading only as far as it must. It returns nil
// when it cannot tell.
func PeekID(b []byte) json.RawMessage {
	s := Scanner{b: b}
	s.ws()
	if s.pos >= len(b) || b[s.pos] != '{' {
		return nil
	}
	s.pos++
	for {
		s.ws()
		if s.pos >= len(b) || b[s.pos] != '"' {
			return nil
		}
		k := s.pos
		if _, err := s.str(); err != nil {
			return nil
		}
		isID := unescapedIs(b[k:s.pos], "id")
		s.ws()
		if s.pos >= len(b) || b[s.pos] != ':' {
			return nil
		}
		s.pos++
		s.ws()
		v := s.pos
		if err := s.value(); err != nil {
			return nil
		}
		if isID {
			id := b[v:s.pos]
			if !validID(id) || s.err != nil {
				return nil
			}
			return json.RawMessage(id)
		}
		s.ws()
		if s.pos >= len(b) || b[s.pos] != ',' {
			return nil
		}
		s.pos++
	}
}
