package guard

import (
	"context"
	"sync/atomic"
)

// The notifications by which a server says that what a client listed is
// out of date.
const (
	ToolsListChanged     = "notifications/tools/list_changed"
	ResourcesListChanged = "notifications/resources/list_changed"
	PromptsListChanged   = "notifications/prompts/list_changed"
)

// Notices counts the list_changed notifications one session's server has
// sent. The proxy counts each before relaying it to the client, and passes
// the counts to the layers in the request's context (see NoticesFrom): a
// layer that keeps a view of the server's tools compares the count with the
// one it saw when it last listed them, and lists again when the server said
// they changed, whether or not the client does. Only these three methods
// are counted, so a server cannot grow it.
type Notices struct {
	tools, resources, prompts atomic.Uint64
}

func (n *Notices) counter(method string) *atomic.Uint64 {
	switch method {
	case ToolsListChanged:
		return &n.tools
	case ResourcesListChanged:
		return &n.resources
	case PromptsListChanged:
		return &n.prompts
	}
	return nil
}

// Add counts one notification of method; other methods are ignored. It
// reports whether method was counted.
func (n *Notices) Add(method string) bool {
	c := n.counter(method)
	if c != nil {
		c.Add(1)
	}
	return c != nil
}

// Count returns how many notifications of method were counted so far; it is
// 0 for a nil Notices and for a method that is not counted.
func (n *Notices) Count(method string) uint64 {
	if n == nil {
		return 0
	}
	if c := n.counter(method); c != nil {
		return c.Load()
	}
	return 0
}

type noticesKey struct{}

// WithNotices returns a context that carries n to the layers. The proxy
// does this for every session; tests of a layer do it to play the server.
func WithNotices(ctx context.Context, n *Notices) context.Context {
	return context.WithValue(ctx, noticesKey{}, n)
}

// NoticesFrom returns the notices of the session ctx belongs to, or nil
// outside a proxy (Count is then 0).
func NoticesFrom(ctx context.Context) *Notices {
	n, _ := ctx.Value(noticesKey{}).(*Notices)
	return n
}
