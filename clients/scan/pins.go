package scan

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/mcpguard/mcpguard/guard/validate"
)

// Pins are the digests of every definition a scan saw, by server ID and
// then by kind and name.
type Pins map[string]map[string]string

func pinKey(d Definition) string { return d.Kind + " " + d.Name }

// compare reports what changed since the pins of the scan before: a
// definition whose digest changed (a rug pull), one added to or removed
// from a server already pinned. It returns the pins to keep.
func compare(servers []Server, old Pins, accept bool) (Pins, []Finding) {
	next := Pins{}
	for id, m := range old {
		next[id] = m // servers not scanned this time keep their pins
	}
	var out []Finding
	for _, s := range servers {
		was, known := old[s.ID]
		now := map[string]string{}
		for _, d := range s.Defs {
			k := pinKey(d)
			dig := validate.DefinitionDigest(d.Raw)
			now[k] = dig
			prev, seen := was[k]
			switch {
			case !known:
			case !seen:
				out = append(out, Finding{Medium, RuleAdded, s.ID, d.Kind, d.Name, "new since the last scan"})
			case prev != dig:
				out = append(out, Finding{High, RuleRugPull, s.ID, d.Kind, d.Name,
					"definition changed since the last scan (mcpguard scan --accept pins it as it is now)"})
				if !accept {
					now[k] = prev
				}
			}
		}
		for k := range was {
			if _, ok := now[k]; !ok {
				kind, name := splitPinKey(k)
				out = append(out, Finding{Medium, RuleRemoved, s.ID, kind, name, "gone since the last scan"})
				if !accept {
					now[k] = was[k]
				}
			}
		}
		next[s.ID] = now
	}
	return next, out
}

func splitPinKey(k string) (kind, name string) {
	for _, kd := range []string{Template, Tool, Prompt, Resource, Instructions} {
		if len(k) > len(kd) && k[:len(kd)+1] == kd+" " {
			return kd, k[len(kd)+1:]
		}
	}
	return "", k
}

// LoadPins reads the pins file; a missing file is no pins.
func LoadPins(path string) (Pins, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p Pins
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// Marshal is the pins as the file keeps them.
func (p Pins) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
