package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// BenchmarkIteration is one agent iteration against the server over HTTP
// with go-openai's streaming client: a plan request (system prompt, three
// tool schemas, a task; answered with a tool call), then an answer request
// carrying a tool output of each size (answered with 64 tokens).
func BenchmarkIteration(b *testing.B) {
	line := "The quarterly report lists revenue, costs and the plan for the next release of the service.\n"
	for _, size := range []int{1 << 10, 16 << 10, 128 << 10} {
		b.Run(fmt.Sprintf("output=%dKiB", size>>10), func(b *testing.B) {
			_, _, c := newTestServer(b, func(c *Config) { c.Preload = true })
			out := strings.Repeat(line, size/len(line)+1)[:size]
			task := "Please read the file /workspace/report.txt and summarise it for me."
			var plan, ttft, answer time.Duration
			var promptTok, genTok int
			for b.Loop() {
				t0 := time.Now()
				pr, _, err := stream(c, planRequest(task))
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				ar, first, err := stream(c, answerRequest(task, out))
				if err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				plan += t1.Sub(t0)
				ttft += first.Sub(t1)
				answer += t2.Sub(t1)
				promptTok += pr.PromptTokens + ar.PromptTokens
				genTok += pr.CompletionTokens + ar.CompletionTokens
			}
			n := float64(b.N)
			b.ReportMetric(float64(plan.Nanoseconds())/n, "plan-ns")
			b.ReportMetric(float64(ttft.Nanoseconds())/n, "ttft-ns")
			b.ReportMetric(float64(answer.Nanoseconds())/n, "answer-ns")
			b.ReportMetric(float64(promptTok)/n, "prompt-tok")
			b.ReportMetric(float64(genTok)/n, "gen-tok")
		})
	}
}

// stream runs a streaming request to the end and returns its usage and the
// time its first content or tool-call delta arrived.
func stream(c *openai.Client, req openai.ChatCompletionRequest) (openai.Usage, time.Time, error) {
	req.Stream = true
	req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	st, err := c.CreateChatCompletionStream(context.Background(), req)
	if err != nil {
		return openai.Usage{}, time.Time{}, err
	}
	defer st.Close()
	var first time.Time
	var usage openai.Usage
	for {
		ch, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return usage, first, nil
		}
		if err != nil {
			return usage, first, err
		}
		if ch.Usage != nil {
			usage = *ch.Usage
		}
		if first.IsZero() && len(ch.Choices) > 0 && (ch.Choices[0].Delta.Content != "" || len(ch.Choices[0].Delta.ToolCalls) > 0) {
			first = time.Now()
		}
	}
}
