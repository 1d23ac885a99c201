// Package jsonrpc holds the JSON-RPC 2.0 message type and the newline-delimited
// framing that MCP's stdio transport uses.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Standard JSON-RPC 2.0 error codes, and the ones mcpguard adds in the
// implementation-defined server-error range. MCP reserves -32020 to -32099
// and already uses -32002 (resource not found), so ours sit at -32010 on.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603

	// CodeDenied: a defence layer refused the request; the server never saw it.
	CodeDenied = -32010
	// CodeServerExited: the server process ended before it answered.
	CodeServerExited = -32011
	// CodeTooLarge: the message is over the configured size limit.
	CodeTooLarge = -32012
)

// Version is the only protocol version a message may carry.
const Version = "2.0"

// Message is any JSON-RPC 2.0 message: request, notification or response.
// ID, Params and Result stay raw so that the proxy forwards them unchanged.
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// Error is a JSON-RPC error object.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message) }

// Kind tells what a message is.
type Kind int

// Message kinds.
const (
	KindInvalid Kind = iota
	KindRequest
	KindNotification
	KindResponse
)

func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindNotification:
		return "notification"
	case KindResponse:
		return "response"
	}
	return "invalid"
}

// Kind classifies m. A message with a method is a request (with an id, null
// included: servers answer it) or a notification (without); a message with a
// result or error is a response.
func (m *Message) Kind() Kind {
	switch {
	case m.Method != "" && len(m.ID) > 0:
		return KindRequest
	case m.Method != "":
		return KindNotification
	case m.Result != nil || m.Error != nil:
		return KindResponse
	}
	return KindInvalid
}

func hasID(id json.RawMessage) bool { return len(id) > 0 && !bytes.Equal(id, []byte("null")) }

// Sentinel errors returned by Parse; callers branch on them to choose the
// JSON-RPC error code.
var (
	ErrInvalidUTF8      = errors.New("message is not valid UTF-8")
	ErrNotObject        = errors.New("message is not a JSON object")
	ErrBadVersion       = errors.New(`message lacks "jsonrpc": "2.0"`)
	ErrBadID            = errors.New("id must be a string, a number or null")
	ErrNoMethodOrResult = errors.New("message has neither method nor result nor error")
)

// Parse decodes and checks one framed message with the Scanner (see Scan
// for the errors). ID, Params and Result alias line.
func Parse(line []byte) (*Message, error) {
	var sc Scanner
	env, err := sc.Scan(line)
	var se *SyntaxError
	if errors.As(err, &se) || errors.Is(err, ErrNotObject) || errors.Is(err, ErrTooDeep) {
		return nil, err
	}
	m := &Message{ID: json.RawMessage(env.ID.In(line)), Method: env.MethodName,
		Params: json.RawMessage(env.Params.In(line)), Result: json.RawMessage(env.Result.In(line))}
	if err == nil || !errors.Is(err, ErrBadVersion) {
		m.JSONRPC = Version
	}
	if env.Error.Present() && err == nil {
		var e Error
		if uerr := json.Unmarshal(env.Error.In(line), &e); uerr != nil {
			return m, fmt.Errorf("%w: %v", ErrBadError, uerr)
		}
		m.Error = &e
	}
	return m, err
}

// ErrorCode maps an error from Scan or Parse to the JSON-RPC code a peer
// should get.
func ErrorCode(err error) int {
	var se *SyntaxError
	var jse *json.SyntaxError
	switch {
	case errors.As(err, &se), errors.As(err, &jse), errors.Is(err, ErrInvalidUTF8), errors.Is(err, ErrLoneSurrogate):
		return CodeParseError
	}
	return CodeInvalidRequest
}

// NewError builds an error response to id.
func NewError(id json.RawMessage, code int, msg string, data any) *Message {
	e := &Error{Code: code, Message: msg}
	if data != nil {
		if b, err := json.Marshal(data); err == nil {
			e.Data = b
		}
	}
	if !hasID(id) {
		id = json.RawMessage("null")
	}
	return &Message{JSONRPC: Version, ID: id, Error: e}
}

// Marshal encodes m without a trailing newline.
func (m *Message) Marshal() ([]byte, error) { return json.Marshal(m) }
