//go:build linux

package sandbox

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/bpf"
	"github.com/mcpguard/mcpguard/guard/audit"
)

func setComp(ev *bpf.Event, slot int, s string) {
	for i, c := range []byte(s) {
		ev.Path[slot*bpf.NameLen+i] = int8(c)
	}
}

func setComm(ev *bpf.Event, s string) {
	for i, c := range []byte(s) {
		ev.Comm[i] = int8(c)
	}
}

func encode(t *testing.T, ev bpf.Event) []byte {
	var b bytes.Buffer
	require.NoError(t, binary.Write(&b, binary.NativeEndian, ev))
	return b.Bytes()
}

func TestAuditEventFile(t *testing.T) {
	ev := bpf.Event{Kind: bpf.EvFileOpen, Tgid: 42, Access: bpf.AccRead, Ncomp: 3, Complete: 1}
	setComm(&ev, "python3")
	setComp(&ev, 0, "id_rsa")
	setComp(&ev, 1, ".ssh")
	setComp(&ev, 2, "home")
	got, err := decodeEvent(encode(t, ev))
	require.NoError(t, err)
	e := auditEvent(got)
	assert.Equal(t, audit.Event{Layer: "L3", Rule: RuleFileOpen, Decision: audit.Deny, PID: 42,
		Target: "/home/.ssh/id_rsa",
		Reason: "python3 opened /home/.ssh/id_rsa for read outside the policy's roots"}, e)

	ev.Complete = 0
	assert.Equal(t, ".../home/.ssh/id_rsa", auditEvent(ev).Target, "a truncated walk says so")
}

func TestAuditEventCreate(t *testing.T) {
	ev := bpf.Event{Kind: bpf.EvFileCreate, Access: bpf.AccWrite | bpf.NewNameFlag, Ncomp: 1, Complete: 1}
	setComp(&ev, 0, "tmp")
	setComp(&ev, bpf.NameComps-1, "stage")
	e := auditEvent(ev)
	assert.Equal(t, RuleFileCreate, e.Rule)
	assert.Equal(t, "/tmp/stage", e.Target)
}

func TestAuditEventNet(t *testing.T) {
	ev := bpf.Event{Kind: bpf.EvNetSend, Port: 9999, Addr: [16]uint8{10: 0xff, 11: 0xff, 12: 127, 15: 1}}
	e := auditEvent(ev)
	assert.Equal(t, RuleNetSend, e.Rule)
	assert.Equal(t, "127.0.0.1:9999", e.Target)
	ev = bpf.Event{Kind: bpf.EvNetConnect, Port: 80, Addr: [16]uint8{15: 1}}
	assert.Equal(t, "[::1]:80", auditEvent(ev).Target)
}

func TestAuditEventExec(t *testing.T) {
	ev := bpf.Event{Kind: bpf.EvExec, Ino: 7}
	setComp(&ev, 0, "/dev/fd/3")
	e := auditEvent(ev)
	assert.Equal(t, RuleExec, e.Rule)
	assert.Equal(t, "/dev/fd/3", e.Target)
}

func TestDecodeEventShort(t *testing.T) {
	_, err := decodeEvent([]byte{1, 2, 3})
	require.Error(t, err)
}
