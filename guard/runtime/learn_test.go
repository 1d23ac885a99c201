package runtime

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLearn(t *testing.T) {
	seen := []Access{
		{Path: "/usr/lib/x86_64-linux-gnu/libc.so.6"},
		{Path: "/opt/app/node_modules/@s/plugin/dist/index.js"},
		{Path: "/opt/app/node_modules/@s/plugin/package.json"},
		{Path: "/srv/py/site-packages/yaml/__init__.py"},
		{Path: "/opt/tools/helper", Exec: true},
		{Path: "/home/u/.config/app/settings.ini"},
		{Path: "/ws/notes/a.txt"},
	}
	l := Learn(seen, func(p string) bool { return strings.HasPrefix(p, "/usr/") })
	assert.Equal(t, []string{"/opt/app/node_modules/@s/plugin", "/srv/py/site-packages/yaml"}, l.Read)
	assert.Equal(t, []string{"/opt/tools/helper"}, l.Exec)
	assert.Equal(t, []string{"/home/u/.config/app/settings.ini", "/ws/notes/a.txt"}, l.Data, "data is reported, never granted")
}
