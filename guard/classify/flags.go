package classify

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/classify/promptguard"
	"github.com/mcpguard/mcpguard/guard/configs"
)

// ErrBadFlag is wrapped by Apply for a flag value it cannot use.
var ErrBadFlag = errors.New("classifier flag")

// Flags are the command-line switches of the hook (`mcpguard run
// --classifier URL`). The zero value, and Register's defaults, leave the
// hook off.
type Flags struct {
	URL       string
	API       string
	Threshold float64
	Timeout   time.Duration
	FailOpen  bool
}

// Register adds the switches to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.URL, "classifier", "", "L2's classifier hook: the base `URL` of a PromptGuard-style classifier (text-embeddings-inference /predict, or vLLM /classify with --classifier-api vllm); off when empty")
	fs.StringVar(&f.API, "classifier-api", string(promptguard.TEI), "the classifier's API: tei or vllm")
	fs.Float64Var(&f.Threshold, "classifier-threshold", 0.9, "refuse at a malicious score >= this (0 < X <= 1)")
	fs.DurationVar(&f.Timeout, "classifier-timeout", DefaultTimeout, "bound on the classifier's verdict on one message")
	fs.BoolVar(&f.FailOpen, "classifier-fail-open", false, "pass messages when the classifier fails or times out (default: refuse them)")
}

// Enabled reports whether --classifier was given.
func (f *Flags) Enabled() bool { return f.URL != "" }

// Apply appends the hook to s when it is enabled: its stage after s's
// stages and its server hook after s's hooks, so that it stacks on any
// config.
func (f *Flags) Apply(s *configs.Setup, server string, log *audit.Logger) error {
	if !f.Enabled() {
		return nil
	}
	if !(f.Threshold > 0 && f.Threshold <= 1) {
		return fmt.Errorf("%w: --classifier-threshold %v is not in (0, 1]", ErrBadFlag, f.Threshold)
	}
	if f.Timeout <= 0 {
		return fmt.Errorf("%w: --classifier-timeout must be positive", ErrBadFlag)
	}
	pg, err := promptguard.New(promptguard.Options{URL: f.URL, API: promptguard.API(f.API), Timeout: f.Timeout})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadFlag, err)
	}
	h, err := New(Options{Server: server, Config: s.Name, Audit: log, Scanner: pg, Threshold: f.Threshold, FailOpen: f.FailOpen, Timeout: f.Timeout})
	if err != nil {
		return err
	}
	s.Stages = append(s.Stages, h.Stage())
	s.ServerHooks = append(s.ServerHooks, h.ServerHook())
	return nil
}
