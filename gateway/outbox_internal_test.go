package gateway

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waitingBytes sums what o's streams hold unwritten: the accounting's
// oracle, counted from the events themselves.
func waitingBytes(o *outbox) int {
	n := 0
	for _, st := range o.streams {
		for _, e := range st.events {
			if e.seq > st.delivered {
				n += len(e.data)
			}
		}
	}
	return n
}

func progressLine(i, size int) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":%d,"message":"%s"}}`,
		i, bytes.Repeat([]byte{'x'}, size))
}

// A client that leaves its streams unread (red team: 31 requests of large
// progress messages, connections dropped after the priming event, held
// 595 MB in 8 s) holds a session's bytes to queuedBytes; the responses
// all stay, and what is read after is the newest messages, in order.
func TestOutboxBytesBounded(t *testing.T) {
	o := newOutbox(func(string, ...any) {})
	const streams, per, size = 4, 200, 100 << 10
	var sts []*stream
	for i := range streams {
		st, w, ok := o.open(fmt.Sprintf("n%d", i), "", true)
		require.True(t, ok)
		o.markResumable(st)
		o.detach(st, w) // the connection dropped after the priming event
		sts = append(sts, st)
	}
	for i := range per {
		for _, st := range sts {
			o.mu.Lock()
			o.push(st, progressLine(i, size))
			o.mu.Unlock()
			require.Equal(t, waitingBytes(o), o.queued)
			require.LessOrEqual(t, o.queued, queuedBytes)
		}
	}
	require.Greater(t, o.dropped, 0)
	// The responses come when the session is full: none is dropped.
	for i := range streams {
		require.True(t, o.respond(fmt.Sprintf("n%d", i), fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"result":{}}`, i)))
		assert.Equal(t, waitingBytes(o), o.queued)
	}
	assert.LessOrEqual(t, o.queued, queuedBytes)
	for i, st := range sts {
		got, w, err := o.resume(st.no, 0)
		require.NoError(t, err)
		require.Same(t, st, got)
		evs, final, lost := o.take(st, w, nil)
		require.False(t, lost)
		require.True(t, final, "the response ends the stream")
		require.NotEmpty(t, evs)
		assert.Equal(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`, i), string(evs[len(evs)-1].data))
		for k := 1; k < len(evs); k++ {
			assert.Less(t, evs[k-1].seq, evs[k].seq)
		}
		o.detach(st, w)
	}
	assert.Zero(t, o.queued, "everything was written")
	assert.Zero(t, waitingBytes(o))
}

// Responses are never dropped, even past the budget: a session's
// requests in flight each get theirs.
func TestOutboxKeepsResponses(t *testing.T) {
	o := newOutbox(func(string, ...any) {})
	big := append(append([]byte(`{"jsonrpc":"2.0","id":"r","result":{"x":"`), bytes.Repeat([]byte{'y'}, queuedBytes/4)...), `"}}`...)
	var sts []*stream
	for i := range 8 {
		st, w, ok := o.open(fmt.Sprintf("r%d", i), "", true)
		require.True(t, ok)
		o.markResumable(st)
		o.detach(st, w)
		sts = append(sts, st)
	}
	for i := range sts {
		require.True(t, o.respond(fmt.Sprintf("r%d", i), big))
	}
	assert.Equal(t, 8*len(big), o.queued, "all eight kept")
	// A notification for the GET stream over the budget goes instead of
	// any response; it is the only droppable message.
	o.send(progressLine(0, 10), "")
	assert.Equal(t, 8*len(big)+len(progressLine(0, 10)), o.queued, "no room was made by dropping a response")
	for _, st := range sts {
		_, w, err := o.resume(st.no, 0)
		require.NoError(t, err)
		evs, final, _ := o.take(st, w, nil)
		require.Len(t, evs, 1)
		assert.True(t, final)
	}
}

// Before a session's streams exist, the server's messages wait in the
// backend's backlog, bounded the same way.
func TestBacklogBytesBounded(t *testing.T) {
	b := &backend{}
	line := progressLine(0, 1<<20)
	for range 64 {
		b.handOn(line)
	}
	assert.LessOrEqual(t, b.backlogN, queuedBytes)
	assert.Equal(t, len(b.backlog)*len(line), b.backlogN)
	var got int
	b.attach(func([]byte) { got++ })
	assert.Equal(t, queuedBytes/len(line), got)
}
