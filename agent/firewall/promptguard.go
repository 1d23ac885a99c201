package firewall

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/mcpguard/mcpguard/guard/classify/promptguard"
)

// ClassifierAPI names the request and response shape of a classification
// endpoint (promptguard.API: the wire client lives at the guard's floor).
type ClassifierAPI = promptguard.API

// Supported classifier APIs.
const (
	TEI  = promptguard.TEI
	VLLM = promptguard.VLLM
)

// ErrClassifier wraps classifier endpoint failures (before the error policy applies).
var ErrClassifier = promptguard.ErrClassifier

// PromptGuardOptions configure a PromptGuard scanner. Zero values mean the
// defaults; the fields but Threshold and OnError are promptguard.Options'.
type PromptGuardOptions struct {
	URL   string
	API   ClassifierAPI // default TEI
	Model string
	// Threshold blocks at a malicious score >= it (default 0.9).
	Threshold        float64
	MaxSegmentTokens int
	CountTokens      func(string) int
	BatchSize        int
	Concurrency      int
	Timeout          time.Duration
	MaliciousLabels  []string
	MaliciousIndex   int
	OnError          OnError
	HTTPClient       *http.Client
}

// PromptGuard is a PromptGuard-style classifier scanner: it sends the text,
// in segments, to a classification endpoint serving a model such as
// Llama-Prompt-Guard-2-86M (promptguard.Client), and blocks when the
// highest malicious score reaches the threshold.
type PromptGuard struct {
	c         *promptguard.Client
	threshold float64
	onError   OnError
}

// NewPromptGuard checks o and fills in defaults.
func NewPromptGuard(o PromptGuardOptions) (*PromptGuard, error) {
	c, err := promptguard.New(promptguard.Options{
		URL: o.URL, API: o.API, Model: o.Model, MaxSegmentTokens: o.MaxSegmentTokens,
		CountTokens: o.CountTokens, BatchSize: o.BatchSize, Concurrency: o.Concurrency,
		Timeout: o.Timeout, MaliciousLabels: o.MaliciousLabels, MaliciousIndex: o.MaliciousIndex,
		HTTPClient: o.HTTPClient,
	})
	if err != nil {
		return nil, err
	}
	if o.Threshold <= 0 {
		o.Threshold = 0.9
	}
	return &PromptGuard{c: c, threshold: o.Threshold, onError: o.OnError}, nil
}

// Name implements Scanner.
func (p *PromptGuard) Name() string { return "promptguard" }

// Scan implements Scanner.
func (p *PromptGuard) Scan(ctx context.Context, msg Message, _ []Message) (Decision, error) {
	score, err := p.c.Score(ctx, msg.Content, p.threshold)
	if err != nil {
		return onError(p.onError, p.Name(), err)
	}
	d := Decision{Action: Allow, Score: score, Scanner: p.Name()}
	if score >= p.threshold {
		d.Action = Block
		d.Reason = fmt.Sprintf("classifier malicious score %.3f >= %.2f", score, p.threshold)
	}
	return d, nil
}
