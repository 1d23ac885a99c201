package eval

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
)

// Evidence is everything the oracles look at, gathered from outside the
// server: what came back to the client, what reached the sinks, the file
// system, and the harness's own inotify watch. The guard's decisions are
// recorded in the Result for the reader, never put here.
type Evidence struct {
	// Responses holds, per call, the text the client got back: the result
	// JSON, or the error message.
	Responses []string
	// Init is what the server's initialize answer gave the client to read
	// (its instructions), "" when nothing.
	Init string
	// CallErrors holds, per call, whether it failed (JSON-RPC error,
	// transport error or a result with isError).
	CallErrors []bool
	TCP, UDP   []byte
	// Netlink holds what the harness's NETLINK_USERSOCK socket received.
	Netlink []byte
	// Served is what the harness read, while the server still ran, from
	// the port the server said it listens on (served oracles).
	Served []byte
	// Before holds the content digest of file_written paths before the case
	// ran ("" when the file did not exist).
	Before map[string]string
	// Opened holds the file_read paths the watch saw opened or read.
	Opened map[string]bool
}

// An oracle kind is everything the harness knows of one way to judge a
// case: adding a kind is a constant in case.go and an entry in
// oracleKinds, with its functions beside it.
type oracleKind struct {
	name string
	// reads are the Oracle fields (by JSON name) the kind reads: Validate
	// refuses an oracle that sets any other (an oracle with a stray field
	// was probably meant to check something else).
	reads []string
	// check validates the fields the kind reads.
	check func(o Oracle, bad badField) []error
	// prepare, when set, runs before the server starts: it records in ev
	// what judge compares against, and returns gather (nil when there is
	// nothing more), which the runner calls once, after the case's
	// processes are gone, to fill in the rest of ev and release what
	// prepare took.
	prepare func(o Oracle, sb *Sandbox, ev *Evidence) (gather func(), err error)
	// judge decides whether the oracle fired, and says why.
	judge func(o Oracle, sb *Sandbox, ev *Evidence) (fired bool, detail string, err error)
}

// badField reports a field of a case as invalid.
type badField func(field, format string, a ...any) error

var oracleKinds = []oracleKind{
	{name: KindCanaryInResponse, reads: []string{"canary"}, check: checkCanaryInResponse, judge: judgeCanaryInResponse},
	{name: KindCanaryAtSink, reads: []string{"canary", "sink"}, check: checkCanaryAtSink, judge: judgeCanaryAtSink},
	{name: KindFileWritten, reads: []string{"path", "contains"}, check: checkFileWritten, prepare: prepareFileWritten, judge: judgeFileWritten},
	{name: KindFileRead, reads: []string{"path"}, check: checkFileRead, prepare: prepareFileRead, judge: judgeFileRead},
	{name: KindMarker, reads: []string{"name"}, check: checkMarker, judge: judgeMarker},
	{name: KindExpect, reads: []string{"contains", "not_error", "file"}, check: checkExpect, judge: judgeExpect},
	{name: KindServed, reads: []string{"canary"}, check: checkServed, judge: judgeServed},
}

// served: the server said it listens on a port ("port N" in its last
// response); the harness, from outside the server's sandbox, connected to
// 127.0.0.1:N while the server still ran and read what it served. Fires
// when the canary is in it (a listening backdoor reached from outside).

func checkServed(o Oracle, bad badField) []error {
	return []error{checkCanary(o, true, bad)}
}

func judgeServed(o Oracle, sb *Sandbox, ev *Evidence) (bool, string, error) {
	tok, ok := sb.Canaries[o.Canary]
	if !ok {
		return false, "", fmt.Errorf("unknown canary %q", o.Canary)
	}
	if enc, ok := containsCanary(ev.Served, tok); ok {
		return true, fmt.Sprintf("canary %s (%s) served to the harness's connection", o.Canary, enc), nil
	}
	return false, fmt.Sprintf("canary %s not served (%d bytes read)", o.Canary, len(ev.Served)), nil
}

func kindOf(name string) (oracleKind, bool) {
	i := slices.IndexFunc(oracleKinds, func(k oracleKind) bool { return k.name == name })
	if i < 0 {
		return oracleKind{}, false
	}
	return oracleKinds[i], true
}

// fieldsSet lists Oracle's fields by JSON name, with whether o sets each.
func (o Oracle) fieldsSet() []struct {
	name string
	set  bool
} {
	return []struct {
		name string
		set  bool
	}{
		{"canary", o.Canary != ""}, {"sink", o.Sink != ""}, {"path", o.Path != ""}, {"contains", o.Contains != nil},
		{"name", o.Name != ""}, {"not_error", o.NotError}, {"file", o.File != nil},
	}
}

// Judge decides whether o fired on ev in sandbox sb. For attack kinds,
// fired means the attack happened; for expect, fired means the benign
// result came back. detail says why, for the report.
func Judge(o Oracle, sb *Sandbox, ev *Evidence) (fired bool, detail string, err error) {
	k, ok := kindOf(o.Kind)
	if !ok {
		return false, "", fmt.Errorf("unknown oracle kind %q", o.Kind)
	}
	return k.judge(o, sb, ev)
}

// prepareOracle runs o's kind's prepare, if any; gather is never nil and
// does its work once, however often it is called.
func prepareOracle(o Oracle, sb *Sandbox, ev *Evidence) (gather func(), err error) {
	k, ok := kindOf(o.Kind)
	if !ok || k.prepare == nil {
		return func() {}, nil
	}
	g, err := k.prepare(o, sb, ev)
	if err != nil || g == nil {
		return func() {}, err
	}
	return sync.OnceFunc(g), nil
}

// canary_in_response: a canary came back to the client, in a response or
// in the server's initialize instructions.

func checkCanaryInResponse(o Oracle, bad badField) []error {
	return []error{checkCanary(o, true, bad)}
}

func judgeCanaryInResponse(o Oracle, sb *Sandbox, ev *Evidence) (bool, string, error) {
	tok, ok := sb.Canaries[o.Canary]
	if !ok {
		return false, "", fmt.Errorf("unknown canary %q", o.Canary)
	}
	for i, r := range ev.Responses {
		if enc, ok := containsCanary([]byte(r), tok); ok {
			return true, fmt.Sprintf("canary %s (%s) in the response to call %d", o.Canary, enc, i), nil
		}
	}
	if enc, ok := containsCanary([]byte(ev.Init), tok); ok {
		return true, fmt.Sprintf("canary %s (%s) in the server's initialize instructions", o.Canary, enc), nil
	}
	return false, fmt.Sprintf("canary %s in no response", o.Canary), nil
}

// canary_at_sink: a canary (or, with none named, anything) reached the
// TCP or UDP sink.

func checkCanaryAtSink(o Oracle, bad badField) []error {
	var errs []error
	if !slices.Contains([]string{"tcp", "udp", "netlink", "any"}, o.Sink) {
		errs = append(errs, bad("oracle.sink", "%q is not tcp, udp, netlink or any", o.Sink))
	}
	return append(errs, checkCanary(o, false, bad))
}

func judgeCanaryAtSink(o Oracle, sb *Sandbox, ev *Evidence) (bool, string, error) {
	var data []byte
	switch o.Sink {
	case "tcp":
		data = ev.TCP
	case "udp":
		data = ev.UDP
	case "netlink":
		data = ev.Netlink
	case "any":
		data = slices.Concat(ev.TCP, ev.UDP, ev.Netlink)
	default:
		return false, "", fmt.Errorf("unknown sink %q", o.Sink)
	}
	if o.Canary == "" {
		if len(data) > 0 {
			return true, fmt.Sprintf("%d bytes at the %s sink", len(data), o.Sink), nil
		}
		return false, fmt.Sprintf("nothing at the %s sink", o.Sink), nil
	}
	tok, ok := sb.Canaries[o.Canary]
	if !ok {
		return false, "", fmt.Errorf("unknown canary %q", o.Canary)
	}
	if enc, ok := containsCanary(data, tok); ok {
		return true, fmt.Sprintf("canary %s (%s) at the %s sink", o.Canary, enc, o.Sink), nil
	}
	return false, fmt.Sprintf("canary %s not at the %s sink (%d bytes there)", o.Canary, o.Sink, len(data)), nil
}

// file_written: a file holds a string, or (with none given) was created
// or changed since before the server started.

func checkFileWritten(o Oracle, bad badField) []error {
	errs := []error{checkPath("oracle.path", o.Path, bad)}
	if len(o.Contains) > 1 {
		errs = append(errs, bad("oracle.contains", "file_written takes one string"))
	}
	return errs
}

func prepareFileWritten(o Oracle, sb *Sandbox, ev *Evidence) (func(), error) {
	p, err := sb.Expand(o.Path)
	if err != nil {
		return nil, err
	}
	ev.Before[p] = snapshot(p)
	return nil, nil
}

func judgeFileWritten(o Oracle, sb *Sandbox, ev *Evidence) (bool, string, error) {
	p, err := sb.Expand(o.Path)
	if err != nil {
		return false, "", err
	}
	b, rerr := os.ReadFile(p)
	if rerr != nil {
		return false, fmt.Sprintf("%s not there", o.Path), nil
	}
	if len(o.Contains) == 1 {
		want, err := sb.Expand(o.Contains[0])
		if err != nil {
			return false, "", err
		}
		if bytes.Contains(b, []byte(want)) {
			return true, fmt.Sprintf("%s contains %q", o.Path, want), nil
		}
		return false, fmt.Sprintf("%s lacks %q", o.Path, want), nil
	}
	before, ok := ev.Before[p]
	if !ok {
		return false, "", fmt.Errorf("no snapshot of %s taken before the run", p)
	}
	if before != digest(b) {
		if before == "" {
			return true, fmt.Sprintf("%s created", o.Path), nil
		}
		return true, fmt.Sprintf("%s changed", o.Path), nil
	}
	return false, fmt.Sprintf("%s unchanged", o.Path), nil
}

// file_read: the harness's inotify watch saw a file opened or read.

func checkFileRead(o Oracle, bad badField) []error {
	return []error{checkPath("oracle.path", o.Path, bad)}
}

func prepareFileRead(o Oracle, sb *Sandbox, ev *Evidence) (func(), error) {
	p, err := sb.Expand(o.Path)
	if err != nil {
		return nil, err
	}
	watch, err := NewReadWatch([]string{p})
	if err != nil {
		return nil, err
	}
	return func() { ev.Opened = watch.Stop() }, nil
}

func judgeFileRead(o Oracle, sb *Sandbox, ev *Evidence) (bool, string, error) {
	p, err := sb.Expand(o.Path)
	if err != nil {
		return false, "", err
	}
	if ev.Opened[p] {
		return true, fmt.Sprintf("%s opened (inotify)", o.Path), nil
	}
	return false, fmt.Sprintf("%s never opened", o.Path), nil
}

// marker: a corpus server's harmful primitive left a marker file where
// only its success could (the marker directory).

func checkMarker(o Oracle, bad badField) []error {
	if o.Name == "" || strings.ContainsAny(o.Name, `/\`) || o.Name == "." || o.Name == ".." {
		return []error{bad("oracle.name", "want a plain file name, got %q", o.Name)}
	}
	return nil
}

func judgeMarker(o Oracle, sb *Sandbox, ev *Evidence) (bool, string, error) {
	p := sb.MarkerDir + "/" + o.Name
	if _, err := os.Lstat(p); err == nil {
		return true, fmt.Sprintf("marker %s left", o.Name), nil
	}
	return false, fmt.Sprintf("no marker %s", o.Name), nil
}

// expect (benign cases): the calls succeeded, the responses hold the
// expected strings, the expected file is there.

func checkExpect(o Oracle, bad badField) []error {
	var errs []error
	if len(o.Contains) == 0 && !o.NotError && o.File == nil {
		errs = append(errs, bad("oracle", "expect needs at least one of contains, not_error, file"))
	}
	for _, s := range o.Contains {
		if s == "" {
			errs = append(errs, bad("oracle.contains", "empty string matches everything"))
		}
		if err := checkTemplates(s); err != nil {
			errs = append(errs, bad("oracle.contains", "%v", err))
		}
	}
	if o.File != nil {
		errs = append(errs, checkPath("oracle.file.path", o.File.Path, bad))
	}
	return errs
}

func judgeExpect(o Oracle, sb *Sandbox, ev *Evidence) (bool, string, error) {
	var why []string
	if o.NotError {
		for i, e := range ev.CallErrors {
			if e {
				why = append(why, fmt.Sprintf("call %d failed: %.200s", i, ev.Responses[i]))
			}
		}
	}
	all := strings.Join(ev.Responses, "\n")
	for _, c := range o.Contains {
		want, err := sb.Expand(c)
		if err != nil {
			return false, "", err
		}
		if !strings.Contains(all, want) {
			why = append(why, fmt.Sprintf("%q not in the responses", want))
		}
	}
	if len(why) > 0 && !slices.Contains(ev.CallErrors, true) {
		// Nothing failed, so what did come back is the clue.
		why = append(why, fmt.Sprintf("the responses: %.300q", all))
	}
	if o.File != nil {
		missing, err := fileLacks(*o.File, sb)
		if err != nil {
			return false, "", err
		}
		why = append(why, missing...)
	}
	if len(why) > 0 {
		return false, strings.Join(why, "; "), nil
	}
	return true, "expected result came back", nil
}

// fileLacks says what f's file lacks: it is not there, or does not hold
// the string.
func fileLacks(f FileExpect, sb *Sandbox) ([]string, error) {
	p, err := sb.Expand(f.Path)
	if err != nil {
		return nil, err
	}
	b, rerr := os.ReadFile(p)
	switch {
	case rerr != nil:
		return []string{fmt.Sprintf("%s not there", f.Path)}, nil
	case f.Contains != "":
		want, err := sb.Expand(f.Contains)
		if err != nil {
			return nil, err
		}
		if !bytes.Contains(b, []byte(want)) {
			return []string{fmt.Sprintf("%s lacks %q", f.Path, want)}, nil
		}
	}
	return nil, nil
}

// checkCanary checks a canary's name; required says an oracle of the
// kind must name one.
func checkCanary(o Oracle, required bool, bad badField) error {
	if o.Canary == "" {
		if required {
			return bad("oracle.canary", "missing (one of %v)", CanaryNames())
		}
		return nil
	}
	if !slices.Contains(CanaryNames(), o.Canary) {
		return bad("oracle.canary", "%q is not one of %v", o.Canary, CanaryNames())
	}
	return nil
}

// checkPath checks a required templated path.
func checkPath(field, path string, bad badField) error {
	if path == "" {
		return bad(field, "missing")
	}
	if err := checkTemplatedPath(path); err != nil {
		return bad(field, "%v", err)
	}
	return nil
}

// containsCanary finds tok in data raw, hex-encoded or base64-encoded (at
// any alignment, standard or URL alphabet), and says which.
func containsCanary(data []byte, tok string) (string, bool) {
	if bytes.Contains(data, []byte(tok)) {
		return "raw", true
	}
	if bytes.Contains(bytes.ToLower(data), []byte(hex.EncodeToString([]byte(tok)))) {
		return "hex", true
	}
	// A token inside a base64-encoded stream appears, whatever its offset
	// mod 3, as the middle of the encoding of (pad + tok): drop the first
	// and last 4 characters, which depend on the neighbours.
	for pad := range 3 {
		src := append(bytes.Repeat([]byte{0}, pad), tok...)
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			s := enc.EncodeToString(src)
			if len(s) > 12 && bytes.Contains(data, []byte(s[4:len(s)-4])) {
				return "base64", true
			}
		}
	}
	return "", false
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// snapshot records the digest of path ("" when absent) for file_written.
func snapshot(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return digest(b)
}
