//go:build linux

package sandbox

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/mcpguard/mcpguard/bpf"
	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/launch"
)

// Audit rules of kernel denials (layer "L3").
const (
	RuleFileOpen     = "file.open_denied"
	RuleFileHardlink = "file.hardlink_denied"
	RuleFileCreate   = "file.write_denied"
	RuleFileLink     = "file.link_denied"
	RuleFileProc     = "file.proc_denied"
	RuleFileProtect  = "file.protected_denied"
	RuleFileExec     = launch.RuleExecutable
	RuleNetConnect   = "net.connect_denied"
	RuleNetSend      = "net.sendto_denied"
	RuleExec         = "exec.denied"
	RuleBPF          = "contain.bpf_denied"
	RulePtrace       = "contain.ptrace_denied"
	RuleMount        = "contain.mount_denied"
	RuleSocket       = "contain.socket_denied"
	RuleUnix         = "contain.unix_denied"
	RuleKey          = "contain.key_denied"
	// RuleProtectWalk is not a kernel denial: the launcher's search for
	// entries to protect by identity stopped early (see launch.Protect).
	RuleProtectWalk = launch.RuleProtectWalk
)

func decodeEvent(raw []byte) (bpf.Event, error) {
	var ev bpf.Event
	if _, err := binary.Decode(raw, binary.NativeEndian, &ev); err != nil {
		return ev, fmt.Errorf("decode event: %w", err)
	}
	return ev, nil
}

func cstr(b []int8) string {
	u := make([]byte, len(b))
	for i, c := range b {
		u[i] = byte(c)
	}
	if i := bytes.IndexByte(u, 0); i >= 0 {
		u = u[:i]
	}
	return string(u)
}

// eventPath rebuilds the path the kernel walked: components leaf first,
// complete when the walk reached the root.
func eventPath(ev bpf.Event) string {
	n := int(ev.Ncomp)
	newName := ""
	if (ev.Kind == bpf.EvFileCreate || ev.Kind == bpf.EvFileProtect) && ev.Access&bpf.NewNameFlag != 0 {
		newName = cstr(ev.Path[(bpf.NameComps-1)*bpf.NameLen : bpf.NameComps*bpf.NameLen])
		n = min(n, bpf.NameComps-1)
	}
	n = min(n, bpf.NameComps)
	var parts []string
	for i := n - 1; i >= 0; i-- {
		c := cstr(ev.Path[i*bpf.NameLen : (i+1)*bpf.NameLen])
		if c == "/" || c == "" {
			continue
		}
		parts = append(parts, c)
	}
	if newName != "" {
		parts = append(parts, newName)
	}
	p := strings.Join(parts, "/")
	if ev.Complete != 0 {
		return "/" + p
	}
	return ".../" + p
}

// auditEvent describes a kernel denial for the audit log.
func auditEvent(ev bpf.Event) audit.Event {
	e := audit.Event{Layer: "L3", Decision: audit.Deny, PID: int(ev.Tgid)}
	comm := cstr(ev.Comm[:])
	access := "read"
	if ev.Access&bpf.AccWrite != 0 {
		access = "write"
	}
	switch ev.Kind {
	case bpf.EvFileOpen:
		e.Rule, e.Target = RuleFileOpen, eventPath(ev)
		e.Reason = fmt.Sprintf("%s opened %s for %s outside the policy's roots", comm, e.Target, access)
	case bpf.EvFileProc:
		e.Rule, e.Target = RuleFileProc, eventPath(ev)
		e.Reason = fmt.Sprintf("%s opened another process's %s", comm, e.Target)
	case bpf.EvFileProtect:
		e.Rule, e.Target = RuleFileProtect, eventPath(ev)
		e.Reason = fmt.Sprintf("%s wrote %s, a file other programs run (persistence), even inside a write root", comm, e.Target)
	case bpf.EvFileExec:
		e.Rule, e.Target = RuleFileExec, eventPath(ev)
		e.Reason = fmt.Sprintf("%s would leave %s a program (an execute bit made, added, written or moved) in a write root: the user's tools would run it", comm, e.Target)
	case bpf.EvFileHardlink:
		e.Rule, e.Target = RuleFileHardlink, eventPath(ev)
		e.Reason = fmt.Sprintf("%s opened %s, a file with several hard links, through an allowed directory", comm, e.Target)
	case bpf.EvFileCreate:
		e.Rule, e.Target = RuleFileCreate, eventPath(ev)
		e.Reason = fmt.Sprintf("%s changed a name in %s outside the policy's write roots", comm, e.Target)
	case bpf.EvFileLink:
		e.Rule, e.Target = RuleFileLink, eventPath(ev)
		e.Reason = fmt.Sprintf("%s made a hard link to %s", comm, e.Target)
	case bpf.EvNetConnect, bpf.EvNetSend:
		e.Rule = RuleNetConnect
		verb := "connected to"
		if ev.Kind == bpf.EvNetSend {
			e.Rule, verb = RuleNetSend, "sent a datagram to"
		}
		a := netip.AddrFrom16(ev.Addr).Unmap()
		e.Target = netip.AddrPortFrom(a, ev.Port).String()
		e.Reason = fmt.Sprintf("%s %s %s, not in the policy's network rules", comm, verb, e.Target)
	case bpf.EvExec:
		e.Rule, e.Target = RuleExec, cstr(ev.Path[:])
		e.Reason = fmt.Sprintf("%s ran %s (inode %d), not in the exec allow-list", comm, e.Target, ev.Ino)
	case bpf.EvBPF:
		e.Rule = RuleBPF
		e.Reason = fmt.Sprintf("%s called bpf() (command %d): guarded tasks get no map or program access", comm, ev.Access)
	case bpf.EvPtrace:
		e.Rule = RulePtrace
		e.Reason = fmt.Sprintf("%s inspected a process outside its session (ptrace mode %#x)", comm, ev.Access)
	case bpf.EvMount:
		e.Rule = RuleMount
		e.Reason = fmt.Sprintf("%s changed the mount table", comm)
	case bpf.EvSocket:
		e.Rule = RuleSocket
		e.Reason = fmt.Sprintf("%s made a packet or raw socket (family %d, type %d)", comm, ev.Family, ev.Access)
	case bpf.EvUnix:
		e.Rule, e.Target = RuleUnix, cstr(ev.Path[:108])
		e.Reason = fmt.Sprintf("%s reached unix socket %q, not under a write root of the policy", comm, e.Target)
	case bpf.EvKey:
		e.Rule = RuleKey
		e.Reason = fmt.Sprintf("%s used a kernel keyring", comm)
	default:
		e.Rule = "kernel.denied"
		e.Reason = "kind " + strconv.Itoa(int(ev.Kind))
	}
	return e
}
