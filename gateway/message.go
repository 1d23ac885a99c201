package gateway

import (
	"bytes"
	"encoding/json"
)

var progressKey = []byte(`"progressToken"`)

// progressToken is params._meta.progressToken of a request, or params.
// progressToken of a notifications/progress, as a canonical key.
func progressToken(line []byte, notification bool) string {
	if !bytes.Contains(line, progressKey) {
		return "" // the common case, without decoding
	}
	var m struct {
		Params struct {
			Token json.RawMessage `json:"progressToken"`
			Meta  struct {
				Token json.RawMessage `json:"progressToken"`
			} `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil {
		return ""
	}
	if notification {
		return canonID(m.Params.Token)
	}
	return canonID(m.Params.Meta.Token)
}

// toolName is params.name of a tools/call.
func toolName(body []byte) string {
	var m struct {
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	json.Unmarshal(body, &m)
	return m.Params.Name
}
