// Package guard is the forwarding core of mcpguard: a transparent JSON-RPC
// proxy between an MCP client on one side and an MCP server subprocess on the
// other, with one hook point where the defence layers sit as Stages.
package guard

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"

	"github.com/mcpguard/mcpguard/guard/jsonrpc"
	"github.com/mcpguard/mcpguard/internal/feature"
)

// Request is a client-to-server JSON-RPC request as the defence layers see it.
// For tools/call, Tool and Arguments are parsed out of Params; a layer that
// rewrites the arguments assigns Arguments and the core re-encodes Params.
type Request struct {
	Method string
	ID     json.RawMessage
	Params json.RawMessage

	// Tool and Arguments are set for tools/call only.
	Tool      string
	Arguments json.RawMessage

	// Server and Config name the guarded server and the active config, for
	// audit events.
	Server string
	Config string

	state []stateKV
}

type stateKV struct{ key, val any }

// SetState keeps val under key with the request, for a Stage's response
// phase: the core holds the Request in its table of requests in flight,
// so what the request phase learned needs no map or goroutine of its own.
func (r *Request) SetState(key, val any) {
	for i := range r.state {
		if r.state[i].key == key {
			r.state[i].val = val
			return
		}
	}
	r.state = append(r.state, stateKV{key, val})
}

// State returns what SetState kept under key, or nil.
func (r *Request) State(key any) any {
	for _, kv := range r.state {
		if kv.key == key {
			return kv.val
		}
	}
	return nil
}

// Response is what comes back for a Request: a result or an error.
type Response struct {
	Result json.RawMessage
	Error  *jsonrpc.Error

	// The server's own message and what it said, so that an answer no
	// layer changed is relayed byte for byte.
	raw        []byte
	origResult json.RawMessage
	origError  *jsonrpc.Error
}

// Handler answers one request. The core's own handler (what a Waiter's
// wait gets as send) forwards the request to the server and waits for its
// response.
type Handler func(ctx context.Context, req *Request) *Response

// Stage is a defence layer, in two phases, which the core runs without a
// goroutine or a channel per request. A Proxy runs its Stages in order;
// Stages[0] sees a request first and its response last.
//
// Request runs inline on the client's read loop, in the order the client
// sent its messages, so it must not block (no I/O to wait on, no request of
// its own: see Waiter); for a request that waited, the stages from the
// Waiter on run it after the wait, on the request's own goroutine, while
// later requests are judged: Request must be safe for concurrent use. It may rewrite req (Params, or Tool and Arguments
// for tools/call), and the core then forwards the re-serialised request
// instead of the client's bytes; or it may answer the request itself by
// returning a non-nil Response (a denial, see Deny), and the server never
// sees it. Returning nil forwards the request.
//
// Response runs on the server's read loop with the server's answer (or an
// inner stage's). Returning resp unchanged relays the server's own bytes;
// returning another Response, or resp with Result or Error changed,
// relays that instead. It runs only for requests whose Request phase ran
// and did not answer; a request cancelled by the client, or left unanswered
// because the server died, gets no response phase.
//
// req and resp alias the proxy's buffers: a stage that keeps any of their
// byte slices after returning must copy them.
type Stage interface {
	Request(ctx context.Context, req *Request) *Response
	Response(ctx context.Context, req *Request, resp *Response) *Response
}

// Waiter is implemented by a Stage that must sometimes wait before it can
// judge a request: L2 lists the server's tools itself before a call the
// client made unseen, or after notifications/tools/list_changed. Wait is
// called on the client's read loop before Request; it returns nil when
// req needs no waiting (the fast path), or a function that the core runs
// on a goroutine of its own, with send forwarding a request of the stage's
// own to the server (its id must be one no client uses) and returning the
// server's answer, or nil when ctx ends first (the client cancelled req).
// Once that function returned, req goes on through the stage's Request and
// the later stages. The function runs on a goroutine of its own: the
// client's later messages are read, judged and forwarded meanwhile, so a
// wait holds up only the requests whose Wait asked for it. A Waiter that
// needs a later request to wait too (its list is still under way) says so
// from its Wait.
type Waiter interface {
	Wait(ctx context.Context, req *Request) func(ctx context.Context, send Handler)
}

// ServerMessage is a message the server sends on its own: a notification
// (notifications/message, notifications/progress, list_changed, ...) or a
// request to the client (sampling/createMessage, elicitation/create,
// roots/list, ping).
type ServerMessage struct {
	Kind   jsonrpc.Kind // KindRequest or KindNotification
	Method string
	ID     json.RawMessage // requests only
	// Params aliases the proxy's read buffer: valid during the hook's call.
	// A hook that rewrites the message assigns a new value.
	Params json.RawMessage
}

// ServerHook sees every message the server sends on its own before the
// client does, on the server's read loop, so it must not block. It returns
// m itself, unchanged, to relay the server's exact bytes; m with Params
// changed (or another message with the same Kind, Method and ID) to relay
// that, re-serialised; or nil to drop the message. A dropped notification
// is gone. A dropped request is answered to the server with a denial
// (CodeDenied) so that it does not wait for the client. Hooks run in the
// order of Proxy.ServerHooks, each on what the one before returned; a hook
// that panics drops the message. The client's answers to the server's
// requests are relayed unchanged.
type ServerHook func(ctx context.Context, m *ServerMessage) *ServerMessage

// ClientMessage is a message from the client other than a request: a
// notification, or the client's answer to a request the server sent
// (sampling, elicitation, roots, ping, ...).
type ClientMessage struct {
	Kind jsonrpc.Kind // KindNotification or KindResponse
	// Method is the notification's method or, for an answer, the method
	// of the server's request it answers.
	Method string
	ID     json.RawMessage // answers only: the server's request id
	// Params (notifications), Result and Error (answers) alias the
	// proxy's buffer: valid during the call. A judge that rewrites the
	// message assigns new values.
	Params json.RawMessage
	Result json.RawMessage
	Error  *jsonrpc.Error
}

// ClientJudge is implemented by a Stage that also judges what the client
// sends besides requests. The core calls Client on the client's read
// loop, for every Stage that implements it, in order, each on what the
// one before returned, before the server sees the message; it must not
// block. It returns m itself to relay the message as the core read it; m
// with Params, Result or Error changed to relay that, re-serialised; or
// nil to refuse it. A refused notification is dropped; a refused answer
// is replaced by an error answer to the server (CodeDenied), so that the
// server does not wait for it. A ClientJudge that panics refuses the
// message. Only sessions with layers judge: an answer that matches no
// request the server sent is dropped there.
type ClientJudge interface {
	Client(ctx context.Context, m *ClientMessage) *ClientMessage
}

// Logf writes one line to the stderr of the session ctx belongs to (the
// proxy passes its context to the layers), prefixed "mcpguard: ": what an
// operator must see at once, such as a tool removed from a listing. Outside
// a proxy it writes nothing.
func Logf(ctx context.Context, format string, args ...any) {
	if s, ok := ctx.Value(sessionKey{}).(*session); ok {
		s.logf(format, args...)
	}
}

type sessionKey struct{}

// Denial describes why a layer refused a call; it travels to the client as
// the JSON-RPC error's data.
type Denial struct {
	Layer  string `json:"layer"`
	Rule   string `json:"rule"`
	Reason string `json:"reason"`
}

// Deny builds the response a layer returns to refuse a request. The message
// names the layer and the rule so the client (and the operator reading its
// log) can tell which rule to override.
func Deny(layer, rule, reason string) *Response {
	d := Denial{Layer: layer, Rule: rule, Reason: reason}
	data, _ := json.Marshal(d)
	return &Response{Error: &jsonrpc.Error{
		Code:    jsonrpc.CodeDenied,
		Message: fmt.Sprintf(deniedPrefix+"%s rule %s: %s", layer, rule, reason),
		Data:    data,
	}}
}

// ErrKernelRefused is what an L3 backend wraps when the kernel lacks or
// refuses what it needs (EPERM loading a BPF LSM program, no Landlock). The
// guard fails closed on it; tests skip on it with the kernel's reason. It
// is internal/feature's, so that the floor below the guard knows it too.
var ErrKernelRefused = feature.ErrKernelRefused

// Sandbox is an OS-level enforcement backend (layer L3). The core calls
// Prepare before the server starts, so that the server is under policy from
// its first instruction, Started once it has a pid, and Close when the
// session ends.
type Sandbox interface {
	// Name identifies the backend in logs and errors ("ebpf", "landlock").
	Name() string
	// Prepare may change how the server command is started: its path and
	// arguments (a re-exec wrapper), environment, SysProcAttr.
	Prepare(cmd *exec.Cmd) error
	// Started is called with the server's pid right after it started.
	Started(pid int) error
	// Close releases what the sandbox holds; called after the server exited.
	Close() error
}

// deniedPrefix starts the message of every denial (see Deny). mcp-go's
// client keeps only the message of a JSON-RPC error with a code it does not
// know, so callers on that client recognise a denial by it.
const deniedPrefix = "mcpguard: denied by "

// IsDenied reports whether err (from an MCP client call through the proxy)
// is a denial by one of the guard's layers, and returns its message.
func IsDenied(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	msg := err.Error()
	i := strings.Index(msg, deniedPrefix)
	if i < 0 {
		return "", false
	}
	return msg[i:], true
}

// FilterTools rewrites a tools/list result to the tools keep accepts, given
// each tool's raw JSON, keeping the rest of the result (nextCursor, ...). It
// returns nil when the result is not a tools list it can read, or when keep
// accepted every tool: the caller then passes the server's answer on as it
// came. The result is read in place (jsonrpc.Members, Elements): what it
// costs is a copy of the result, whatever its shape.
func FilterTools(result json.RawMessage, keep func(tool json.RawMessage) bool) json.RawMessage {
	out, removed, ok := jsonrpc.FilterMember(result, "tools", func(el []byte) bool { return keep(el) })
	if !ok || !removed {
		return nil
	}
	return out
}
