// Package classify is L2's optional classifier hook: where a pattern list
// cannot decide (a paraphrased injection, one in a language or a wording no
// pattern knows), it sends what the client would read from the server to a
// PromptGuard-style classifier (the promptguard package's client: Hugging
// Face text-embeddings-inference or vLLM serving a model such as
// Llama-Prompt-Guard-2) and refuses what it scores as malicious, as L2
// refuses a pattern hit: the same JSON-RPC error, rule and audit event.
//
// It judges tool, resource, prompt and completion results and the server's
// errors for them, initialize's instructions, the tool definitions of
// tools/list, and what the server sends on its own (notifications/message, sampling/createMessage,
// elicitation/create). Texts are normalised as L2 normalises them, and text
// hidden in tag characters, variation selectors or base64 is classified
// too (validate.Readings).
package classify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/validate"
)

// DefaultTimeout bounds the classifier's verdict on one message when
// Options.Timeout is zero.
const DefaultTimeout = 5 * time.Second

// DefaultThreshold is the malicious score at which the hook refuses when
// Options.Threshold is zero.
const DefaultThreshold = 0.9

// ErrNoScanner is returned by New without a classifier.
var ErrNoScanner = errors.New("classify: no classifier")

// Scorer is a classifier: the highest malicious score in [0, 1] of a text,
// stopping early once a part of it reaches stopAt. *promptguard.Client is
// one.
type Scorer interface {
	Score(ctx context.Context, text string, stopAt float64) (float64, error)
}

// Options configures the hook.
type Options struct {
	// Server and Config name the session in audit events.
	Server, Config string
	Audit          *audit.Logger
	// Scanner is the classifier, normally a *promptguard.Client. Its
	// failures are errors, so that the hook's own error policy (FailOpen)
	// applies and its audit reason says the classifier failed.
	Scanner Scorer
	// Threshold refuses at a malicious score >= it (zero: DefaultThreshold).
	Threshold float64
	// FailOpen passes a message when the classifier fails (down, slow,
	// garbage). The default, false, fails closed: the message is refused
	// as a malicious one would be.
	FailOpen bool
	// Timeout bounds the verdict on one message, every request to the
	// classifier included (zero: DefaultTimeout).
	Timeout time.Duration
}

// Hook is the classifier hook of one guarded server; its Stage and
// ServerHook share it, and with it the tools it removed from tools/list
// (make one Hook per session). It is safe for concurrent use.
type Hook struct {
	o Options

	mu      sync.Mutex
	passed  map[string]bool   // digests of tool definitions the classifier passed
	blocked map[string]string // tool -> why the classifier removed it from tools/list
}

// New checks o and fills in defaults.
func New(o Options) (*Hook, error) {
	if o.Scanner == nil {
		return nil, ErrNoScanner
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Threshold <= 0 {
		o.Threshold = DefaultThreshold
	}
	return &Hook{o: o, passed: map[string]bool{}, blocked: map[string]string{}}, nil
}

// verdict is what the classifier decided about one message.
type verdict struct {
	refuse bool
	failed bool   // the classifier could not judge (refuse says what fail-closed made of it)
	reason string // why it is refused, or why it passed unjudged (fail-open)
}

// judge classifies texts (in reading order) as what (for reasons). An
// empty text passes without a request.
func (h *Hook) judge(ctx context.Context, what, tool string, texts []string) verdict {
	var readings []string
	for _, t := range texts {
		if strings.TrimSpace(t) == "" {
			continue
		}
		readings = append(readings, t)
	}
	if len(readings) == 0 {
		return verdict{}
	}
	// The items are read as the client shows them, one after another; the
	// normalised whole and what is hidden in it go out in one message, which
	// the scanner cuts into segments and batches.
	content := strings.Join(validate.Readings(strings.Join(readings, "\n")), "\n\n")
	ctx, cancel := context.WithTimeout(ctx, h.o.Timeout)
	defer cancel()
	score, err := h.o.Scanner.Score(ctx, content, h.o.Threshold)
	if score >= h.o.Threshold {
		return verdict{refuse: true, reason: fmt.Sprintf("%s carries a prompt injection (classifier promptguard: malicious score %.3f >= %.2f)", what, score, h.o.Threshold)}
	}
	if err != nil {
		if h.o.FailOpen {
			return verdict{failed: true, reason: fmt.Sprintf("the classifier failed on %s; passed unjudged (fail-open): %v", what, err)}
		}
		return verdict{refuse: true, failed: true, reason: fmt.Sprintf("the classifier failed on %s; refused (fail-closed): %v", what, err)}
	}
	return verdict{}
}

func (h *Hook) log(decision, rule, tool, target, reason string, args json.RawMessage) {
	h.o.Audit.Log(audit.Event{
		Server: h.o.Server, Config: h.o.Config, Layer: validate.Layer, Rule: rule, Tool: tool,
		Decision: decision, Reason: reason, Target: target, ArgsDigest: audit.Digest(args),
	})
}

// Stage returns the hook for answers to the client's requests. Append it
// after L2's stage (innermost), so that it judges the server's own answer.
func (h *Hook) Stage() guard.Stage { return stage{h} }

type stage struct{ h *Hook }

// judged are the methods whose answers the stage classifies.
var judged = map[string]bool{
	"tools/call": true, "resources/read": true, "prompts/get": true, "completion/complete": true,
	"initialize": true, "tools/list": true,
}

// Wait sends the requests whose answers are classified to the proxy's slow
// path: their response phases then run on the request's own goroutine,
// not on the server's read loop, so that a classifier request (a model
// run, up to Timeout) holds up only the answer it judges, not every other
// answer and message of the server. There is nothing to wait for before
// the request is sent.
func (st stage) Wait(_ context.Context, req *guard.Request) func(context.Context, guard.Handler) {
	if !judged[req.Method] {
		return nil
	}
	return func(context.Context, guard.Handler) {}
}

// Request denies calls to a tool the hook removed from tools/list.
func (st stage) Request(_ context.Context, req *guard.Request) *guard.Response {
	if req.Method != "tools/call" {
		return nil
	}
	st.h.mu.Lock()
	why, ok := st.h.blocked[req.Tool]
	st.h.mu.Unlock()
	if !ok {
		return nil
	}
	reason := fmt.Sprintf("tool %q was removed from tools/list: %s", req.Tool, why)
	st.h.log(audit.Deny, validate.RuleToolPoisoned, req.Tool, req.Tool, reason, req.Arguments)
	return guard.Deny(validate.Layer, validate.RuleToolPoisoned, reason)
}

// Response classifies what the client would read of the answer.
func (st stage) Response(ctx context.Context, req *guard.Request, resp *guard.Response) *guard.Response {
	if resp == nil || !judged[req.Method] {
		return resp
	}
	switch req.Method {
	case "initialize":
		return st.initialize(ctx, req, resp)
	case "tools/list":
		return st.tools(ctx, resp)
	}
	what := "result of " + req.Method
	if req.Tool != "" {
		what = fmt.Sprintf("result of %q", req.Tool)
	}
	var texts []string
	if e := resp.Error; e != nil {
		// The server's error reaches the model as a result does.
		what = "the server's error for " + req.Method
		texts = append([]string{e.Message}, validate.ModelText(e.Data)...)
	} else {
		texts = validate.ModelText(resp.Result)
	}
	v := st.h.judge(ctx, what, req.Tool, texts)
	switch {
	case v.refuse:
		st.h.log(audit.Deny, validate.RuleResponseInject, req.Tool, req.Tool, v.reason, req.Arguments)
		return guard.Deny(validate.Layer, validate.RuleResponseInject, v.reason)
	case v.reason != "":
		st.h.log(audit.Allow, validate.RuleResponseInject, req.Tool, req.Tool, v.reason, req.Arguments)
	}
	return resp
}

// initialize removes the server's instructions when the classifier refuses
// them, as L2 does on a pattern hit: the session goes on without them.
func (st stage) initialize(ctx context.Context, req *guard.Request, resp *guard.Response) *guard.Response {
	if resp.Error != nil || len(resp.Result) == 0 {
		return resp
	}
	var res map[string]json.RawMessage
	if json.Unmarshal(resp.Result, &res) != nil {
		return resp
	}
	var instr string
	if json.Unmarshal(res["instructions"], &instr) != nil || instr == "" {
		return resp
	}
	v := st.h.judge(ctx, "the server's instructions", "", []string{instr})
	if !v.refuse {
		if v.reason != "" {
			st.h.log(audit.Allow, validate.RuleInstructions, "", "instructions", v.reason, nil)
		}
		return resp
	}
	delete(res, "instructions")
	out, err := json.Marshal(res)
	if err != nil {
		return guard.Deny(validate.Layer, validate.RuleResponseMalforms, "initialize result could not be re-encoded")
	}
	st.h.log(audit.Rewrite, validate.RuleInstructions, "", "instructions", "the server's instructions were removed: "+v.reason, nil)
	return &guard.Response{Result: out}
}

// maxToolsInFlight bounds the tools of one tools/list judged at once.
const maxToolsInFlight = 4

// tools judges every tool of a tools/list result whose definition it has
// not passed before (a changed definition is judged again): a tool the
// classifier refuses is removed from the list and its calls are denied
// from then on, as L2 does with a poisoned description; a tool it could
// not judge (fail-closed) is removed from this list only.
func (st stage) tools(ctx context.Context, resp *guard.Response) *guard.Response {
	if resp.Error != nil || len(resp.Result) == 0 {
		return resp
	}
	var res struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if json.Unmarshal(resp.Result, &res) != nil || len(res.Tools) == 0 {
		return resp
	}
	h := st.h
	drop := make([]bool, len(res.Tools))
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxToolsInFlight)
	for i, raw := range res.Tools {
		digest := validate.DefinitionDigest(raw)
		var name struct {
			Name string `json:"name"`
		}
		json.Unmarshal(raw, &name)
		h.mu.Lock()
		done := h.passed[digest]
		_, blocked := h.blocked[name.Name]
		h.mu.Unlock()
		if blocked { // for the rest of the session, whatever it says now
			drop[i] = true
			continue
		}
		if done {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t := name
			// The name reads as part of the definition: it is in the text.
			v := h.judge(ctx, fmt.Sprintf("the definition of tool %q", t.Name), t.Name, append([]string{t.Name}, validate.ModelText(raw)...))
			h.mu.Lock()
			defer h.mu.Unlock()
			switch {
			case v.refuse && v.failed:
				drop[i] = true
				h.logTool(audit.Rewrite, validate.RuleToolPoisoned, t.Name, v.reason+"; removed from this tools/list")
			case v.refuse:
				drop[i] = true
				h.blocked[t.Name] = v.reason
				h.logTool(audit.Rewrite, validate.RuleToolPoisoned, t.Name, v.reason+"; removed from tools/list, calls denied")
			default:
				if v.failed {
					h.logTool(audit.Allow, validate.RuleToolPoisoned, t.Name, v.reason)
				} else {
					h.passed[digest] = true
				}
			}
		})
	}
	wg.Wait()
	i := 0
	out := guard.FilterTools(resp.Result, func(json.RawMessage) bool {
		keep := !drop[i]
		i++
		return keep
	})
	if out == nil {
		return resp
	}
	return &guard.Response{Result: out}
}

// logTool logs an event about a listed tool.
func (h *Hook) logTool(decision, rule, tool, reason string) {
	h.log(decision, rule, tool, tool, reason, nil)
}

// ServerHook returns the hook for what the server sends on its own. Append
// it after L2's hook: it judges what L2 let through. It runs on the
// server's read loop (a ServerHook cannot run elsewhere), so a classifier
// request holds up the server's later messages for as long as it takes,
// at most Timeout; only the methods L2 reads as text the model or the
// user sees are classified.
func (h *Hook) ServerHook() guard.ServerHook {
	return func(ctx context.Context, m *guard.ServerMessage) *guard.ServerMessage {
		switch m.Method {
		case "notifications/message", "sampling/createMessage", "elicitation/create":
		default:
			return m
		}
		v := h.judge(ctx, "the server's own "+m.Method, "", validate.ModelText(m.Params))
		switch {
		case v.refuse:
			h.log(audit.Deny, validate.RuleServerMessage, "", m.Method, v.reason+": dropped", nil)
			return nil
		case v.reason != "":
			h.log(audit.Allow, validate.RuleServerMessage, "", m.Method, v.reason, nil)
		}
		return m
	}
}
