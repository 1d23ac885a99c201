//go:build linux

package auditlog

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestReaderEvents: an event ends at its end-of-event record, or when the
// next event's records begin; events without a Landlock record are not
// denials.
func TestReaderEvents(t *testing.T) {
	r := &Reader{}
	var got []Denial
	feed := func(typ int, text string) {
		if d, ok := r.add(typ, text); ok {
			got = append(got, d)
		}
	}
	for _, e := range event {
		feed(e.typ, e.text)
	}
	assert.Len(t, got, 1, "ended by its EOE record")
	feed(1423, `audit(2.0:341): domain=1d8f5bdc2 blockers=fs.read_file path="/root/.profile" dev="vda" ino=1250`)
	feed(1300, `audit(2.0:341): syscall=257 pid=11967 comm="python3"`)
	feed(1334, `audit(2.1:342): op=something`) // another event begins: 341 is complete
	assert.Len(t, got, 2)
	assert.Equal(t, "/root/.profile", got[1].Path)
	assert.Equal(t, 11967, got[1].PID)
	feed(1320, `audit(2.1:342): `)
	assert.Len(t, got, 2, "342 holds no Landlock record")
	d, ok := r.flush()
	assert.False(t, ok, "nothing pending: %+v", d)
}
