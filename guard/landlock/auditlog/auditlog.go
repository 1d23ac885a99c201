// Package auditlog reads Landlock's denials as the kernel reports them:
// the audit records AUDIT_LANDLOCK_ACCESS (1423) and AUDIT_LANDLOCK_DOMAIN
// (1424) of Linux 6.15 and later, with the SYSCALL record (1300) of the
// same event, received through the audit netlink socket's multicast group
// (which needs CAP_AUDIT_READ, and the kernel's audit switched on). The
// ruleset asks for them: denials after the server's execve are logged
// (LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON).
//
// Landlock tells no one else: without this the server sees EACCES and the
// guard sees nothing.
package auditlog

import (
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Audit record types (include/uapi/linux/audit.h).
const (
	TypeSyscall        = 1300
	TypeEOE            = 1320
	TypeLandlockAccess = 1423
	TypeLandlockDomain = 1424
)

// ErrUnavailable is wrapped when the records cannot be read here; the
// error says what is missing.
var ErrUnavailable = errors.New("landlock audit records unavailable")

// Denial is one access Landlock refused, from the records of one audit
// event.
type Denial struct {
	Time   time.Time
	Serial uint64
	// Domain is the Landlock domain's id (hex), the same in every record
	// of the sandbox.
	Domain string
	// Blockers are the access rights that were missing, e.g.
	// fs.read_file, fs.write_file, fs.make_reg, fs.execute,
	// net.connect_tcp.
	Blockers []string
	// Path is the file (fs blockers); Addr is host:port (net blockers).
	Path, Addr string
	// PID, Comm and Exe are the denied task's (from the SYSCALL record).
	PID        int
	Comm, Exe  string
	Syscall    int
	DomainPID  int // the pid that created the domain, when this event allocated it
	DomainExe  string
	Unresolved bool // the path was not absolute (a deleted file, another mount namespace)
}

// Kind is how mcpguard's reports name the denial: exec, write, connect or
// open.
func (d Denial) Kind() string {
	for _, b := range d.Blockers {
		switch {
		case b == "fs.execute":
			return "exec"
		case strings.HasPrefix(b, "net.connect"), strings.HasPrefix(b, "net.send"):
			return "connect"
		case strings.HasPrefix(b, "net.bind"):
			return "bind"
		case b == "fs.write_file", b == "fs.truncate", strings.HasPrefix(b, "fs.make_"),
			strings.HasPrefix(b, "fs.remove_"), b == "fs.refer", b == "fs.ioctl_dev":
			return "write"
		}
	}
	return "open"
}

// Target is the path or address the denial was about.
func (d Denial) Target() string {
	if d.Addr != "" {
		return d.Addr
	}
	return d.Path
}

// record is one audit record: its type, event time and serial, and fields.
type record struct {
	typ    int
	time   time.Time
	serial uint64
	fields map[string]string
}

// parseRecord reads "audit(SECONDS.MILLIS:SERIAL): key=value ...".
func parseRecord(typ int, text string) (record, bool) {
	r := record{typ: typ}
	rest, ok := strings.CutPrefix(text, "audit(")
	if !ok {
		return r, false
	}
	stamp, body, ok := strings.Cut(rest, "): ")
	if !ok {
		stamp, ok = strings.CutSuffix(rest, "):")
		if !ok {
			return r, false
		}
	}
	ts, serial, ok := strings.Cut(stamp, ":")
	if !ok {
		return r, false
	}
	r.serial, _ = strconv.ParseUint(serial, 10, 64)
	if sec, frac, ok := strings.Cut(ts, "."); ok {
		s, _ := strconv.ParseInt(sec, 10, 64)
		ms, _ := strconv.ParseInt(frac, 10, 64)
		r.time = time.Unix(s, ms*int64(time.Millisecond))
	}
	r.fields = parseFields(body)
	return r, true
}

// parseFields splits key=value pairs; a value is "quoted", or a bare
// token (audit writes a string with unusual bytes as bare hex).
func parseFields(s string) map[string]string {
	out := map[string]string{}
	for s != "" {
		s = strings.TrimLeft(s, " ")
		k, rest, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			break
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				v, s = rest[1:], ""
			} else {
				v, s = rest[1:end+1], rest[end+2:]
			}
			out[k] = v
			continue
		}
		if i := strings.IndexByte(rest, ' '); i >= 0 {
			v, s = rest[:i], rest[i:]
		} else {
			v, s = rest, ""
		}
		out[k] = v
		out["\x00hex\x00"+k] = "1" // bare: may be hex-encoded
	}
	return out
}

// str is a string field: quoted as is, bare hex decoded.
func (r record) str(k string) string {
	v := r.fields[k]
	if r.fields["\x00hex\x00"+k] == "" || v == "(null)" || v == "?" {
		return v
	}
	if b, err := hex.DecodeString(v); err == nil && len(v)%2 == 0 {
		return string(b)
	}
	return v
}

func (r record) int(k string) int {
	n, _ := strconv.Atoi(r.fields[k])
	return n
}

// assemble makes the Denial of one event's records, false when the event
// holds no Landlock access record.
func assemble(recs []record) (Denial, bool) {
	var d Denial
	found := false
	for _, r := range recs {
		switch r.typ {
		case TypeLandlockAccess:
			found = true
			d.Time, d.Serial, d.Domain = r.time, r.serial, r.fields["domain"]
			d.Blockers = strings.Split(r.fields["blockers"], ",")
			d.Path = r.str("path")
			switch {
			case r.fields["daddr"] != "":
				d.Addr = joinHostPort(r.fields["daddr"], r.fields["dest"])
			case r.fields["saddr"] != "": // a bind
				d.Addr = joinHostPort(r.fields["saddr"], r.fields["src"])
			case r.fields["dest"] != "":
				d.Addr = ":" + r.fields["dest"]
			}
		case TypeLandlockDomain:
			if r.fields["status"] == "allocated" {
				d.DomainPID, d.DomainExe = r.int("pid"), r.str("exe")
			}
		case TypeSyscall:
			d.PID, d.Comm, d.Exe, d.Syscall = r.int("pid"), r.str("comm"), r.str("exe"), r.int("syscall")
		}
	}
	if d.Path != "" && !strings.HasPrefix(d.Path, "/") {
		d.Unresolved = true
	}
	return d, found
}

func joinHostPort(host, port string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + port
	}
	return host + ":" + port
}
