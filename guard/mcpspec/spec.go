// Package mcpspec is the MCP specification as data: the official schema of
// each version the guard knows (schema/*/schema.json, from the
// specification repository; schema/README.md says which commit and under
// which licence), and a table generated from it of every message type in
// both directions (each request with the result that answers it, each
// notification), with the shape of every object those messages hold.
// The layers give each row a rule; what is not in the table is not MCP.
package mcpspec

//go:generate go run ./internal/gen

import (
	"fmt"
	"slices"
)

// Side is who sends a message.
type Side uint8

// The two sides of a session.
const (
	Client Side = iota + 1
	Server
)

func (s Side) String() string {
	switch s {
	case Client:
		return "client"
	case Server:
		return "server"
	}
	return "?"
}

// Kind is a message's kind in the table.
type Kind uint8

// Message kinds. A result is not a row of its own: it answers a request
// (Message.ResultType).
const (
	Request Kind = iota + 1
	Notification
)

func (k Kind) String() string {
	switch k {
	case Request:
		return "request"
	case Notification:
		return "notification"
	}
	return "?"
}

// Message is one message type: a request (answered by ResultType, sent by
// the other side) or a notification, as one side sends it.
type Message struct {
	From   Side
	Kind   Kind
	Method string
	// Type is the schema's name for the message ("CallToolRequest").
	Type string
	// ResultType is the schema's name for the result that answers a
	// request ("CallToolResult", "EmptyResult").
	ResultType string
	// Task: the request may ask to run as a task (2025-11-25); it is then
	// answered with a CreateTaskResult, and its result comes later through
	// tasks/result.
	Task bool
	// Versions lists the schema versions that have the message.
	Versions []string

	params, result string // nodes
}

// Key names a row: "client request tools/call".
func (m Message) Key() string { return Key(m.From, m.Kind, m.Method) }

// Key names the row of a message sent by from.
func Key(from Side, kind Kind, method string) string {
	return fmt.Sprintf("%s %s %s", from, kind, method)
}

// Messages returns every row of the table.
func Messages() []Message { return slices.Clone(messages) }

// Lookup returns the row of method as from sends it in kind.
func Lookup(from Side, kind Kind, method string) (Message, bool) {
	for _, m := range messages {
		if m.From == from && m.Kind == kind && m.Method == method {
			return m, true
		}
	}
	return Message{}, false
}

// Known reports whether method is a method of the schema at all, in
// either direction or kind.
func Known(method string) bool {
	for _, m := range messages {
		if m.Method == method {
			return true
		}
	}
	return false
}
