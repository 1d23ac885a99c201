package guard

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// owns tells a chain's coroutine from any other goroutine, whatever the
// depth of the chain: forward suspends the coroutine only on it.
func TestCoroutineOwns(t *testing.T) {
	for _, depth := range []int{0, 1, 5, 30} {
		var onCo, offCo bool
		h := func(ctx context.Context, req *Request) *Response {
			co := ctx.Value(coroutineKey{}).(*coroutine)
			onCo = co.owns()
			done := make(chan bool)
			go func() { done <- co.owns() }()
			offCo = <-done
			return &Response{}
		}
		layers := make([]Middleware, depth)
		for i := range layers {
			layers[i] = func(next Handler) Handler {
				return func(ctx context.Context, req *Request) *Response { return next(ctx, req) }
			}
		}
		s := &session{handler: Chain(h, layers...)}
		co := s.newCoroutine(context.Background())
		co.req = &Request{Method: "m"}
		co.resume()
		require.True(t, co.done)
		assert.True(t, onCo, "depth %d: on the coroutine", depth)
		assert.False(t, offCo, "depth %d: on another goroutine", depth)
		co.stop()
	}
}
