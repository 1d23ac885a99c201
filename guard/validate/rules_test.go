package validate

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/mcpspec"
)

// Every message type of the MCP schema (both versions, both directions)
// has a rule: a judge for its params and, for a request, for its result.
func TestEveryMessageHasARule(t *testing.T) {
	assert.Empty(t, missingRules(rules))
	assert.Len(t, Rules(), len(mcpspec.Messages()))
}

// The coverage check fails when a rule is removed, when a judge is
// missing, and when a rule names a message the schema does not have.
func TestCoverageCheckFails(t *testing.T) {
	for _, m := range mcpspec.Messages() {
		table := map[string]rule{}
		for k, v := range rules {
			table[k] = v
		}
		delete(table, m.Key())
		assert.Equal(t, []string{m.Key() + ": no rule"}, missingRules(table), "without %s", m.Key())
	}
	table := map[string]rule{}
	for k, v := range rules {
		table[k] = v
	}
	table["client request tools/call"] = rule{params: judgeArguments}
	table["client request tools/execute"] = rule{params: judgeArguments, result: judgeText}
	require.Equal(t, []string{
		"client request tools/call: no judge for its result",
		"client request tools/execute: not a message type of the schema",
	}, missingRules(table))
}

// docs/policy.md lists every rule as the table has it.
func TestRulesDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/policy.md")
	require.NoError(t, err)
	for _, r := range Rules() {
		res := r.Result
		if res == "" {
			res = "–"
		}
		row := fmt.Sprintf("| %s | %s | `%s` | %s | %s |", r.Message.From, r.Message.Kind, r.Message.Method, r.Params, res)
		assert.Contains(t, string(b), row, "docs/policy.md's table of rules")
	}
}
