// Package agent is a SimpleAgent for profiling: it asks an LLM (any
// OpenAI-compatible endpoint) to plan one tool call from the tools an MCP
// server lists, runs the call over MCP, sends the output back and streams the
// final answer. Each run is split into the phases serving benchmarks use:
// planning, tool, prefill (TTFT) and decode, with token counts from the
// server's usage. A firewall can scan the messages in between.
package agent

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	openai "github.com/sashabaranov/go-openai"

	"github.com/mcpguard/mcpguard/agent/firewall"
)

// Sentinel errors of a run; callers branch on them. A run the firewall
// stopped is not an error: see Result.Outcome.
var (
	// ErrNoToolCall: the model answered without calling a tool.
	ErrNoToolCall = errors.New("model did not call a tool")
	// ErrUnknownTool: the model called a tool the server does not list.
	ErrUnknownTool = errors.New("model called an unknown tool")
	// ErrBadToolArgs: the tool call's arguments are not a JSON object.
	ErrBadToolArgs = errors.New("tool call arguments are not a JSON object")
	// ErrToolFailed: the tool ran and reported an error (a missing file, say).
	ErrToolFailed = errors.New("tool call failed")
)

// DefaultSystemPrompt tells the model to use the tools, as agents do.
const DefaultSystemPrompt = "You are a helpful assistant with access to a filesystem through tools. " +
	"Use a tool to get the information you need, then answer the user's request from the tool's output."

// DefaultToolTimeout bounds one MCP tool call.
const DefaultToolTimeout = 2 * time.Minute

// DefaultStartTimeout bounds starting the MCP server, initialize and tools/list.
const DefaultStartTimeout = time.Minute

// Options configure an Agent.
type Options struct {
	LLM    *LLM
	Server Server
	// Firewall scans messages by role; nil scans nothing.
	Firewall *firewall.Firewall
	// System is the system prompt ("" for DefaultSystemPrompt).
	System string
	// MaxTokens caps the final answer (0 for DefaultMaxTokens).
	MaxTokens int
	// ToolTimeout bounds one tool call (0 for DefaultToolTimeout).
	ToolTimeout time.Duration
	// Nonce puts a fresh random tag at the start of each run's prompt (the
	// system message), so that no run's prompt shares a prefix with an
	// earlier one: servers that cache prefixes (vLLM, llama.cpp, SGLang do
	// by default) would otherwise serve every run after the first from the
	// cache, and TTFT would time a cache hit instead of a prefill. Within a
	// run the answer request still shares the planning request's prefix,
	// as it does for any agent.
	Nonce bool
}

// NonceLen is the length of the tag Options.Nonce adds: "[run " + 16 hex
// digits + "] ", fixed so that token counts do not vary between runs.
const NonceLen = 23

// newNonce returns a fresh tag of NonceLen bytes.
func newNonce() string {
	var b [8]byte
	rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return fmt.Sprintf("[run %x] ", b)
}

// Agent holds a connected MCP session and the tools it lists; Run may be
// called many times (not concurrently).
type Agent struct {
	o     Options
	mcp   *session
	tools []openai.Tool
	known map[string]bool
}

// New starts the server (through the guard if configured), initializes the
// session and lists its tools.
func New(ctx context.Context, o Options) (*Agent, error) {
	if o.LLM == nil {
		return nil, errors.New("agent: no LLM")
	}
	if o.System == "" {
		o.System = DefaultSystemPrompt
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	if o.ToolTimeout <= 0 {
		o.ToolTimeout = DefaultToolTimeout
	}
	if err := o.LLM.ResolveModel(ctx); err != nil {
		return nil, err
	}
	// A server that starts but never answers must not hang New.
	sctx, cancel := context.WithTimeout(ctx, DefaultStartTimeout)
	defer cancel()
	s, err := connect(sctx, o.Server)
	if err != nil {
		return nil, err
	}
	list, err := s.ListTools(sctx, mcp.ListToolsRequest{})
	if err != nil {
		s.close()
		return nil, fmt.Errorf("%w: list tools: %v", ErrServer, err)
	}
	a := &Agent{o: o, mcp: s, known: map[string]bool{}}
	for _, t := range list.Tools {
		schema, err := json.Marshal(t.InputSchema)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("tool %s schema: %w", t.Name, err)
		}
		a.tools = append(a.tools, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: t.Name, Description: t.Description, Parameters: json.RawMessage(schema),
		}})
		a.known[t.Name] = true
	}
	return a, nil
}

// Close ends the MCP session and stops the server.
func (a *Agent) Close() error { return a.mcp.close() }

// Outcome is how a run ended.
type Outcome int

// Outcomes.
const (
	// Completed: the model answered from the tool's output.
	Completed Outcome = iota
	// Blocked: a firewall scanner blocked a message; the run stopped there
	// and the blocked message never reached the model (or the user).
	Blocked
	// NeedsHuman: a scanner asked for a human in the loop; the run stopped.
	NeedsHuman
	// NoAnswer: after the tool result the model called a tool again
	// instead of answering. The agent makes one call per run, so the run
	// ends there; it is not a complete iteration (its "answer" phases time
	// a second plan) and benchmarks count it apart.
	NoAnswer
)

func (o Outcome) String() string {
	switch o {
	case Completed:
		return "completed"
	case Blocked:
		return "blocked"
	case NeedsHuman:
		return "human_in_the_loop"
	case NoAnswer:
		return "no_answer"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// Phases are the durations of one run, as serving benchmarks define them.
type Phases struct {
	// Planning: first request sent to the complete tool call (the chunk
	// with its finish reason).
	Planning time.Duration
	// Tool: the MCP tools/call round trip(s).
	Tool time.Duration
	// Prefill: second request sent to its first output token (TTFT).
	Prefill time.Duration
	// Decode: first to last output token of the second request.
	Decode time.Duration
	// Firewall: time in scanners, all messages (not part of the four above).
	Firewall time.Duration
	// Total: the whole run.
	Total time.Duration
}

// Result is one run's outcome, answer and measurements.
type Result struct {
	Outcome Outcome
	// Verdict is the firewall's decision that stopped the run (Blocked, NeedsHuman).
	Verdict *firewall.Verdict
	// StoppedAt is the role of the message the firewall stopped.
	StoppedAt firewall.Role
	Answer    string
	ToolCalls []openai.ToolCall
	// ToolOutputBytes is the size of the tool output sent back to the model.
	ToolOutputBytes int

	Phases Phases
	// Plan and Final are the two streams (Final is nil when the run stopped early).
	Plan, Final *Stream
	// ScannerTime sums each scanner's time over the run.
	ScannerTime map[string]time.Duration
}

// PromptTokens sums the prompt tokens the server reported for both requests.
func (r *Result) PromptTokens() int {
	n := 0
	for _, s := range []*Stream{r.Plan, r.Final} {
		if s != nil {
			n += s.PromptTokens()
		}
	}
	return n
}

// GenTokens sums the generated tokens of both requests.
func (r *Result) GenTokens() int {
	n := 0
	for _, s := range []*Stream{r.Plan, r.Final} {
		if s != nil {
			n += s.CompletionTokens()
		}
	}
	return n
}

// TPOT is the final answer's time per output token after the first.
func (r *Result) TPOT() time.Duration {
	if r.Final == nil {
		return 0
	}
	n := r.Final.CompletionTokens()
	if n < 2 {
		return 0
	}
	return r.Phases.Decode / time.Duration(n-1)
}

// scan runs the firewall on msg; it returns true when the run must stop.
func (a *Agent) scan(ctx context.Context, r *Result, msg firewall.Message, trace []firewall.Message) (bool, error) {
	if a.o.Firewall == nil {
		return false, nil
	}
	v, err := a.o.Firewall.Scan(ctx, msg, trace)
	for _, t := range v.Timings {
		r.Phases.Firewall += t.Elapsed
		if r.ScannerTime == nil {
			r.ScannerTime = map[string]time.Duration{}
		}
		r.ScannerTime[t.Scanner] += t.Elapsed
	}
	if err != nil {
		return false, err
	}
	switch v.Action {
	case firewall.Block:
		r.Outcome = Blocked
	case firewall.HumanInTheLoop:
		r.Outcome = NeedsHuman
	default:
		return false, nil
	}
	r.Verdict = &v
	r.StoppedAt = msg.Role
	return true, nil
}

// Run performs one agent iteration for task: plan, call, answer.
func (a *Agent) Run(ctx context.Context, task string) (*Result, error) {
	start := time.Now()
	r := &Result{}
	defer func() { r.Phases.Total = time.Since(start) }()

	system := a.o.System
	if a.o.Nonce {
		system = newNonce() + system
	}
	trace := []firewall.Message{{Role: firewall.RoleSystem, Content: system}}
	user := firewall.Message{Role: firewall.RoleUser, Content: task}
	if stop, err := a.scan(ctx, r, user, trace); stop || err != nil {
		return r, err
	}
	trace = append(trace, user)

	msgs := []openai.ChatCompletionMessage{
		{Role: openai.ChatMessageRoleSystem, Content: system},
		{Role: openai.ChatMessageRoleUser, Content: task},
	}
	plan, err := a.o.LLM.ChatStream(ctx, openai.ChatCompletionRequest{
		Messages: msgs, Tools: a.tools, ToolChoice: "auto",
		// Both names: OpenAI and vLLM read max_completion_tokens, Ollama
		// and older servers only max_tokens.
		MaxTokens: a.o.MaxTokens, MaxCompletionTokens: a.o.MaxTokens,
	})
	if err != nil {
		return r, fmt.Errorf("planning: %w", err)
	}
	r.Plan = plan
	r.Phases.Planning = plan.Finished.Sub(plan.Sent)
	if len(plan.ToolCalls) == 0 {
		return r, fmt.Errorf("%w (finish_reason %q, answer %.100q)", ErrNoToolCall, plan.FinishReason, plan.Content)
	}
	r.ToolCalls = plan.ToolCalls
	msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: plan.Content, ToolCalls: plan.ToolCalls})

	for i, tc := range plan.ToolCalls {
		if tc.ID == "" {
			plan.ToolCalls[i].ID = fmt.Sprintf("call_%d", i)
			tc.ID = plan.ToolCalls[i].ID
		}
		act := firewall.Message{Role: firewall.RoleAssistant, ToolName: tc.Function.Name, ToolArgs: tc.Function.Arguments,
			Content: fmt.Sprintf("call %s(%s)", tc.Function.Name, tc.Function.Arguments)}
		if stop, err := a.scan(ctx, r, act, trace); stop || err != nil {
			return r, err
		}
		trace = append(trace, act)

		out, elapsed, err := a.call(ctx, tc)
		r.Phases.Tool += elapsed
		if err != nil {
			return r, err
		}
		res := firewall.Message{Role: firewall.RoleTool, ToolName: tc.Function.Name, Content: out}
		if stop, err := a.scan(ctx, r, res, trace); stop || err != nil {
			return r, err // the output never reaches the model
		}
		trace = append(trace, res)
		r.ToolOutputBytes += len(out)
		msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: tc.ID, Name: tc.Function.Name, Content: out})
	}

	final, err := a.o.LLM.ChatStream(ctx, openai.ChatCompletionRequest{
		Messages: msgs, Tools: a.tools, MaxTokens: a.o.MaxTokens, MaxCompletionTokens: a.o.MaxTokens,
	})
	if err != nil {
		return r, fmt.Errorf("answer: %w", err)
	}
	r.Final = final
	r.Phases.Prefill = final.TTFT()
	r.Phases.Decode = final.Decode()
	r.Answer = final.Content
	if len(final.ToolCalls) > 0 {
		r.Outcome = NoAnswer
		return r, nil
	}
	answer := firewall.Message{Role: firewall.RoleAssistant, Content: final.Content}
	if stop, err := a.scan(ctx, r, answer, trace); stop || err != nil {
		return r, err
	}
	return r, nil
}

// call runs one tool call over MCP and returns its text output.
func (a *Agent) call(ctx context.Context, tc openai.ToolCall) (string, time.Duration, error) {
	name := tc.Function.Name
	if !a.known[name] {
		return "", 0, fmt.Errorf("%w: %q", ErrUnknownTool, name)
	}
	var args map[string]any
	if s := strings.TrimSpace(tc.Function.Arguments); s != "" {
		if err := json.Unmarshal([]byte(s), &args); err != nil {
			return "", 0, fmt.Errorf("%w: %s: %v", ErrBadToolArgs, name, err)
		}
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	ctx, cancel := context.WithTimeout(ctx, a.o.ToolTimeout)
	defer cancel()
	start := time.Now()
	res, err := a.mcp.CallTool(ctx, req)
	elapsed := time.Since(start)
	if err != nil {
		return "", elapsed, fmt.Errorf("%w: %s: %v", ErrToolFailed, name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := mcp.AsTextContent(c); ok {
			b.WriteString(t.Text)
		}
	}
	if res.IsError {
		return "", elapsed, fmt.Errorf("%w: %s: %s", ErrToolFailed, name, b.String())
	}
	return b.String(), elapsed, nil
}
