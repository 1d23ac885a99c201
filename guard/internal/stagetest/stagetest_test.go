package stagetest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/internal/stagetest"
)

// recStage records the phases it runs; it denies tools/call of "bad" and
// waits (sending a request of its own) before tools/call of "unseen".
type recStage struct{ log *[]string }

func (r recStage) Wait(_ context.Context, req *guard.Request) func(context.Context, guard.Handler) {
	if req.Tool != "unseen" {
		return nil
	}
	return func(ctx context.Context, send guard.Handler) {
		*r.log = append(*r.log, "wait")
		send(ctx, &guard.Request{Method: "tools/list", ID: []byte(`"own"`)})
	}
}

func (r recStage) Request(_ context.Context, req *guard.Request) *guard.Response {
	*r.log = append(*r.log, "request")
	if req.Tool == "bad" {
		return guard.Deny("T", "rule", "bad tool")
	}
	return nil
}

func (r recStage) Response(_ context.Context, _ *guard.Request, resp *guard.Response) *guard.Response {
	*r.log = append(*r.log, "response")
	return &guard.Response{Result: []byte(`"judged"`)}
}

func TestHandler(t *testing.T) {
	for _, c := range []struct {
		tool      string
		cancelled bool
		want      []string
		result    string
	}{
		{tool: "ok", want: []string{"request", "next tools/call", "response"}, result: `"judged"`},
		{tool: "unseen", want: []string{"wait", "next tools/list", "request", "next tools/call", "response"}, result: `"judged"`},
		{tool: "bad", want: []string{"request"}},
		{tool: "ok", cancelled: true, want: []string{"request", "next tools/call"}},
	} {
		var log []string
		next := func(_ context.Context, req *guard.Request) *guard.Response {
			log = append(log, "next "+req.Method)
			if c.cancelled {
				return nil
			}
			return &guard.Response{Result: []byte(`"server"`)}
		}
		h := stagetest.Handler(recStage{&log}, next)
		resp := h(context.Background(), &guard.Request{Method: "tools/call", Tool: c.tool})
		assert.Equal(t, c.want, log, c.tool)
		switch {
		case c.tool == "bad":
			if assert.NotNil(t, resp) && assert.NotNil(t, resp.Error) {
				assert.Contains(t, resp.Error.Message, "bad tool")
			}
		case c.cancelled:
			assert.Nil(t, resp, "a cancelled request gets no response phase")
		default:
			if assert.NotNil(t, resp) {
				assert.JSONEq(t, c.result, string(resp.Result))
			}
		}
	}
}
