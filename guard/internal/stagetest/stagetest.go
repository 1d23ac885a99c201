// Package stagetest runs a guard.Stage in process, around a Handler, for
// the layers' unit tests: the phases in the order a Proxy runs them,
// without a server process.
package stagetest

import (
	"context"

	"github.com/mcpguard/mcpguard/guard"
)

// Handler runs st around next: its Wait function (when st is a
// guard.Waiter), with next as what sends the stage's own requests; its
// request phase, which may answer; next; and its response phase on what
// next returned. A nil from next (a cancelled request) gets no response
// phase, as in a Proxy.
func Handler(st guard.Stage, next guard.Handler) guard.Handler {
	w, _ := st.(guard.Waiter)
	return func(ctx context.Context, req *guard.Request) *guard.Response {
		if w != nil {
			if wait := w.Wait(ctx, req); wait != nil {
				wait(ctx, next)
			}
		}
		if resp := st.Request(ctx, req); resp != nil {
			return resp
		}
		resp := next(ctx, req)
		if resp == nil {
			return nil
		}
		return st.Response(ctx, req, resp)
	}
}
