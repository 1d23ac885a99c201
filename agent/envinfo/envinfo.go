// Package envinfo detects the facts a benchmark run is labelled with (memory
// encryption, kernel) and writes them as benchfmt configuration lines, so
// that benchstat keeps runs from different machines apart and says which is which.
package envinfo

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// CVM kinds.
const (
	SEVSNP = "sev-snp"
	SEV    = "sev" // SEV or SEV-ES without SNP
	TDX    = "tdx"
	None   = "none"
)

// Facts describe the machine.
type Facts struct {
	// CVM is sev-snp, sev, tdx or none.
	CVM string
	// Evidence says what CVM was decided from.
	Evidence string
	// Kernel is the running kernel's release.
	Kernel string
}

// Paths are where Detect looks; tests point them at fixtures.
type Paths struct {
	SEVGuest, TDXGuest, CPUInfo, OSRelease string
	// Dmesg returns the kernel log (nil: run dmesg, which may need root).
	Dmesg func() ([]byte, error)
}

// DefaultPaths are the real locations.
func DefaultPaths() Paths {
	return Paths{
		SEVGuest:  "/dev/sev-guest",
		TDXGuest:  "/dev/tdx_guest",
		CPUInfo:   "/proc/cpuinfo",
		OSRelease: "/proc/sys/kernel/osrelease",
		Dmesg: func() ([]byte, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			return exec.CommandContext(ctx, "dmesg").Output()
		},
	}
}

var memEnc = regexp.MustCompile(`Memory Encryption Features active:([^\n]*)`)

// Detect reads the guest's own signs of memory encryption, most specific
// first: the SNP and TDX guest devices, the kernel's boot message, then the
// CPU flags a guest kernel sets (tdx_guest; sev_snp together with hypervisor,
// since a host lists sev_snp too).
func Detect(p Paths) Facts {
	f := Facts{CVM: None, Evidence: "no guest device, boot message or CPU flag"}
	if b, err := os.ReadFile(p.OSRelease); err == nil {
		f.Kernel = strings.TrimSpace(string(b))
	}
	switch {
	case exists(p.SEVGuest):
		return withCVM(f, SEVSNP, p.SEVGuest)
	case exists(p.TDXGuest):
		return withCVM(f, TDX, p.TDXGuest)
	}
	if p.Dmesg != nil {
		if log, err := p.Dmesg(); err == nil {
			if m := memEnc.FindSubmatch(log); m != nil {
				feat := string(m[1])
				switch {
				case strings.Contains(feat, "SEV-SNP"):
					return withCVM(f, SEVSNP, "dmesg")
				case strings.Contains(feat, "TDX"):
					return withCVM(f, TDX, "dmesg")
				case strings.Contains(feat, "SEV"):
					return withCVM(f, SEV, "dmesg")
				}
			}
		}
	}
	if flags := cpuFlags(p.CPUInfo); flags != nil {
		switch {
		case flags["tdx_guest"]:
			return withCVM(f, TDX, "cpuinfo tdx_guest")
		case flags["hypervisor"] && flags["sev_snp"]:
			return withCVM(f, SEVSNP, "cpuinfo sev_snp+hypervisor")
		}
	}
	return f
}

func withCVM(f Facts, kind, evidence string) Facts {
	f.CVM, f.Evidence = kind, evidence
	return f
}

func exists(path string) bool {
	if path == "" {
		return false
	}
	_, err := os.Stat(path)
	return err == nil
}

func cpuFlags(path string) map[string]bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "flags" {
			m := map[string]bool{}
			for _, fl := range strings.Fields(v) {
				m[fl] = true
			}
			return m
		}
	}
	return nil
}

// Line is one benchfmt configuration line.
type Line struct{ Key, Value string }

// Lines returns the configuration lines for a run: env (the user's label,
// omitted when empty), cvm, cvm-evidence, kernel, then extra in order.
func Lines(env string, f Facts, extra ...Line) []Line {
	var out []Line
	if env != "" {
		out = append(out, Line{"env", env})
	}
	out = append(out, Line{"cvm", f.CVM}, Line{"cvm-evidence", f.Evidence}, Line{"kernel", f.Kernel})
	return append(out, extra...)
}

var keyRe = regexp.MustCompile(`^[a-z][^\s:A-Z]*$`)

// Write prints lines in benchfmt's `key: value` form. Keys must start with a
// lower-case letter and hold no space, colon or upper case; values are put
// on one line.
func Write(w io.Writer, lines []Line) error {
	for _, l := range lines {
		if !keyRe.MatchString(l.Key) {
			return fmt.Errorf("benchfmt key %q: want lower case, no spaces or colons", l.Key)
		}
		v := strings.Join(strings.Fields(l.Value), " ")
		if _, err := fmt.Fprintf(w, "%s: %s\n", l.Key, v); err != nil {
			return err
		}
	}
	return nil
}
