package agent

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// Config is what the agent needs to reach its model and its files. It comes
// from the environment, with a .env file filling in what the environment
// does not set, so vLLM, llama.cpp's server and Ollama work unchanged.
type Config struct {
	// BaseURL is the OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1
	// (VLLM_BASE_URL). Empty means: start the embedded reference server.
	BaseURL string
	// APIKey is sent as a bearer token (VLLM_API_KEY); most local servers ignore it.
	APIKey string
	// Model is the served model name (VLLM_MODEL or MODEL_NAME). Empty means
	// the first model /v1/models lists.
	Model string
	// TargetDir is the directory the filesystem server may touch (AGENT_TARGET_DIR).
	TargetDir string
	// ClassifierURL is the PromptGuard-style classification endpoint
	// (PROMPTGUARD_URL), e.g. http://127.0.0.1:8080 for TEI.
	ClassifierURL string
	// ClassifierAPI is "tei" or "vllm" (PROMPTGUARD_API, default tei).
	ClassifierAPI string
	// ClassifierModel is the model name sent to a vLLM classify endpoint
	// (PROMPTGUARD_MODEL).
	ClassifierModel string
	// RequestTimeout bounds one LLM request, first byte to last
	// (AGENT_REQUEST_TIMEOUT, a Go duration; default 10m: CPU prefill of a
	// large tool output is slow).
	RequestTimeout time.Duration
	// StallTimeout bounds the silence between two chunks of a stream
	// (AGENT_STALL_TIMEOUT, default 2m), so a stream cut without a close
	// fails instead of hanging.
	StallTimeout time.Duration
	// MaxTokens caps the final answer (AGENT_MAX_TOKENS, default 256).
	MaxTokens int
	// ModelShape is the embedded reference model's decoder shape when
	// BaseURL is empty (MCPGUARD_MODEL_SHAPE; empty: llm/server's default).
	ModelShape string
}

// Defaults for the timeouts and the answer length.
const (
	DefaultRequestTimeout = 10 * time.Minute
	DefaultStallTimeout   = 2 * time.Minute
	DefaultMaxTokens      = 256
)

// LoadConfig reads the environment, falling back to the KEY=VALUE lines of
// envFile for keys the environment leaves unset. A missing envFile is not an
// error; pass "" to skip it.
func LoadConfig(envFile string) (Config, error) {
	file := map[string]string{}
	if envFile != "" {
		f, err := os.Open(envFile)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return Config{}, fmt.Errorf("read %s: %w", envFile, err)
		default:
			file, err = ParseDotEnv(f)
			f.Close()
			if err != nil {
				return Config{}, fmt.Errorf("read %s: %w", envFile, err)
			}
		}
	}
	get := func(keys ...string) string {
		for _, k := range keys {
			if v, ok := os.LookupEnv(k); ok && v != "" {
				return v
			}
			if v := file[k]; v != "" {
				return v
			}
		}
		return ""
	}
	c := Config{
		BaseURL:         get("VLLM_BASE_URL"),
		APIKey:          get("VLLM_API_KEY"),
		Model:           get("VLLM_MODEL", "MODEL_NAME"),
		TargetDir:       get("AGENT_TARGET_DIR"),
		ClassifierURL:   get("PROMPTGUARD_URL"),
		ClassifierAPI:   get("PROMPTGUARD_API"),
		ClassifierModel: get("PROMPTGUARD_MODEL"),
		ModelShape:      get("MCPGUARD_MODEL_SHAPE"),
		RequestTimeout:  DefaultRequestTimeout,
		StallTimeout:    DefaultStallTimeout,
		MaxTokens:       DefaultMaxTokens,
	}
	var err error
	if v := get("AGENT_REQUEST_TIMEOUT"); v != "" {
		if c.RequestTimeout, err = time.ParseDuration(v); err != nil || c.RequestTimeout <= 0 {
			return Config{}, fmt.Errorf("AGENT_REQUEST_TIMEOUT %q: want a positive duration such as 5m", v)
		}
	}
	if v := get("AGENT_STALL_TIMEOUT"); v != "" {
		if c.StallTimeout, err = time.ParseDuration(v); err != nil || c.StallTimeout <= 0 {
			return Config{}, fmt.Errorf("AGENT_STALL_TIMEOUT %q: want a positive duration such as 60s", v)
		}
	}
	if v := get("AGENT_MAX_TOKENS"); v != "" {
		if c.MaxTokens, err = strconv.Atoi(v); err != nil || c.MaxTokens <= 0 {
			return Config{}, fmt.Errorf("AGENT_MAX_TOKENS %q: want a positive integer", v)
		}
	}
	return c, nil
}

// ParseDotEnv parses .env lines: KEY=VALUE, optional `export `, # comments,
// values optionally in single or double quotes (double quotes understand
// \n, \" and \\). A line without '=' is an error naming its number.
func ParseDotEnv(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t\"'") {
			return nil, fmt.Errorf("line %d: want KEY=VALUE", n)
		}
		v = strings.TrimSpace(v)
		switch {
		case len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"':
			s, err := strconv.Unquote(v)
			if err != nil {
				return nil, fmt.Errorf("line %d: bad quoted value: %w", n, err)
			}
			v = s
		case len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'':
			v = v[1 : len(v)-1]
		default:
			if i := strings.Index(v, " #"); i >= 0 {
				v = strings.TrimSpace(v[:i])
			}
		}
		out[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
