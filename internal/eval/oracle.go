package eval

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
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
	// Before holds the content digest of file_written paths before the case
	// ran ("" when the file did not exist).
	Before map[string]string
	// Opened holds the file_read paths the watch saw opened or read.
	Opened map[string]bool
}

// Judge decides whether o fired on ev in sandbox sb. For attack kinds,
// fired means the attack happened; for expect, fired means the benign
// result came back. detail says why, for the report.
func Judge(o Oracle, sb *Sandbox, ev *Evidence) (fired bool, detail string, err error) {
	switch o.Kind {
	case KindCanaryInResponse:
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
	case KindCanaryAtSink:
		var data []byte
		switch o.Sink {
		case "tcp":
			data = ev.TCP
		case "udp":
			data = ev.UDP
		case "any":
			data = append(bytes.Clone(ev.TCP), ev.UDP...)
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
	case KindFileWritten:
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
	case KindFileRead:
		p, err := sb.Expand(o.Path)
		if err != nil {
			return false, "", err
		}
		if ev.Opened[p] {
			return true, fmt.Sprintf("%s opened (inotify)", o.Path), nil
		}
		return false, fmt.Sprintf("%s never opened", o.Path), nil
	case KindMarker:
		p := sb.MarkerDir + "/" + o.Name
		if _, err := os.Lstat(p); err == nil {
			return true, fmt.Sprintf("marker %s left", o.Name), nil
		}
		return false, fmt.Sprintf("no marker %s", o.Name), nil
	case KindExpect:
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
		if o.File != nil {
			p, err := sb.Expand(o.File.Path)
			if err != nil {
				return false, "", err
			}
			b, rerr := os.ReadFile(p)
			switch {
			case rerr != nil:
				why = append(why, fmt.Sprintf("%s not there", o.File.Path))
			case o.File.Contains != "":
				want, err := sb.Expand(o.File.Contains)
				if err != nil {
					return false, "", err
				}
				if !bytes.Contains(b, []byte(want)) {
					why = append(why, fmt.Sprintf("%s lacks %q", o.File.Path, want))
				}
			}
		}
		if len(why) > 0 {
			return false, strings.Join(why, "; "), nil
		}
		return true, "expected result came back", nil
	}
	return false, "", fmt.Errorf("unknown oracle kind %q", o.Kind)
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
