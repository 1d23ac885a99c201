package guard_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcpguard/mcpguard/guard"
)

func TestFilterTools(t *testing.T) {
	list := json.RawMessage(`{"tools":[{"name":"a"},{"name":"b"},{"name":"c"}],"nextCursor":"x"}`)
	notB := func(raw json.RawMessage) bool { return !strings.Contains(string(raw), `"b"`) }
	assert.JSONEq(t, `{"tools":[{"name":"a"},{"name":"c"}],"nextCursor":"x"}`, string(guard.FilterTools(list, notB)))
	assert.Nil(t, guard.FilterTools(list, func(json.RawMessage) bool { return true }), "nothing dropped: the caller relays the original")
	assert.JSONEq(t, `{"tools":[],"nextCursor":"x"}`, string(guard.FilterTools(list, func(json.RawMessage) bool { return false })))
	for _, bad := range []string{``, `[]`, `{"tools":{}}`, `{"tools":"x"}`, `not json`} {
		assert.Nil(t, guard.FilterTools(json.RawMessage(bad), notB), "%q is not a tools list", bad)
	}
}
