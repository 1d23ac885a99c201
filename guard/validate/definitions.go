package validate

import (
	"encoding/json"
	"fmt"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/audit"
)

// Rule ids of the definition and server-message checks.
const (
	RuleDefinitionPoisoned = "definition.poisoned"
	RuleDefinitionChanged  = "definition.rug_pull"
	RuleInstructions       = "initialize.instructions"
	RuleServerMessage      = "server_message.prompt_injection"
)

// listKeys maps each list method to the key of its items and the field
// that names an item.
var listKeys = map[string][2]string{
	"prompts/list":             {"prompts", "name"},
	"resources/list":           {"resources", "uri"},
	"resources/templates/list": {"resourceTemplates", "uriTemplate"},
}

// definitions judges a prompts, resources or resource templates list as
// tools/list is judged: every string of every item (name, title,
// description, arguments, annotations, _meta) is checked for poisoning,
// and each item is pinned whole at first sight; a poisoned or changed
// item is removed from the list (a logged rewrite).
func (s *session) definitions(req *guard.Request, resp *guard.Response) *guard.Response {
	keys, ok := listKeys[req.Method]
	if !ok || resp == nil || resp.Error != nil || len(resp.Result) == 0 {
		return resp
	}
	var res map[string]json.RawMessage
	if json.Unmarshal(resp.Result, &res) != nil {
		return resp
	}
	var items []json.RawMessage
	if json.Unmarshal(res[keys[0]], &items) != nil {
		return resp
	}
	kept := items[:0:0]
	for _, raw := range items {
		var id map[string]any
		json.Unmarshal(raw, &id)
		name, _ := id[keys[1]].(string)
		pinKey := req.Method + "\x00" + name
		if rule, reason := s.judgeDefinition(pinKey, name, raw); rule != "" {
			s.log(&guard.Request{Method: req.Method}, audit.Rewrite, rule, name, reason+"; removed from "+req.Method)
			continue
		}
		kept = append(kept, raw)
	}
	if len(kept) == len(items) {
		return resp
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return guard.Deny(Layer, RuleResponseMalforms, req.Method+" could not be re-encoded")
	}
	res[keys[0]] = b
	out, err := json.Marshal(res)
	if err != nil {
		return guard.Deny(Layer, RuleResponseMalforms, req.Method+" could not be re-encoded")
	}
	return &guard.Response{Result: out}
}

// judgeDefinition pins and checks one listed prompt or resource.
func (s *session) judgeDefinition(pinKey, name string, raw json.RawMessage) (rule, reason string) {
	digest := DefinitionDigest(raw)
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.blocked[pinKey]; ok {
		return r, fmt.Sprintf("%q was blocked earlier in this session", name)
	}
	if pin, ok := s.pins[pinKey]; ok {
		if pin != digest {
			s.blocked[pinKey] = RuleDefinitionChanged
			return RuleDefinitionChanged, fmt.Sprintf("definition of %q changed after first sight", name)
		}
		return "", ""
	}
	s.pins[pinKey] = digest
	if f, ok := FindPoisoning(schemaText(raw)); ok {
		s.blocked[pinKey] = RuleDefinitionPoisoned
		return RuleDefinitionPoisoned, fmt.Sprintf("definition of %q looks poisoned (%s)", name, f.Kind)
	}
	return "", ""
}

// initialize drops the server's instructions when they carry an injection,
// hidden characters or a secret: the client hands them to the model.
func (s *session) initialize(req *guard.Request, resp *guard.Response) *guard.Response {
	if resp == nil || resp.Error != nil || len(resp.Result) == 0 {
		return resp
	}
	var res map[string]json.RawMessage
	if json.Unmarshal(resp.Result, &res) != nil {
		return resp
	}
	var instr string
	if json.Unmarshal(res["instructions"], &instr) != nil || instr == "" {
		return resp
	}
	f, ok := FindPoisoning(instr)
	if !ok {
		f, ok = FindSecretDeep(instr)
	}
	if !ok {
		return resp
	}
	delete(res, "instructions")
	out, err := json.Marshal(res)
	if err != nil {
		return guard.Deny(Layer, RuleResponseMalforms, "initialize result could not be re-encoded")
	}
	s.log(req, audit.Rewrite, RuleInstructions, f.Kind, fmt.Sprintf("the server's instructions were removed (%s)", f.Kind))
	return &guard.Response{Result: out}
}

// ServerMessageVerdict is what ScanServerMessage decided.
type ServerMessageVerdict struct {
	// Drop: the message carries a prompt injection; a notification is
	// to be dropped, a request answered with an error in the client's
	// stead.
	Drop bool
	// Params is the message's params with hidden characters stripped and
	// secrets redacted, or nil when nothing changed.
	Params json.RawMessage
	// Finding says what was found (Kind), when Drop or Params is set.
	Finding Finding
}

// ScanServerMessage checks what a server sends the client on its own,
// outside an answer: notifications/message (log data), sampling/
// createMessage (messages and a system prompt the client's model will
// read) and elicitation/create (a message and a schema the user reads).
// Every string of params is read as FindInjection reads it, alone and
// joined; secrets are redacted and hidden characters stripped. Other
// methods, and params it cannot read, are passed (zero verdict).
func ScanServerMessage(method string, params json.RawMessage) ServerMessageVerdict {
	switch method {
	case "notifications/message", "sampling/createMessage", "elicitation/create":
	default:
		return ServerMessageVerdict{}
	}
	var v any
	if len(params) == 0 || json.Unmarshal(params, &v) != nil {
		return ServerMessageVerdict{}
	}
	texts := readingOrder(v, nil)
	var found *Finding
	changed := false
	v = walkValues(v, func(str string) string {
		if found == nil {
			if f, ok := FindInjection(str); ok {
				found = &f
			}
		}
		if _, ok := FindHidden(str); ok {
			str = StripHidden(str)
			changed = true
		}
		if red, kinds := RedactSecrets(str); len(kinds) > 0 {
			str = red
			changed = true
		}
		return str
	})
	if found == nil && len(texts) > 1 {
		for _, sep := range []string{" ", ""} {
			if f, ok := FindInjection(joinStrings(texts, sep)); ok {
				f.Kind = "split_" + f.Kind
				found = &f
				break
			}
		}
	}
	if found != nil {
		return ServerMessageVerdict{Drop: true, Finding: *found}
	}
	if !changed {
		return ServerMessageVerdict{}
	}
	out, err := json.Marshal(v)
	if err != nil {
		return ServerMessageVerdict{Drop: true, Finding: Finding{Kind: "unencodable"}}
	}
	return ServerMessageVerdict{Params: out, Finding: Finding{Kind: "sanitised"}}
}

func joinStrings(ss []string, sep string) string {
	n := 0
	for _, s := range ss {
		n += len(s) + len(sep)
	}
	b := make([]byte, 0, n)
	for i, s := range ss {
		if i > 0 {
			b = append(b, sep...)
		}
		b = append(b, s...)
	}
	return string(b)
}
