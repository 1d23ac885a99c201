package server

import (
	"encoding/json"
	"strings"
)

// Wire types of the OpenAI chat completions API, the subset the server reads
// and writes. Field names and types follow the API reference.

type chatRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	Tools               []tool          `json:"tools,omitempty"`
	ToolChoice          json.RawMessage `json:"tool_choice,omitempty"`
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       *streamOptions  `json:"stream_options,omitempty"`
	MaxTokens           *int            `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int            `json:"max_completion_tokens,omitempty"`
	ResponseFormat      *responseFormat `json:"response_format,omitempty"`
	N                   *int            `json:"n,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type responseFormat struct {
	Type       string          `json:"type"`
	JSONSchema *jsonSchemaSpec `json:"json_schema,omitempty"`
}

type jsonSchemaSpec struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict,omitempty"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  []toolCall      `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

// text returns the message's content: a string, or the text parts of an
// array of content parts joined.
func (m *chatMessage) text() (string, bool) {
	c := m.Content
	if len(c) == 0 || string(c) == "null" {
		return "", true
	}
	var s string
	if err := json.Unmarshal(c, &s); err == nil {
		return s, true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(c, &parts); err != nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String(), true
}

type tool struct {
	Type     string       `json:"type"`
	Function toolFunction `json:"function"`
}

type toolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

type toolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// Usage is the token accounting of a response. Synthetic is always true: the
// counts are real, the weights are not.
type Usage struct {
	PromptTokens     int  `json:"prompt_tokens"`
	CompletionTokens int  `json:"completion_tokens"`
	TotalTokens      int  `json:"total_tokens"`
	Synthetic        bool `json:"synthetic"`
}

type chatResponse struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []chatChoice `json:"choices"`
	Usage             Usage        `json:"usage"`
}

type chatChoice struct {
	Index        int             `json:"index"`
	Message      responseMessage `json:"message"`
	Logprobs     *struct{}       `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
}

type responseMessage struct {
	Role      string     `json:"role"`
	Content   *string    `json:"content"`
	Refusal   *string    `json:"refusal"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
}

type chunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"`
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	SystemFingerprint string        `json:"system_fingerprint"`
	Choices           []chunkChoice `json:"choices"`
	// Usage is null on every chunk but the last when include_usage is set,
	// and left out otherwise, as the API does.
	Usage *Usage `json:"usage,omitempty"`
}

// chunkWithNullUsage marshals a chunk with "usage": null.
type chunkWithNullUsage struct {
	chunk
	Usage *Usage `json:"usage"`
}

type chunkChoice struct {
	Index        int       `json:"index"`
	Delta        delta     `json:"delta"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type delta struct {
	Role      string     `json:"role,omitempty"`
	Content   *string    `json:"content,omitempty"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
}

type modelList struct {
	Object string      `json:"object"`
	Data   []modelInfo `json:"data"`
}

type modelInfo struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// apiError is the body of every OpenAI-style error response.
type apiError struct {
	Error apiErrorBody `json:"error"`
}

type apiErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// Text Embeddings Inference /predict.

type teiRequest struct {
	Inputs    json.RawMessage `json:"inputs"`
	Truncate  bool            `json:"truncate,omitempty"`
	RawScores bool            `json:"raw_scores,omitempty"`
}

type teiPrediction struct {
	Label string  `json:"label"`
	Score float32 `json:"score"`
}

type teiError struct {
	Error     string `json:"error"`
	ErrorType string `json:"error_type"`
}

// vLLM /classify.

type classifyRequest struct {
	Model                string          `json:"model"`
	Input                json.RawMessage `json:"input"`
	TruncatePromptTokens *int            `json:"truncate_prompt_tokens,omitempty"`
}

type classifyResponse struct {
	ID      string         `json:"id"`
	Object  string         `json:"object"`
	Created int64          `json:"created"`
	Model   string         `json:"model"`
	Data    []classifyData `json:"data"`
	Usage   classifyUsage  `json:"usage"`
}

type classifyData struct {
	Index      int       `json:"index"`
	Label      string    `json:"label"`
	Probs      []float32 `json:"probs"`
	NumClasses int       `json:"num_classes"`
}

type classifyUsage struct {
	PromptTokens        int       `json:"prompt_tokens"`
	TotalTokens         int       `json:"total_tokens"`
	CompletionTokens    int       `json:"completion_tokens"`
	PromptTokensDetails *struct{} `json:"prompt_tokens_details"`
	Synthetic           bool      `json:"synthetic"`
}
