// Package promptguard is the wire client of a PromptGuard-style classifier:
// it cuts a text into segments a model such as Llama-Prompt-Guard-2-86M
// takes, sends them in batches to a classification endpoint (Hugging Face
// text-embeddings-inference or vLLM) and returns the highest malicious
// score. L2's classifier hook (guard/classify) and the profiler's
// PromptGuard scanner (agent/firewall) both stand on it, so it sits at the
// guard's floor and imports nothing above it.
package promptguard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// API names the request and response shape of a classification endpoint.
type API string

// Supported classifier APIs.
const (
	// TEI is Hugging Face text-embeddings-inference: POST /predict
	// {"inputs": "..."} -> [{"label","score"}...].
	TEI API = "tei"
	// VLLM is vLLM's classification API: POST /classify {"model","input"}
	// -> {"data":[{"label","probs"}]}.
	VLLM API = "vllm"
)

// ErrClassifier wraps classifier endpoint failures (before the error policy applies).
var ErrClassifier = errors.New("classifier endpoint failed")

// Options configure a Client. Zero values mean the defaults.
type Options struct {
	// URL is the server's base URL, e.g. http://127.0.0.1:8080; the API's
	// path (/predict, /classify) is appended.
	URL string
	API API // default TEI
	// Model is sent to vLLM (its served model name).
	Model string
	// MaxSegmentTokens bounds one segment, special tokens included (default 512).
	MaxSegmentTokens int
	// CountTokens estimates a text's tokens (default EstimateTokens).
	CountTokens func(string) int
	// BatchSize is the number of segments per request (default 16; TEI
	// accepts 32 unless --max-client-batch-size says otherwise).
	BatchSize int
	// Concurrency is the number of requests in flight (default 4).
	Concurrency int
	// Timeout bounds one request (default 30 s).
	Timeout time.Duration
	// MaliciousLabels are the TEI labels whose score counts as malicious
	// (default MALICIOUS, LABEL_1, INJECTION, JAILBREAK).
	MaliciousLabels []string
	// MaliciousIndex is the index in vLLM's probs of the malicious class
	// (default 1: Llama-Prompt-Guard-2's id2label is {0: benign, 1: malicious}).
	MaliciousIndex int
	HTTPClient     *http.Client
}

// Client sends texts, in segments of at most MaxSegmentTokens, to a
// classification endpoint and reads their malicious scores. It is safe for
// concurrent use.
type Client struct {
	o      Options
	url    string
	labels map[string]bool
}

// New checks o and fills in defaults.
func New(o Options) (*Client, error) {
	if o.URL == "" {
		return nil, errors.New("promptguard: no endpoint URL")
	}
	if o.API == "" {
		o.API = TEI
	}
	if o.MaxSegmentTokens <= 0 {
		o.MaxSegmentTokens = 512
	}
	if o.MaxSegmentTokens < 8 {
		return nil, fmt.Errorf("promptguard: segments of %d tokens are too small", o.MaxSegmentTokens)
	}
	if o.CountTokens == nil {
		o.CountTokens = EstimateTokens
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 16
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if len(o.MaliciousLabels) == 0 {
		o.MaliciousLabels = []string{"MALICIOUS", "LABEL_1", "INJECTION", "JAILBREAK"}
	}
	if o.MaliciousIndex <= 0 {
		o.MaliciousIndex = 1
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.Concurrency}}
	}
	base := strings.TrimRight(o.URL, "/")
	p := &Client{o: o, labels: map[string]bool{}}
	switch o.API {
	case TEI:
		p.url = base + "/predict"
	case VLLM:
		p.url = base + "/classify"
	default:
		return nil, fmt.Errorf("promptguard: unknown API %q (want tei or vllm)", o.API)
	}
	for _, l := range o.MaliciousLabels {
		p.labels[strings.ToUpper(l)] = true
	}
	return p, nil
}

// Score returns the highest malicious score of text's segments, 0 for an
// empty text. Segments go out in batches, several batches at once, and the
// scoring stops early once a segment reaches stopAt (the caller's
// threshold: the verdict is then known). An endpoint failure, or ctx ending
// before the verdict is known, is an error wrapping ErrClassifier (or
// ctx's error).
func (p *Client) Score(ctx context.Context, text string, stopAt float64) (float64, error) {
	segs := Segment(text, p.o.MaxSegmentTokens-2, p.o.CountTokens) // [CLS] and [SEP]
	if len(segs) == 0 {
		return 0, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		maxScore float64
		firstErr error
		wg       sync.WaitGroup
	)
	sem := make(chan struct{}, p.o.Concurrency)
	for i := 0; i < len(segs) && ctx.Err() == nil; i += p.o.BatchSize {
		batch := segs[i:min(i+p.o.BatchSize, len(segs))]
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			scores, err := p.classify(ctx, batch)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil && ctx.Err() == nil {
					firstErr = err
					cancel()
				}
				return
			}
			for _, s := range scores {
				maxScore = max(maxScore, s)
			}
			if maxScore >= stopAt {
				cancel() // the verdict is known
			}
		})
	}
	wg.Wait()
	if maxScore >= stopAt {
		return maxScore, nil
	}
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err() // the caller's context ended
	}
	return maxScore, firstErr
}

// classify sends a batch of segments and returns their malicious scores.
func (p *Client) classify(ctx context.Context, texts []string) ([]float64, error) {
	var body any
	if p.o.API == TEI {
		body = struct {
			Inputs   []string `json:"inputs"`
			Truncate bool     `json:"truncate"`
		}{texts, true}
	} else {
		body = struct {
			Model string   `json:"model,omitempty"`
			Input []string `json:"input"`
		}{p.o.Model, texts}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrClassifier, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.o.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrClassifier, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: read %s: %v", ErrClassifier, p.url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: %s: %s: %.200s", ErrClassifier, p.url, resp.Status, data)
	}
	var scores []float64
	if p.o.API == TEI {
		scores, err = p.parseTEI(data, len(texts))
	} else {
		scores, err = p.parseVLLM(data, len(texts))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrClassifier, p.url, err)
	}
	return scores, nil
}

type labelScore struct {
	Label string   `json:"label"`
	Score *float64 `json:"score"`
}

// parseTEI reads a batch answer, [[{"label","score"}...]...], one list per input.
func (p *Client) parseTEI(data []byte, n int) ([]float64, error) {
	var batch [][]labelScore
	if err := json.Unmarshal(data, &batch); err != nil {
		return nil, fmt.Errorf("response is not a TEI batch prediction: %.100q", data)
	}
	if len(batch) != n {
		return nil, fmt.Errorf("want %d predictions, got %d", n, len(batch))
	}
	out := make([]float64, n)
	for i, preds := range batch {
		if len(preds) == 0 {
			return nil, errors.New("empty prediction")
		}
		seen := false
		for _, ls := range preds {
			if ls.Score == nil || *ls.Score < 0 || *ls.Score > 1 {
				return nil, fmt.Errorf("label %q: score missing or outside [0,1]", ls.Label)
			}
			if p.labels[strings.ToUpper(ls.Label)] {
				out[i], seen = max(out[i], *ls.Score), true
			}
		}
		if !seen {
			return nil, fmt.Errorf("no malicious label among %d labels (want one of %v)", len(preds), p.o.MaliciousLabels)
		}
	}
	return out, nil
}

// parseVLLM reads {"data":[{"index","probs":[...]}...]}.
func (p *Client) parseVLLM(data []byte, n int) ([]float64, error) {
	var r struct {
		Data []struct {
			Index int       `json:"index"`
			Probs []float64 `json:"probs"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("response is not a vLLM classification: %.100q", data)
	}
	if len(r.Data) != n {
		return nil, fmt.Errorf("want %d classifications, got %d", n, len(r.Data))
	}
	out := make([]float64, n)
	for _, d := range r.Data {
		if d.Index < 0 || d.Index >= n {
			return nil, fmt.Errorf("classification index %d out of range", d.Index)
		}
		if p.o.MaliciousIndex >= len(d.Probs) {
			return nil, fmt.Errorf("%d classes, no malicious class at index %d", len(d.Probs), p.o.MaliciousIndex)
		}
		s := d.Probs[p.o.MaliciousIndex]
		if s < 0 || s > 1 {
			return nil, fmt.Errorf("probability %v outside [0,1]", s)
		}
		out[d.Index] = s
	}
	return out, nil
}

// EstimateTokens over-estimates the tokens a subword tokenizer (DeBERTa's
// SentencePiece, byte-level BPE) makes of text, so that segments cut by it
// fit the model: an ASCII letter or digit run counts one token per 3
// characters (real vocabularies average about 4 on prose, whole common words
// being one token), every other ASCII symbol and every non-ASCII character
// one each, a whitespace run one, except a single space, which real
// tokenizers fold into the next word.
func EstimateTokens(text string) int {
	n, run, spaces := 0, 0, 0
	single := true
	for i := 0; i < len(text); {
		c := text[i]
		var class byte
		if c < utf8.RuneSelf {
			class = asciiClass[c]
			i++
		} else {
			r, size := utf8.DecodeRuneInString(text[i:])
			class = classOther
			if unicode.IsSpace(r) {
				class = classSpace
			}
			i += size
		}
		if class == classSpace {
			n += (run + 2) / 3
			run = 0
			spaces++
			single = single && c == ' '
			continue
		}
		if spaces > 1 || spaces == 1 && !single {
			n++
		}
		spaces, single = 0, true
		if class == classWord {
			run++
			continue
		}
		n += (run + 2) / 3
		run = 0
		n++
	}
	n += (run + 2) / 3
	if spaces > 1 || spaces == 1 && !single {
		n++
	}
	return n
}

// Character classes of EstimateTokens and nextWord, for the ASCII fast path.
const (
	classOther byte = iota
	classWord
	classSpace
)

var asciiClass = func() (t [utf8.RuneSelf]byte) {
	for c := range utf8.RuneSelf {
		r := rune(c)
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			t[c] = classWord
		case unicode.IsSpace(r):
			t[c] = classSpace
		}
	}
	return t
}()

// isSpaceAt reports whether s[i:] starts with white space, and its size.
func isSpaceAt(s string, i int) (bool, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c] == classSpace, 1
	}
	r, size := utf8.DecodeRuneInString(s[i:])
	return unicode.IsSpace(r), size
}

// Segment cuts text into consecutive pieces of at most budget tokens by
// count, at whitespace where it can; a word longer than the budget is cut
// by characters. Concatenated, the pieces give text back.
func Segment(text string, budget int, count func(string) int) []string {
	if text == "" {
		return nil
	}
	if budget < 1 {
		budget = 1
	}
	if count(text) <= budget {
		return []string{text}
	}
	var segs []string
	start, used := 0, 0
	// Walk words (a word with the whitespace before it).
	for i := 0; i < len(text); {
		j := nextWord(text, i)
		w := count(text[i:j])
		if used > 0 && used+w > budget {
			segs = append(segs, text[start:i])
			start, used = i, 0
		}
		if w > budget { // a giant word: cut it by characters
			k := i
			// A rune is at most one token, whatever count says of it alone.
			for k < j {
				m, u := k, 0
				for m < j && u < budget {
					_, size := utf8.DecodeRuneInString(text[m:])
					u++
					m += size
				}
				if m == j {
					used = u // the tail stays open for following words
					break
				}
				segs = append(segs, text[start:m])
				start, k = m, m
			}
			i = j
			continue
		}
		used += w
		i = j
	}
	if start < len(text) {
		segs = append(segs, text[start:])
	}
	return segs
}

// nextWord returns the end of the word starting at i: leading whitespace,
// then everything up to the next whitespace.
func nextWord(s string, i int) int {
	j := i
	for j < len(s) {
		sp, size := isSpaceAt(s, j)
		if !sp {
			break
		}
		j += size
	}
	for j < len(s) {
		sp, size := isSpaceAt(s, j)
		if sp {
			break
		}
		j += size
	}
	return j
}
