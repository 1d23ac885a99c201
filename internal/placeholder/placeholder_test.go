package placeholder

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"WS": `/w "q"\x`, "HOME": "/home/u"}
	got, err := Expand([]byte(`{"a":"${WS}/f","b":"^a+$","c":"${HOME}"}`), vars)
	require.NoError(t, err)
	assert.Equal(t, `{"a":"/w \"q\"\\x/f","b":"^a+$","c":"/home/u"}`, string(got))

	_, err = Expand([]byte(`{"a":"${NOPE}","b":"${ALSO}"}`), vars)
	require.EqualError(t, err, "unknown placeholder(s) ${NOPE}, ${ALSO}")
}
