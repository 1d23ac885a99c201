package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/mcpguard/mcpguard/lab/llm/server"
)

func cmdServeLLM(ctx context.Context, s stdio, args []string) error {
	d := server.DefaultConfig()
	fs := newFlags(s, "serve-llm", "[--addr 127.0.0.1:8000] [--shape medium|small|qwen2.5-0.5b] [--classifier-shape small|prompt-guard-86m] [--seed N]",
		"Serve the embedded reference model over the OpenAI API (/v1/chat/completions, /v1/models)\n"+
			"and classification endpoints shaped like text-embeddings-inference (/predict) and vLLM (/classify).\n"+
			"The model does real transformer work on seeded, synthetic weights; what it says is scripted\n"+
			"(a tool call naming what the user asks for, then an answer). See docs/llm.md.")
	addr := fs.String("addr", "127.0.0.1:8000", "address to listen on")
	// medium, not the package's test default (small): its working set is
	// larger than the CPU's last-level cache, as a real model's is.
	shape := fs.String("shape", "medium", "decoder shape: medium (83 MB, full attention), small (in-cache, sliding window) or qwen2.5-0.5b (2 GB)")
	cshape := fs.String("classifier-shape", d.ClassifierShape, "classifier shape: small or prompt-guard-86m")
	seed := fs.Int64("seed", d.Seed, "seed of the weights")
	answer := fs.Int("answer-tokens", d.AnswerTokens, "tokens in an answer after a tool result (max_tokens cuts it)")
	maxPrompt := fs.Int("max-prompt-tokens", 0, "longest prompt accepted (0: the shape's context less 1024)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: %w", fs.Args(), errUsage)
	}
	srv, err := server.New(server.Config{
		Shape: *shape, ClassifierShape: *cshape, Seed: *seed, AnswerTokens: *answer,
		MaxPromptTokens: *maxPrompt, Preload: true,
	})
	if err != nil {
		return fmt.Errorf("%w: %w", err, errUsage)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(s.err, "mcpguard serve-llm: serving %s (shape %s) and %s (shape %s), synthetic weights seed %d, on http://%s/v1\n",
		server.ModelName, *shape, server.ClassifierName, *cshape, *seed, ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
