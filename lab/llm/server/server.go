// Package server serves the embedded reference model over the OpenAI API
// (/v1/chat/completions, /v1/models) and classification endpoints shaped
// like Hugging Face text-embeddings-inference (/predict) and vLLM
// (/classify). The model does real transformer work on weights drawn from a
// seeded generator; what it says comes from a deterministic script (see
// docs/llm.md), and every response says it is synthetic.
package server

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpguard/mcpguard/lab/llm/model"
)

const (
	// ModelName is the chat model's id in requests and responses.
	ModelName = "mcpguard-synthetic-qwen2"
	// ClassifierName is the classifier's id for /classify and /v1/models.
	ClassifierName = "mcpguard-synthetic-promptguard"
	// SyntheticHeader is set to "true" on every response.
	SyntheticHeader = "X-Mcpguard-Synthetic"
)

// Config sets up a Server. The zero value of a field means its default
// (DefaultConfig).
type Config struct {
	// Shape is the decoder's shape: "small" (default: fast, for tests),
	// "medium" (the benchmarks' and serve-llm's default) or "qwen2.5-0.5b".
	Shape string
	// ClassifierShape is the encoder's: "small" (default) or "prompt-guard-86m".
	ClassifierShape string
	// Seed derives every weight.
	Seed int64
	// AnswerTokens is the length of an answer that is not a tool call or a
	// JSON document, before max_tokens / max_completion_tokens cut it.
	AnswerTokens int
	// MaxPromptTokens is the longest prompt accepted; longer ones get a 400
	// context_length_exceeded. Default: the shape's context less 1024
	// positions kept for the completion.
	MaxPromptTokens int
	// MaxBatch is the most inputs one classification request may carry (32,
	// as text-embeddings-inference's --max-client-batch-size).
	MaxBatch int
	// Workers is how many goroutines share the matrix work (GOMAXPROCS).
	Workers int
	// Preload creates the weights in New instead of on the first request.
	Preload bool
}

// DefaultConfig returns the configuration of `mcpguard serve-llm` without flags.
func DefaultConfig() Config {
	return Config{Shape: "small", ClassifierShape: "small", Seed: 1, AnswerTokens: 64, MaxBatch: 32}
}

// Server is the reference model server. It is safe for concurrent use.
type Server struct {
	cfg     Config
	pool    *model.Pool
	dec     *model.Decoder
	enc     *model.Encoder
	created int64
	nextID  atomic.Uint64

	active       atomic.Int64
	requests     atomic.Int64
	promptTokens atomic.Int64
	decodeSteps  atomic.Int64
	genTokens    atomic.Int64
	flops        atomic.Int64

	closeOnce sync.Once
}

// Stats counts a server's work since it started.
type Stats struct {
	// Active is the number of requests running model work now.
	Active int64
	// Requests is the number of model requests started.
	Requests int64
	// PromptTokens counts tokens prefilled (chat) or encoded (classifier).
	PromptTokens int64
	// DecodeSteps counts single-token forward passes over a KV cache.
	DecodeSteps int64
	// CompletionTokens counts tokens emitted.
	CompletionTokens int64
	// FLOPs counts floating-point operations of matmuls and attention.
	FLOPs int64
}

// New builds a server; weights are created on first use unless cfg.Preload.
func New(cfg Config) (*Server, error) {
	d := DefaultConfig()
	if cfg.Shape == "" {
		cfg.Shape = d.Shape
	}
	if cfg.ClassifierShape == "" {
		cfg.ClassifierShape = d.ClassifierShape
	}
	if cfg.AnswerTokens <= 0 {
		cfg.AnswerTokens = d.AnswerTokens
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = d.MaxBatch
	}
	ds, err := model.LookupDecoder(cfg.Shape)
	if err != nil {
		return nil, err
	}
	es, err := model.LookupEncoder(cfg.ClassifierShape)
	if err != nil {
		return nil, err
	}
	if cfg.MaxPromptTokens <= 0 {
		cfg.MaxPromptTokens = ds.MaxContext - 1024
	}
	if cfg.MaxPromptTokens >= ds.MaxContext {
		return nil, fmt.Errorf("max prompt tokens %d leaves no room in a context of %d", cfg.MaxPromptTokens, ds.MaxContext)
	}
	pool := model.NewPool(cfg.Workers)
	dec, err := model.NewDecoder(ds, cfg.Seed, pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	enc, err := model.NewEncoder(es, cfg.Seed, pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	if cfg.Preload {
		dec.Load()
		enc.Load()
	}
	return &Server{cfg: cfg, pool: pool, dec: dec, enc: enc, created: time.Now().Unix()}, nil
}

// Config returns the configuration in effect, defaults filled in.
func (s *Server) Config() Config { return s.cfg }

// Decoder returns the chat model (for benchmarks that drive it directly).
func (s *Server) Decoder() *model.Decoder { return s.dec }

// Encoder returns the classifier.
func (s *Server) Encoder() *model.Encoder { return s.enc }

// Stats returns the work done so far.
func (s *Server) Stats() Stats {
	return Stats{
		Active: s.active.Load(), Requests: s.requests.Load(), PromptTokens: s.promptTokens.Load(),
		DecodeSteps: s.decodeSteps.Load(), CompletionTokens: s.genTokens.Load(), FLOPs: s.flops.Load(),
	}
}

// Close stops the worker goroutines. Requests still running must have
// ended (shut the HTTP server down first).
func (s *Server) Close() error {
	s.closeOnce.Do(s.pool.Close)
	return nil
}

// Handler returns the HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.chat)
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("GET /v1/models/{id}", s.modelByID)
	mux.HandleFunc("POST /predict", s.predict)
	mux.HandleFunc("POST /classify", s.classify)
	mux.HandleFunc("POST /v1/classify", s.classify)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "", "not_found", fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(SyntheticHeader, "true")
		mux.ServeHTTP(w, r)
	})
}

func (s *Server) fingerprint() string {
	return fmt.Sprintf("mcpguard-synthetic-%s-seed%d", s.cfg.Shape, s.cfg.Seed)
}

func (s *Server) id(prefix string) string {
	return fmt.Sprintf("%s-%x%08x", prefix, s.created, s.nextID.Add(1))
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, modelList{Object: "list", Data: s.modelInfos()})
}

func (s *Server) modelInfos() []modelInfo {
	return []modelInfo{
		{ID: ModelName, Object: "model", Created: s.created, OwnedBy: "mcpguard-synthetic"},
		{ID: ClassifierName, Object: "model", Created: s.created, OwnedBy: "mcpguard-synthetic"},
	}
}

func (s *Server) modelByID(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	for _, m := range s.modelInfos() {
		if m.ID == id {
			writeJSON(w, http.StatusOK, m)
			return
		}
	}
	writeError(w, http.StatusNotFound, "invalid_request_error", "model", "model_not_found", fmt.Sprintf("The model `%s` does not exist.", id))
}
