// Package objcmp compares BPF ELF objects by what the loader reads from them:
// programs (instructions, relocations, source lines), maps and BTF types,
// with BTF type IDs left out.
//
// It exists for CI's check that the committed bpf2go objects match their
// sources. clang-19 emits the same types in an order that depends on the
// absolute path of the build directory (forward declarations in .BTF swap
// places between two clones of one commit), so a byte comparison fails on a
// clean clone although nothing a loader sees has changed.
package objcmp

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// Diff returns how a and b differ, one line per difference; none means
// that a loader reads the same programs, maps and types from both.
func Diff(a, b io.ReaderAt) ([]string, error) {
	sa, err := ebpf.LoadCollectionSpecFromReader(a)
	if err != nil {
		return nil, fmt.Errorf("read first object: %w", err)
	}
	sb, err := ebpf.LoadCollectionSpecFromReader(b)
	if err != nil {
		return nil, fmt.Errorf("read second object: %w", err)
	}
	var diffs []string
	add := func(format string, args ...any) { diffs = append(diffs, fmt.Sprintf(format, args...)) }

	for _, name := range union(sa.Programs, sb.Programs) {
		pa, pb := sa.Programs[name], sb.Programs[name]
		if pa == nil || pb == nil {
			add("program %s is in only one object", name)
			continue
		}
		if da, db := describeProgram(pa), describeProgram(pb); da != db {
			add("program %s differs:\n%s\nvs\n%s", name, da, db)
		}
	}
	for _, name := range union(sa.Maps, sb.Maps) {
		ma, mb := sa.Maps[name], sb.Maps[name]
		if ma == nil || mb == nil {
			add("map %s is in only one object", name)
			continue
		}
		if da, db := describeMap(ma), describeMap(mb); da != db {
			add("map %s differs: %s vs %s", name, da, db)
		}
	}

	ba, na, err := canonicalBTF(sa.Types)
	if err != nil {
		return nil, fmt.Errorf("first object: %w", err)
	}
	bb, nb, err := canonicalBTF(sb.Types)
	if err != nil {
		return nil, fmt.Errorf("second object: %w", err)
	}
	if na != nb {
		add("BTF has %d types vs %d", na, nb)
	} else if string(ba) != string(bb) {
		add("BTF types differ")
	}
	return diffs, nil
}

func union[V any](a, b map[string]V) []string {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// describeProgram prints a program as the loader sees it: attach data,
// then each instruction with its symbol, reference, source line and CO-RE
// relocation, none of which name a BTF type ID.
func describeProgram(p *ebpf.ProgramSpec) string {
	s := fmt.Sprintf("type=%v attach=%v to=%q section=%q license=%q flags=%d\n",
		p.Type, p.AttachType, p.AttachTo, p.SectionName, p.License, p.Flags)
	s += fmt.Sprintf("%v", p.Instructions)
	for i, ins := range p.Instructions {
		if rel := btf.CORERelocationMetadata(&ins); rel != nil {
			s += fmt.Sprintf("core %d: %v\n", i, rel)
		}
	}
	return s
}

func describeMap(m *ebpf.MapSpec) string {
	return fmt.Sprintf("%v key=%v value=%v pinning=%v extra=%d contents=%v inner=%v",
		m, m.Key, m.Value, m.Pinning, m.MapExtra, m.Contents, m.InnerMap)
}

// canonicalBTF re-encodes a spec's types with IDs assigned in an order that
// depends only on the types: named types sorted by kind and name, then
// whatever they reference, in the encoder's depth-first order. It returns
// the encoding and how many types the spec held.
func canonicalBTF(spec *btf.Spec) ([]byte, int, error) {
	if spec == nil {
		return nil, 0, nil
	}
	var named []btf.Type
	n := 0
	for typ, err := range spec.All() {
		if err != nil {
			return nil, 0, fmt.Errorf("iterate BTF: %w", err)
		}
		n++
		if typ.TypeName() != "" {
			named = append(named, typ)
		}
	}
	slices.SortStableFunc(named, func(x, y btf.Type) int {
		return cmp.Compare(fmt.Sprintf("%T %v", x, x), fmt.Sprintf("%T %v", y, y))
	})
	b, err := btf.NewBuilder(nil, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("btf builder: %w", err)
	}
	for _, typ := range named {
		if _, err := b.Add(typ); err != nil {
			return nil, 0, fmt.Errorf("add %v: %w", typ, err)
		}
	}
	buf, err := b.Marshal(nil, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("marshal BTF: %w", err)
	}
	return buf, n, nil
}
