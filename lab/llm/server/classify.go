package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"

	"github.com/mcpguard/mcpguard/lab/llm/model"
)

// errEmptyInputs is an empty batch (TEI answers it with 400 "Empty").
var errEmptyInputs = errors.New("`inputs` cannot be empty")

// classifyInputs parses an input that is a string or an array of strings;
// batch reports which.
func classifyInputs(raw json.RawMessage) (texts []string, batch bool, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, false, errors.New("no inputs")
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, false, nil
	}
	if err := json.Unmarshal(raw, &texts); err != nil {
		return nil, false, errors.New("inputs must be a string or an array of strings")
	}
	if len(texts) == 0 {
		return nil, true, errEmptyInputs
	}
	return texts, true, nil
}

// encodeAll tokenizes every input as [CLS] text [SEP], cutting to keep
// tokens when keep > 0 and failing with model.ErrTooLong otherwise.
func (s *Server) encodeAll(texts []string, keep int) ([][]int32, int, error) {
	maxPos := s.enc.Shape().MaxPositions
	all := make([][]int32, len(texts))
	total := 0
	for i, t := range texts {
		ids := s.enc.Encode(t)
		if keep > 0 && len(ids) > keep {
			ids = append(ids[:keep-1], model.TokSEP)
		}
		if len(ids) > maxPos {
			return nil, 0, fmt.Errorf("input %d has %d tokens, more than the %d the model takes: %w", i, len(ids), maxPos, model.ErrTooLong)
		}
		all[i] = ids
		total += len(ids)
	}
	return all, total, nil
}

// runClassifier runs the encoder over each input in turn (each one uses
// every core) and returns the logits.
func (s *Server) runClassifier(ctx context.Context, all [][]int32) ([][]float32, error) {
	s.active.Add(1)
	s.requests.Add(1)
	defer s.active.Add(-1)
	out := make([][]float32, len(all))
	for i, ids := range all {
		logits, f, err := s.enc.Classify(ctx, ids)
		s.flops.Add(f)
		if err != nil {
			return nil, err
		}
		s.promptTokens.Add(int64(len(ids)))
		out[i] = logits
	}
	return out, nil
}

// predict serves text-embeddings-inference's /predict: a single input gets
// a list of {label, score} sorted by score, a batch a list of such lists.
func (s *Server) predict(w http.ResponseWriter, r *http.Request) {
	var req teiRequest
	if !decodeBody(w, r, &req) {
		return
	}
	// Status codes follow TEI's mapping of its error types: Empty 400,
	// Validation 413, Tokenizer 422, Backend 424.
	texts, batch, err := classifyInputs(req.Inputs)
	if errors.Is(err, errEmptyInputs) {
		writeJSON(w, http.StatusBadRequest, teiError{Error: err.Error(), ErrorType: "Empty"})
		return
	}
	if err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, teiError{Error: err.Error(), ErrorType: "Validation"})
		return
	}
	if len(texts) > s.cfg.MaxBatch {
		writeJSON(w, http.StatusRequestEntityTooLarge, teiError{
			Error: fmt.Sprintf("batch size %d > maximum allowed batch size %d", len(texts), s.cfg.MaxBatch), ErrorType: "Validation"})
		return
	}
	keep := 0
	if req.Truncate {
		keep = s.enc.Shape().MaxPositions
	}
	all, _, err := s.encodeAll(texts, keep)
	if err != nil {
		writeJSON(w, http.StatusRequestEntityTooLarge, teiError{Error: "Input validation error: " + err.Error(), ErrorType: "Validation"})
		return
	}
	logits, err := s.runClassifier(r.Context(), all)
	if err != nil {
		if r.Context().Err() == nil {
			writeJSON(w, http.StatusFailedDependency, teiError{Error: err.Error(), ErrorType: "Backend"})
		}
		return
	}
	labels := s.enc.Shape().Labels
	res := make([][]teiPrediction, len(logits))
	for i, l := range logits {
		if !req.RawScores {
			model.Softmax(l)
		}
		for j, v := range l {
			res[i] = append(res[i], teiPrediction{Label: labels[j], Score: v})
		}
		sort.SliceStable(res[i], func(a, b int) bool { return res[i][a].Score > res[i][b].Score })
	}
	if batch {
		writeJSON(w, http.StatusOK, res)
		return
	}
	writeJSON(w, http.StatusOK, res[0])
}

// classify serves vLLM's /classify.
func (s *Server) classify(w http.ResponseWriter, r *http.Request) {
	var req classifyRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Model != "" && req.Model != ClassifierName {
		writeError(w, http.StatusNotFound, "invalid_request_error", "model", "model_not_found",
			fmt.Sprintf("The model `%s` does not exist. This server classifies with %q.", req.Model, ClassifierName))
		return
	}
	texts, _, err := classifyInputs(req.Input)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "input", "invalid_value", err.Error())
		return
	}
	if len(texts) > s.cfg.MaxBatch {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "input", "invalid_value",
			fmt.Sprintf("batch of %d inputs, more than the %d allowed", len(texts), s.cfg.MaxBatch))
		return
	}
	keep := 0
	if req.TruncatePromptTokens != nil {
		keep = *req.TruncatePromptTokens
		if keep < 2 || keep > s.enc.Shape().MaxPositions {
			keep = s.enc.Shape().MaxPositions
		}
	}
	all, total, err := s.encodeAll(texts, keep)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "input", "context_length_exceeded",
			fmt.Sprintf("This model's maximum context length is %d tokens: %v", s.enc.Shape().MaxPositions, err))
		return
	}
	logits, err := s.runClassifier(r.Context(), all)
	if err != nil {
		if r.Context().Err() == nil {
			writeError(w, http.StatusInternalServerError, "server_error", "", "", err.Error())
		}
		return
	}
	labels := s.enc.Shape().Labels
	resp := classifyResponse{
		ID: s.id("classify"), Object: "list", Created: s.created, Model: ClassifierName,
		Usage: classifyUsage{PromptTokens: total, TotalTokens: total, Synthetic: true},
	}
	for i, l := range logits {
		p := model.Softmax(l)
		best := 0
		for j := range p {
			if p[j] > p[best] {
				best = j
			}
		}
		resp.Data = append(resp.Data, classifyData{Index: i, Label: labels[best], Probs: p, NumClasses: len(p)})
	}
	writeJSON(w, http.StatusOK, resp)
}
