package validate

import (
	"fmt"
	"sort"

	"github.com/mcpguard/mcpguard/guard/mcpspec"
)

// judge is what L2 (with L1 where it says so) reads in one part of a
// message: a message's params, or the result that answers a request.
// Every row of the MCP table (guard/mcpspec) has one for each part; the
// zero value is no judge at all, which TestEveryMessageHasARule refuses.
// Whatever the judge, the part is first read by exact keys (mcpspec's
// shapes): a key that differs only in case from a member the schema names
// is refused.
type judge uint8

const (
	judgeUnset judge = iota
	// judgeKeys: nothing but ids, cursors, levels, numbers, capabilities
	// and names: the exact-key reading is the whole judgement.
	judgeKeys
	// judgeArguments: a client request that names a tool and its
	// arguments, a resource URI, or prompt and completion values: L1
	// confines every path, URL and command in it to the policy, and L2
	// scans its values for secrets and environment references
	// (policy.Stage, before this layer).
	judgeArguments
	// judgeText: text the model or the user reads (a tool's result, a
	// resource, a prompt, a log line, a progress or task status message,
	// a sampling request, an elicitation's message): every string and
	// key is read as the model reads it; a prompt injection refuses the
	// message, hidden characters are stripped and secrets redacted.
	judgeText
	// judgeTools: a tools/list result: each tool is pinned at first sight
	// and removed (said on stderr) when its definition is poisoned or
	// changes later (a rug pull); the rest of the result as judgeText.
	judgeTools
	// judgeDefinitions: a prompts, resources or resource templates list:
	// as judgeTools, item by item.
	judgeDefinitions
	// judgeInitialize: the server's instructions are removed when they are
	// poisoned or carry a secret; the rest as judgeText.
	judgeInitialize
	// judgeSecrets: what the client hands the server besides a request (a
	// sampling answer, a notification): a secret in any string refuses it.
	judgeSecrets
	// judgeValues: elicitation form values the user typed: as
	// judgeSecrets, and each value is judged as a prompt argument by L1
	// (paths and URLs confined to the policy's roots and network list).
	judgeValues
	// judgeRoots: the roots the client offers the server: a root outside
	// the policy's roots is removed from the answer (said on stderr).
	judgeRoots
	// judgeTasks: a task's payload (tasks/result), whose shape is the
	// answer to the request that started the task: sent by the server, as
	// judgeText; sent by the client, as judgeSecrets.
	judgeTasks
)

var judgeNames = map[judge]string{
	judgeKeys: "keys", judgeArguments: "arguments", judgeText: "text", judgeTools: "tools",
	judgeDefinitions: "definitions", judgeInitialize: "initialize", judgeSecrets: "secrets",
	judgeValues: "values", judgeRoots: "roots", judgeTasks: "tasks",
}

func (j judge) String() string { return judgeNames[j] }

// rule judges one row of the MCP table: its params as the sender sends
// them and, for a request, the result the other side answers with.
type rule struct{ params, result judge }

// rules is the rule of every message type of the MCP schema, by
// mcpspec.Key. A message whose type has no row is refused (unless the
// policy allows its method: Options.AllowMethods).
var rules = map[string]rule{
	// The client's requests; the server answers.
	"client request initialize":               {judgeKeys, judgeInitialize},
	"client request ping":                     {judgeKeys, judgeText},
	"client request resources/list":           {judgeKeys, judgeDefinitions},
	"client request resources/templates/list": {judgeKeys, judgeDefinitions},
	"client request resources/read":           {judgeArguments, judgeText},
	"client request resources/subscribe":      {judgeArguments, judgeText},
	"client request resources/unsubscribe":    {judgeArguments, judgeText},
	"client request prompts/list":             {judgeKeys, judgeDefinitions},
	"client request prompts/get":              {judgeArguments, judgeText},
	"client request tools/list":               {judgeKeys, judgeTools},
	"client request tools/call":               {judgeArguments, judgeText},
	"client request logging/setLevel":         {judgeKeys, judgeText},
	"client request completion/complete":      {judgeArguments, judgeText},
	"client request tasks/get":                {judgeKeys, judgeText},
	"client request tasks/result":             {judgeKeys, judgeTasks},
	"client request tasks/cancel":             {judgeKeys, judgeText},
	"client request tasks/list":               {judgeKeys, judgeText},
	// The client's notifications.
	"client notification notifications/cancelled":          {judgeSecrets, 0},
	"client notification notifications/initialized":        {judgeKeys, 0},
	"client notification notifications/progress":           {judgeSecrets, 0},
	"client notification notifications/roots/list_changed": {judgeKeys, 0},
	"client notification notifications/tasks/status":       {judgeSecrets, 0},
	// The server's requests; the client answers.
	"server request ping":                   {judgeText, judgeKeys},
	"server request sampling/createMessage": {judgeText, judgeSecrets},
	"server request roots/list":             {judgeText, judgeRoots},
	"server request elicitation/create":     {judgeText, judgeValues},
	"server request tasks/get":              {judgeText, judgeSecrets},
	"server request tasks/result":           {judgeText, judgeTasks},
	"server request tasks/cancel":           {judgeText, judgeSecrets},
	"server request tasks/list":             {judgeText, judgeSecrets},
	// The server's notifications.
	"server notification notifications/cancelled":              {judgeText, 0},
	"server notification notifications/progress":               {judgeText, 0},
	"server notification notifications/resources/list_changed": {judgeText, 0},
	"server notification notifications/resources/updated":      {judgeText, 0},
	"server notification notifications/prompts/list_changed":   {judgeText, 0},
	"server notification notifications/tools/list_changed":     {judgeText, 0},
	"server notification notifications/message":                {judgeText, 0},
	"server notification notifications/tasks/status":           {judgeText, 0},
	"server notification notifications/elicitation/complete":   {judgeText, 0},
}

// missingRules lists the rows of the MCP table that table gives no rule
// (or a rule without a judge for a part the row has), and the rules that
// name no row.
func missingRules(table map[string]rule) []string {
	var out []string
	rows := map[string]bool{}
	for _, m := range mcpspec.Messages() {
		k := m.Key()
		rows[k] = true
		r, ok := table[k]
		switch {
		case !ok:
			out = append(out, k+": no rule")
		case r.params == judgeUnset:
			out = append(out, k+": no judge for its params")
		case m.Kind == mcpspec.Request && r.result == judgeUnset:
			out = append(out, k+": no judge for its result")
		case m.Kind == mcpspec.Notification && r.result != judgeUnset:
			out = append(out, k+": a notification has no result")
		}
	}
	for k := range table {
		if !rows[k] {
			out = append(out, k+": not a message type of the schema")
		}
	}
	sort.Strings(out)
	return out
}

// RuleInfo describes the rule of one message type, for documentation
// and for the layers' consistency tests.
type RuleInfo struct {
	Message mcpspec.Message
	// Params and Result name the judges (judge's constants, without the
	// prefix: "arguments", "text", ...); Result is "" for notifications.
	Params, Result string
}

// Rules returns the rule of every message type of the MCP table, in the
// table's order. It panics on a row without a rule (a build that forgot
// one fails its tests first).
func Rules() []RuleInfo {
	var out []RuleInfo
	for _, m := range mcpspec.Messages() {
		r, ok := rules[m.Key()]
		if !ok {
			panic(fmt.Sprintf("validate: no rule for %s", m.Key()))
		}
		info := RuleInfo{Message: m, Params: r.params.String()}
		if r.result != judgeUnset {
			info.Result = r.result.String()
		}
		out = append(out, info)
	}
	return out
}
