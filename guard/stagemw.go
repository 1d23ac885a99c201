package guard

import "context"

// StageMiddleware runs st as a Middleware, for code that composes
// Handlers (tests, in-process chains): its Wait function (when st is a
// Waiter) and its request phase before next, its response phase on what
// next returned. A Proxy should take st in Stages instead, where it runs
// without a goroutine per request.
func StageMiddleware(st Stage) Middleware {
	w, _ := st.(Waiter)
	return func(next Handler) Handler {
		return func(ctx context.Context, req *Request) *Response {
			if w != nil {
				if wait := w.Wait(ctx, req); wait != nil {
					wait(ctx, next)
				}
			}
			if resp := st.Request(ctx, req); resp != nil {
				return resp
			}
			resp := next(ctx, req)
			if resp == nil { // cancelled: no response phase, as in a Proxy
				return nil
			}
			return st.Response(ctx, req, resp)
		}
	}
}
