package server

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode"

	"github.com/mcpguard/mcpguard/lab/llm/model"
)

// renderPrompt lays the conversation out in a ChatML template, as Qwen2's
// chat template does: tools described in the system turn, tool calls inside
// <tool_call> markers, tool results as <tool_response> in a user turn, and
// the assistant turn opened for generation. It returns the token ids the
// model prefills.
func renderPrompt(tok *model.Tokenizer, req *chatRequest, texts []string) []int32 {
	ids := make([]int32, 0, 256)
	turn := func(role, body string) {
		ids = append(ids, model.TokImStart)
		ids = tok.Encode(ids, role+"\n")
		ids = tok.Encode(ids, body)
		ids = append(ids, model.TokImEnd)
		ids = tok.Encode(ids, "\n")
	}
	first := 0
	if len(req.Tools) > 0 {
		var b strings.Builder
		if len(req.Messages) > 0 && req.Messages[0].Role == "system" {
			b.WriteString(texts[0])
			first = 1
		} else {
			b.WriteString("You are a helpful assistant.")
		}
		b.WriteString("\n\n# Tools\n\nYou may call one or more of these functions for the user's request. Their signatures are in <tools></tools>:\n<tools>\n")
		for _, t := range req.Tools {
			j, _ := json.Marshal(t)
			b.Write(j)
			b.WriteByte('\n')
		}
		b.WriteString("</tools>\n\nFor each call, answer with a JSON object holding the function's name and arguments inside <tool_call></tool_call> tags.")
		turn("system", b.String())
	}
	for i := first; i < len(req.Messages); i++ {
		m := &req.Messages[i]
		switch m.Role {
		case "tool":
			turn("user", "<tool_response>\n"+texts[i]+"\n</tool_response>")
		case "assistant":
			ids = append(ids, model.TokImStart)
			ids = tok.Encode(ids, "assistant\n")
			ids = tok.Encode(ids, texts[i])
			for _, c := range m.ToolCalls {
				ids = append(ids, model.TokToolCall)
				ids = tok.Encode(ids, fmt.Sprintf("\n{\"name\": %q, \"arguments\": %s}\n", c.Function.Name, c.Function.Arguments))
				ids = append(ids, model.TokToolEnd)
			}
			ids = append(ids, model.TokImEnd)
			ids = tok.Encode(ids, "\n")
		default:
			turn(m.Role, texts[i])
		}
	}
	ids = append(ids, model.TokImStart)
	return tok.Encode(ids, "assistant\n")
}

// plan is what the script makes the model say.
type plan struct {
	// tool and args, when tool is set, make a tool call.
	tool, args string
	// text is the content otherwise (also a JSON document for a judge).
	text string
	// answer, when positive, is a generated answer of that many tokens
	// (text then is empty).
	answer int
}

var (
	absPath = regexp.MustCompile("(?:^|[\\s(\"'`=:])(/[^\\s\"'`,;)]*)")
	quoted  = regexp.MustCompile("\"([^\"\\n]{1,200})\"|'([^'\\n]{1,200})'|`([^`\\n]{1,200})`")
	// injection lists phrases of prompt injections the judge flags.
	injection = regexp.MustCompile(`(?i)ignore (all |any )?(the )?(previous|prior|above|earlier) (instructions|prompts?|messages)|disregard (all |any )?(the )?(previous|prior|above)|forget (all |your )?(previous |prior )?instructions|you are now (in )?(developer|dan|jailbreak)|new instructions:|reveal (your|the) system prompt|[\x{E0000}-\x{E007F}]`)
)

// decide picks what to emit for a request, deterministically:
//   - a response_format of json_schema or json_object gets a JSON document
//     (an AlignmentCheck-style judge gets {observation, thought, conclusion},
//     conclusion true only when the conversation holds injection text);
//   - tools, a user turn last and tool_choice not "none" get a tool call: the
//     tool whose name best matches the user's words, its path-like argument
//     set to the first absolute path (or quoted name) in the user message;
//   - anything else (notably after a tool result) gets an answer of
//     answerTokens tokens.
func decide(req *chatRequest, texts []string, answerTokens int) plan {
	if rf := req.ResponseFormat; rf != nil && (rf.Type == "json_schema" || rf.Type == "json_object") {
		return plan{text: judge(req, texts)}
	}
	last := len(req.Messages) - 1
	choice := toolChoice(req.ToolChoice)
	if len(req.Tools) > 0 && choice != "none" && req.Messages[last].Role == "user" {
		if t, args, ok := pickTool(req.Tools, texts[last], choice); ok {
			return plan{tool: t, args: args}
		}
	}
	return plan{answer: answerTokens}
}

// toolChoice returns "auto", "none", "required" or the forced function's name.
func toolChoice(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "auto"
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var f struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &f) == nil && f.Function.Name != "" {
		return "=" + f.Function.Name
	}
	return "auto"
}

// target returns the first absolute path in text, else the first quoted name.
func target(text string) string {
	if m := absPath.FindStringSubmatch(text); m != nil {
		return strings.TrimRight(m[1], ".!?")
	}
	if m := quoted.FindStringSubmatch(text); m != nil {
		for _, g := range m[1:] {
			if g != "" {
				return g
			}
		}
	}
	return ""
}

type param struct {
	name, typ string
	required  bool
}

func params(raw json.RawMessage) []param {
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(raw, &s)
	req := map[string]bool{}
	for _, r := range s.Required {
		req[r] = true
	}
	var out []param
	for name, p := range s.Properties {
		typ, _ := p.Type.(string)
		out = append(out, param{name: name, typ: typ, required: req[name]})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].required != out[j].required {
			return out[i].required
		}
		return out[i].name < out[j].name
	})
	return out
}

func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// pickTool scores each tool by how many words of its name (read_file: read,
// file) start a word of the user's message, preferring tools with a
// path-like parameter when the message names a path.
func pickTool(tools []tool, user, choice string) (string, string, bool) {
	tgt := target(user)
	uw := words(user)
	best, bestScore := -1, -1
	for i, t := range tools {
		if strings.HasPrefix(choice, "=") && t.Function.Name != choice[1:] {
			continue
		}
		score := 0
		for _, nw := range words(strings.ReplaceAll(t.Function.Name, "_", " ")) {
			for _, w := range uw {
				if len(nw) >= 3 && (strings.HasPrefix(w, nw) || strings.HasPrefix(nw, w) && len(w) >= 3) {
					score += 2
					break
				}
			}
		}
		if tgt != "" && pathParam(params(t.Function.Parameters)) != "" {
			score++
		}
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	if best < 0 || (bestScore == 0 && choice == "auto") {
		return "", "", false
	}
	t := tools[best].Function
	ps := params(t.Parameters)
	pp := pathParam(ps)
	args := map[string]any{}
	for _, p := range ps {
		switch {
		case p.name == pp:
			args[p.name] = tgt
		case !p.required:
		case p.typ == "string":
			args[p.name] = ""
		case p.typ == "integer" || p.typ == "number":
			args[p.name] = 0
		case p.typ == "boolean":
			args[p.name] = false
		case p.typ == "array":
			if tgt != "" {
				args[p.name] = []string{tgt}
			} else {
				args[p.name] = []string{}
			}
		default:
			args[p.name] = map[string]any{}
		}
	}
	b, _ := json.Marshal(args)
	return t.Name, string(b), true
}

// pathParam returns the parameter a path or name goes into: the first string
// parameter named like one, else the first required string parameter.
func pathParam(ps []param) string {
	for _, p := range ps {
		n := strings.ToLower(p.name)
		if p.typ == "string" && (strings.Contains(n, "path") || strings.Contains(n, "file") || n == "name" || strings.Contains(n, "uri") || strings.Contains(n, "url") || n == "dir" || n == "directory") {
			return p.name
		}
	}
	for _, p := range ps {
		if p.required && p.typ == "string" {
			return p.name
		}
	}
	return ""
}

// judge writes a JSON document that fits the requested schema: the
// AlignmentCheck fields get text about the trace and a conclusion that is
// true only when the trace holds injection text; other properties get a
// value of their type.
func judge(req *chatRequest, texts []string) string {
	flagged := false
	chars := 0
	for i, m := range req.Messages {
		if m.Role == "system" {
			continue
		}
		chars += len(texts[i])
		if injection.MatchString(texts[i]) {
			flagged = true
		}
		for _, c := range m.ToolCalls {
			if injection.MatchString(c.Function.Arguments) {
				flagged = true
			}
		}
	}
	obs := fmt.Sprintf("The trace has %d messages and %d characters of user, assistant and tool text.", len(req.Messages), chars)
	thought := "The actions follow the user's request; no instruction in the tool output redirects the agent."
	if flagged {
		thought = "A message in the trace carries instructions that try to override the user's request."
	}
	var props []param
	if rf := req.ResponseFormat; rf.JSONSchema != nil {
		props = params(rf.JSONSchema.Schema)
	}
	if len(props) == 0 {
		props = []param{{name: "observation", typ: "string"}, {name: "thought", typ: "string"}, {name: "conclusion", typ: "boolean"}}
	}
	out := map[string]any{}
	for _, p := range props {
		switch {
		case p.name == "observation":
			out[p.name] = obs
		case p.name == "thought":
			out[p.name] = thought
		case p.typ == "boolean":
			out[p.name] = flagged
		case p.typ == "integer" || p.typ == "number":
			out[p.name] = 0
		case p.typ == "array":
			out[p.name] = []any{}
		case p.typ == "object":
			out[p.name] = map[string]any{}
		default:
			out[p.name] = "synthetic"
		}
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// answerWords are the words a generated answer is drawn from: each is one
// token with its leading space.
var answerWords = strings.Fields("the file holds text about a tool call and its result which the agent read from disk so this answer sums up what it says in short form for the user to check each line of output was seen")

// answerPieces returns n pieces of a deterministic answer.
func answerPieces(tok *model.Tokenizer, n int, seed uint64) []string {
	out := tok.Pieces("Here is what the tool returned.")
	s := seed
	for len(out) < n {
		s = s*6364136223846793005 + 1442695040888963407
		out = append(out, " "+answerWords[(s>>33)%uint64(len(answerWords))])
		if len(out)%16 == 15 {
			out = append(out, ".")
		}
	}
	return out[:n]
}
