//go:build linux

package bpf

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Map key and value layouts shared with guard.bpf.c (generated from its BTF).
type (
	// InodeKey names a file or directory by device and inode number, for
	// one policy.
	InodeKey = guardInodeKey
	// NetKey is an LPM trie key: policy id, port (big endian, 0 = any)
	// then an IPv6 address, IPv4 as ::ffff:a.b.c.d.
	NetKey = guardNetKey
	// NetnsVal is where one session's NetKeys hold: not in the network
	// namespace Outside (the guard's), and in Inside only once it is
	// known (the server's; 0 before it has started). Inode numbers.
	NetnsVal = guardNetnsVal
	// Event is a denial reported through a session's ring buffer.
	Event = guardEvent
)

// Access bits of fs_rules values, as in guard.bpf.c.
const (
	AccRead    uint32 = 1
	AccWrite   uint32 = 2
	AccLinksOK uint32 = 4
)

// Event kinds, as in guard.bpf.c.
const (
	EvFileOpen     uint32 = 1
	EvFileHardlink uint32 = 2
	EvFileCreate   uint32 = 3
	EvFileLink     uint32 = 4
	EvNetConnect   uint32 = 5
	EvNetSend      uint32 = 6
	EvExec         uint32 = 7
	EvFileProc     uint32 = 8
	EvFileProtect  uint32 = 9
	EvBPF          uint32 = 10
	EvPtrace       uint32 = 11
	EvMount        uint32 = 12
	EvSocket       uint32 = 13
	EvUnix         uint32 = 14
	EvKey          uint32 = 15
	EvFileExec     uint32 = 16
)

// Values of the protected map, as in guard.bpf.c.
const (
	ProtName       uint32 = 1 // {name, ""}: the name itself, in any directory
	ProtTree       uint32 = 3 // {dir, ""}: everything below a directory of that name
	ProtOutsideGit uint32 = 5 // {name, ""}: the name anywhere but below a .git
	// GitRule + launch.GitKind: {name, parent}, an entry of git's own
	// data below a .git (parent ".git" at the first level); everything
	// else below a .git is protected.
	GitRule uint32 = 16
)

// Values of the exec_config map, as in guard.bpf.c.
const (
	ExecName   uint32 = 1 // the name anywhere
	ExecSuffix uint32 = 2 // a name ending in it
	ExecTree   uint32 = 3 // everything below a directory of that name
	ExecSkip   uint32 = 4 // nothing below a directory of that name
)

// ExecKey is an exec_config map key.
type ExecKey = guardExecKey

// MakeExecKey builds an exec_config key for a session's policy id.
func MakeExecKey(policy uint64, name string) ExecKey {
	var k ExecKey
	k.Policy = policy
	for i := 0; i < len(name) && i < len(k.Name)-1; i++ {
		k.Name[i] = int8(name[i])
	}
	return k
}

// NameKey is a protected map key.
type NameKey = guardNameKey

// MakeNameKey builds a protected map key (names longer than 31 bytes
// cannot be protected).
func MakeNameKey(name, dir string) NameKey {
	var k NameKey
	for i := 0; i < len(name) && i < len(k.Name)-1; i++ {
		k.Name[i] = int8(name[i])
	}
	for i := 0; i < len(dir) && i < len(k.Dir)-1; i++ {
		k.Dir[i] = int8(dir[i])
	}
	return k
}

// Geometry of Event.Path, as in guard.bpf.c: NameComps slots of NameLen
// bytes, leaf first. EvFileCreate events with access bit NewNameFlag carry
// the new name in the last slot.
const (
	NameComps   = 8
	NameLen     = 64
	NewNameFlag = 0x100
)

// NetPrefixBase is the LPM prefix length of policy id plus port.
const NetPrefixBase = 64 + 16

// ErrNotBPFFS is returned when the pin root is not on a bpf filesystem.
var ErrNotBPFFS = errors.New("not a bpf filesystem")

const bpffsMagic = 0xcafe4a11

// Version names the compiled object; pins live in a directory of that name,
// so a rebuilt object never picks up maps of another layout.
func Version() string { return version() }

var version = sync.OnceValue(func() string {
	s := sha256.Sum256(_GuardBytes)
	return "v" + hex.EncodeToString(s[:6])
})

// Spec returns the embedded collection spec (the caller's own copy).
func Spec() (*ebpf.CollectionSpec, error) { return loadGuard() }

// guardSpec is the embedded collection spec, parsed once per process:
// every session's Attach reads it (program names, the ring buffer's
// layout), and parsing the ELF and its BTF is tens of milliseconds on a
// real CPU, a second under emulation. Readers must not modify it (Copy).
var guardSpec = sync.OnceValues(loadGuard)

// Objects are handles to the shared, pinned maps. The programs stay
// attached through their pinned links after Close.
type Objects struct {
	Cgroups   *ebpf.Map // cgroup id -> policy id
	Tasks     *ebpf.Map // tgid -> policy id
	FSRules   *ebpf.Map // InodeKey -> access bits
	ExecRules *ebpf.Map // InodeKey -> 1
	NetRules  *ebpf.Map // NetKey -> 1 (LPM trie)
	Events    *ebpf.Map // policy id -> that session's ring buffer
	Protected *ebpf.Map // NameKey -> ProtName | ProtTree | ProtOutsideGit | GitRule+kind (all sessions)
	// ExecConfig holds, per session that asks, the files its server may
	// not write (filesystem.protect_exec_config): ExecKey -> Exec*.
	ExecConfig *ebpf.Map
	// SessionNetns says, per session, in which network namespace its
	// NetRules hold: policy id -> NetnsVal.
	SessionNetns *ebpf.Map

	// Loaded is true when this call loaded and attached the programs
	// (false when it found them already pinned).
	Loaded bool

	dir        string
	eventsSpec *ebpf.MapSpec
}

var mapNames = []string{"cgroups", "tasks", "fs_rules", "exec_rules", "net_rules", "events", "protected", "exec_config", "session_netns"}

func programNames(spec *ebpf.CollectionSpec) []string {
	var names []string
	for name := range spec.Programs {
		names = append(names, name)
	}
	return names
}

// Dir is where the maps are pinned (links in Dir/links).
func (o *Objects) Dir() string { return o.dir }

// Attach makes sure the programs are attached, with maps and links pinned
// under root/Version(), and opens the maps. The first caller loads and
// attaches (seconds under emulation); later callers, in this process or
// another, only open the pins. Errors name the step and wrap the kernel's
// error (EPERM where BPF LSM is refused).
func Attach(root string) (*Objects, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("pin root: %w", err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(root, &fs); err != nil {
		return nil, fmt.Errorf("pin root: %w", err)
	}
	if uint32(fs.Type) != bpffsMagic {
		return nil, fmt.Errorf("pin root %s: %w", root, ErrNotBPFFS)
	}
	dir := filepath.Join(root, Version())
	links := filepath.Join(dir, "links")
	if err := os.MkdirAll(links, 0o700); err != nil {
		return nil, fmt.Errorf("pin dir: %w", err)
	}
	// One loader at a time, across processes.
	lock, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("pin dir: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return nil, fmt.Errorf("lock pin dir: %w", err)
	}
	defer unix.Flock(int(lock.Fd()), unix.LOCK_UN)

	spec, err := guardSpec()
	if err != nil {
		return nil, fmt.Errorf("load spec: %w", err)
	}
	o := &Objects{dir: dir, eventsSpec: spec.Maps["events"].InnerMap}
	var missing []string
	for _, name := range programNames(spec) {
		l, err := link.LoadPinnedLink(filepath.Join(links, name), nil)
		if err != nil {
			missing = append(missing, name)
			continue
		}
		l.Close()
	}
	if len(missing) > 0 {
		if err := attachMissing(spec, dir, missing); err != nil {
			return nil, err
		}
		o.Loaded = true
	}
	ptrs := []**ebpf.Map{&o.Cgroups, &o.Tasks, &o.FSRules, &o.ExecRules, &o.NetRules, &o.Events, &o.Protected, &o.ExecConfig, &o.SessionNetns}
	for i, name := range mapNames {
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), nil)
		if err != nil {
			o.Close()
			return nil, fmt.Errorf("open pinned map %s: %w", name, err)
		}
		*ptrs[i] = m
	}
	return o, nil
}

// attachMissing loads the collection (reusing pinned maps) and attaches and
// pins the programs named in missing.
func attachMissing(spec *ebpf.CollectionSpec, dir string, missing []string) error {
	coll, err := ebpf.NewCollectionWithOptions(spec.Copy(), ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: dir}})
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return fmt.Errorf("load programs: %w (verifier: %+v)", err, ve)
		}
		return fmt.Errorf("load programs: %w", err)
	}
	defer coll.Close()
	var attached []link.Link
	fail := func(err error) error {
		for _, l := range attached {
			l.Unpin()
			l.Close()
		}
		return err
	}
	for _, name := range missing {
		prog := coll.Programs[name]
		var l link.Link
		switch prog.Type() {
		case ebpf.LSM:
			l, err = link.AttachLSM(link.LSMOptions{Program: prog})
		case ebpf.Tracing:
			l, err = link.AttachTracing(link.TracingOptions{Program: prog})
		default:
			err = fmt.Errorf("unexpected program type %s", prog.Type())
		}
		if err != nil {
			return fail(fmt.Errorf("attach %s: %w", name, err))
		}
		attached = append(attached, l)
		if err := l.Pin(filepath.Join(dir, "links", name)); err != nil {
			return fail(fmt.Errorf("pin link %s: %w", name, err))
		}
	}
	for _, l := range attached {
		l.Close() // the pin keeps it attached
	}
	return nil
}

// NewSessionEvents creates a ring buffer for one session's denials; the
// caller registers it in Events under the session's policy id.
func (o *Objects) NewSessionEvents() (*ebpf.Map, error) {
	m, err := ebpf.NewMap(o.eventsSpec.Copy())
	if err != nil {
		return nil, fmt.Errorf("create session ring buffer: %w", err)
	}
	return m, nil
}

// Close closes the map handles; the programs stay attached.
func (o *Objects) Close() error {
	var errs []error
	for _, m := range []*ebpf.Map{o.Cgroups, o.Tasks, o.FSRules, o.ExecRules, o.NetRules, o.Events, o.Protected, o.ExecConfig, o.SessionNetns} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	return errors.Join(errs...)
}

// Detach unpins the links and maps under root/Version(), which detaches
// the programs once no session holds them. Sessions still running lose
// their enforcement: call it only when none runs (tests, uninstall).
func Detach(root string) error {
	dir := filepath.Join(root, Version())
	var errs []error
	ents, _ := os.ReadDir(filepath.Join(dir, "links"))
	for _, e := range ents {
		errs = append(errs, os.Remove(filepath.Join(dir, "links", e.Name())))
	}
	os.Remove(filepath.Join(dir, "links"))
	for _, name := range mapNames {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
