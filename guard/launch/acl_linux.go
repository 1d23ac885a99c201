package launch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// POSIX ACLs in the kernel's xattr form (include/uapi/linux/posix_acl.h,
// posix_acl_xattr.h): a version, then {tag, perm, id} entries sorted by
// tag and id.
const (
	aclXattr   = "system.posix_acl_access"
	aclVersion = 2
	aclUserObj = 0x01
	aclUser    = 0x02
	aclGroupOb = 0x04
	aclGroup   = 0x08
	aclMask    = 0x10
	aclOther   = 0x20
	aclNoID    = 0xffffffff
)

type aclEntry struct {
	tag, perm uint16
	id        uint32
}

func parseACL(b []byte) ([]aclEntry, error) {
	if len(b) < 4 || (len(b)-4)%8 != 0 || binary.LittleEndian.Uint32(b) != aclVersion {
		return nil, errors.New("malformed ACL")
	}
	var out []aclEntry
	for b = b[4:]; len(b) > 0; b = b[8:] {
		out = append(out, aclEntry{binary.LittleEndian.Uint16(b), binary.LittleEndian.Uint16(b[2:]), binary.LittleEndian.Uint32(b[4:])})
	}
	return out, nil
}

func encodeACL(es []aclEntry) []byte {
	slices.SortFunc(es, func(a, b aclEntry) int {
		if a.tag != b.tag {
			return int(a.tag) - int(b.tag)
		}
		return int(int64(a.id) - int64(b.id))
	})
	b := binary.LittleEndian.AppendUint32(nil, aclVersion)
	for _, e := range es {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	return b
}

// withUser returns the ACL es (or, when empty, the one mode implies) with
// a named-user entry giving uid perm, and the mask widened to let it
// through; the other entries, hence everyone else's access, are kept.
func withUser(es []aclEntry, mode uint32, uid uint32, perm uint16) []aclEntry {
	if len(es) == 0 {
		m := uint16(mode & 0o777)
		es = []aclEntry{{aclUserObj, m >> 6 & 7, aclNoID}, {aclGroupOb, m >> 3 & 7, aclNoID}, {aclOther, m & 7, aclNoID}}
	}
	es = slices.DeleteFunc(slices.Clone(es), func(e aclEntry) bool { return e.tag == aclUser && e.id == uid })
	es = append(es, aclEntry{aclUser, perm, uid})
	// The mask caps the group class; an existing one keeps capping the
	// others, a new one is what the group entry alone had.
	mask := uint16(0)
	if i := slices.IndexFunc(es, func(e aclEntry) bool { return e.tag == aclMask }); i >= 0 {
		mask = es[i].perm
	} else if i := slices.IndexFunc(es, func(e aclEntry) bool { return e.tag == aclGroupOb }); i >= 0 {
		mask = es[i].perm
	}
	es = slices.DeleteFunc(es, func(e aclEntry) bool { return e.tag == aclMask })
	return append(es, aclEntry{aclMask, mask | perm, aclNoID})
}

// aclGrant is the fallback where a data grant's file system cannot idmap
// (tmpfs before Linux 6.3, 9p): the server's user gets, by POSIX ACL
// entries, the permissions the grant's owner has on every entry of the
// tree the owner owns (at most MaxWalk), and is lent the owner's
// directories for the session (chown: git refuses a repository whose
// directory another user owns).
//
// What it will change is written to the journal before anything changes
// (journal.go), so that the session's end (undo), or the next start after
// a proxy killed with SIGKILL (reapJournals), puts it back. Every change,
// here and when undone, goes through descriptors opened one component at
// a time without following symbolic links and checked to be the inode
// that was walked: a name the server swapped for a symlink during the
// session (a lent directory replaced by a link to /etc) makes the proxy
// skip that entry, never chmod or chown what the link points to.
func aclGrant(j interface{ record(journalEntry) error }, root string, owner [2]uint32, uid, gid uint32) (undo func() error, err error) {
	g := &aclJournal{Root: root, Owner: owner, UID: uid, GID: gid}
	if err := g.walk(); err != nil {
		return nil, err
	}
	if err := j.record(journalEntry{ACL: g}); err != nil {
		return nil, err
	}
	undo = func() error { return g.undo() }
	for i := range g.Entries {
		if err := g.apply(&g.Entries[i]); err != nil {
			undo()
			return nil, err
		}
	}
	return undo, nil
}

// aclJournal is one grant's record: the owner's entries as they were.
type aclJournal struct {
	Root  string    `json:"root"`
	Owner [2]uint32 `json:"owner"`
	UID   uint32    `json:"uid"`
	GID   uint32    `json:"gid"`
	// Entries are the owner's entries of Root, as they were.
	Entries []aclSaved `json:"entries"`
	// Had are the entries the server's user owned before the session:
	// not given to the owner at its end.
	Had []fileKey `json:"had,omitempty"`
}

// aclSaved is an entry's state before the grant.
type aclSaved struct {
	Rel  string  `json:"rel"` // below Root, "." for Root
	Key  fileKey `json:"key"`
	Mode uint32  `json:"mode"` // permission, setuid, setgid and sticky bits
	ACL  []byte  `json:"acl,omitempty"`
	Dir  bool    `json:"dir,omitempty"`
}

// fileKey names an inode.
type fileKey struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

// walk lists the owner's entries of Root and the server's user's.
func (g *aclJournal) walk() error {
	n := 0
	return walkTree(g.Root, func(e walkEntry) error {
		if n++; n > MaxWalk {
			return errWalkStop
		}
		st := e.st
		k := fileKey{st.Dev, st.Ino}
		switch {
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		case st.Uid == g.UID && st.Gid == g.GID:
			g.Had = append(g.Had, k)
		case st.Uid == g.Owner[0]:
			s := aclSaved{Rel: e.rel, Key: k, Mode: st.Mode & 0o7777, Dir: st.Mode&unix.S_IFMT == unix.S_IFDIR}
			err := e.at(k, func(proc string, _ int) error {
				b, err := xattr(proc)
				if err != nil {
					return nil // none
				}
				if _, err := parseACL(b); err != nil {
					return fmt.Errorf("%s: %w", filepath.Join(g.Root, e.rel), err)
				}
				s.ACL = b
				return nil
			})
			if err != nil {
				return err
			}
			g.Entries = append(g.Entries, s)
		}
		return nil
	})
}

// apply gives the server's user the owner's permissions on s.
func (g *aclJournal) apply(s *aclSaved) error {
	fd, err := openBeneath(g.Root, s.Rel)
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(g.Root, s.Rel), err)
	}
	defer unix.Close(fd)
	return onInode(fd, s.Key, func(proc string, fd int) error {
		if proc == "" {
			return errNotSame
		}
		var es []aclEntry
		if s.ACL != nil {
			es, _ = parseACL(s.ACL)
		}
		if s.Dir {
			if err := unix.Fchownat(fd, "", int(g.UID), int(g.GID), unix.AT_EMPTY_PATH); err != nil {
				return fmt.Errorf("lend %s: %w", filepath.Join(g.Root, s.Rel), err)
			}
		}
		perm := uint16(s.Mode >> 6 & 7)
		if err := unix.Setxattr(proc, aclXattr, encodeACL(withUser(es, s.Mode, g.UID, perm)), 0); err != nil {
			return fmt.Errorf("set ACL on %s: %w", filepath.Join(g.Root, s.Rel), err)
		}
		return nil
	})
}

// restore puts s back as it was, on fd (s's inode).
func (g *aclJournal) restore(s *aclSaved, proc string, fd int) error {
	if proc == "" {
		return errNotSame // a link: never the inode recorded
	}
	var errs []error
	if s.ACL != nil {
		errs = append(errs, unix.Setxattr(proc, aclXattr, s.ACL, 0))
	} else if err := unix.Removexattr(proc, aclXattr); err != nil && !errors.Is(err, unix.ENODATA) {
		errs = append(errs, err)
	}
	if s.Dir {
		errs = append(errs, unix.Fchownat(fd, "", int(g.Owner[0]), int(g.Owner[1]), unix.AT_EMPTY_PATH))
	}
	errs = append(errs, unix.Chmod(proc, s.Mode))
	return errors.Join(errs...)
}

// undo takes the entries back, restores the modes and the lent
// directories, and gives what the server's user created to the owner
// (but what it owned before): files keep their owner on disk. It walks
// the tree as it is now, without following links, and puts each inode it
// recorded back wherever the server moved it inside; a name that is now
// another inode, or a link, is left alone.
func (g *aclJournal) undo() error {
	saved := make(map[fileKey]*aclSaved, len(g.Entries))
	for i := range g.Entries {
		saved[g.Entries[i].Key] = &g.Entries[i]
	}
	var errs []error
	n := 0
	err := walkTree(g.Root, func(e walkEntry) error {
		if n++; n > 2*MaxWalk {
			return errWalkStop
		}
		k := fileKey{e.st.Dev, e.st.Ino}
		if s, ok := saved[k]; ok && e.st.Mode&unix.S_IFMT != unix.S_IFLNK {
			delete(saved, k)
			if err := e.at(k, func(proc string, fd int) error { return g.restore(s, proc, fd) }); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", filepath.Join(g.Root, e.rel), err))
			}
			return nil
		}
		if e.st.Uid != g.UID || e.st.Gid != g.GID || slices.Contains(g.Had, k) {
			return nil
		}
		return e.at(k, func(_ string, fd int) error {
			errs = append(errs, unix.Fchownat(fd, "", int(g.Owner[0]), int(g.Owner[1]), unix.AT_EMPTY_PATH))
			return nil
		})
	})
	return errors.Join(append(errs, err)...)
}

var errNotSame = errors.New("not the entry walked")

// onInode runs f on fd, an O_PATH descriptor, and its /proc/self/fd name
// (for the calls that take no descriptor; "" for a link), only when fd
// is key's inode.
func onInode(fd int, key fileKey, f func(proc string, fd int) error) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if (fileKey{st.Dev, st.Ino}) != key {
		return errNotSame
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		// Only the link itself is ever changed (its owner): the proc
		// name would reach what it points to.
		return f("", fd)
	}
	return f("/proc/self/fd/"+strconv.Itoa(fd), fd)
}

// xattr reads p's access ACL (following p: a /proc/self/fd name or a
// path whose last component is not a link).
func xattr(p string) ([]byte, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Getxattr(p, aclXattr, buf)
		if errors.Is(err, unix.ERANGE) {
			buf = make([]byte, len(buf)*4)
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}

// openBeneath opens root/rel as an O_PATH descriptor, one component at a
// time from root, following no symbolic link on the way or at the end.
func openBeneath(root, rel string) (int, error) {
	if rel == "." || rel == "" {
		// The root itself: a directory, or the one file of a file grant.
		return unix.Open(root, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	for _, c := range strings.Split(rel, "/") {
		if c == ".." || c == "." || c == "" {
			unix.Close(fd)
			return -1, fmt.Errorf("%w: %q", errNotSame, rel)
		}
		next, err := unix.Openat(fd, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

var errWalkStop = errors.New("walk stopped")

// walkEntry is an entry walkTree found: its path below the root, its
// status, and at, which runs a function on it through an O_PATH
// descriptor opened from its directory's without following a link
// (onInode: only if it is still key's inode).
type walkEntry struct {
	rel string
	st  *unix.Stat_t
	at  func(key fileKey, f func(proc string, fd int) error) error
}

// walkTree calls f for root (".") and every entry below it, depth first,
// reading each directory through a descriptor opened from its parent's
// without following links (O_NOFOLLOW): a directory swapped for a link
// while the walk runs is not entered. f returning errWalkStop ends the
// walk without an error.
func walkTree(root string, f func(walkEntry) error) error {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOTDIR) {
		return walkFile(root, f) // a grant of one file
	}
	if err != nil {
		return err
	}
	err = walkDir(fd, ".", f)
	if errors.Is(err, errWalkStop) {
		return nil
	}
	return err
}

// walkFile is walkTree for a root that is one file: the file is its
// only entry, ".".
func walkFile(root string, f func(walkEntry) error) error {
	fd, err := unix.Open(root, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	at := func(key fileKey, g func(string, int) error) error {
		if err := onInode(fd, key, g); !errors.Is(err, errNotSame) {
			return err
		}
		return nil
	}
	err = f(walkEntry{".", &st, at})
	if errors.Is(err, errWalkStop) {
		return nil
	}
	return err
}

// atName is walkEntry.at for name in the directory dirfd ("" for dirfd).
func atName(dirfd int, name string) func(fileKey, func(string, int) error) error {
	return func(key fileKey, f func(string, int) error) error {
		if name == "" {
			name = "."
		}
		fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil // gone
		}
		defer unix.Close(fd)
		if err := onInode(fd, key, f); !errors.Is(err, errNotSame) {
			return err
		}
		return nil
	}
}

func walkDir(fd int, rel string, f func(walkEntry) error) error {
	dir := os.NewFile(uintptr(fd), rel)
	defer dir.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil
	}
	if err := f(walkEntry{rel, &st, atName(fd, "")}); err != nil {
		return err
	}
	names, _ := dir.Readdirnames(-1)
	slices.Sort(names)
	for _, name := range names {
		sub := name
		if rel != "." {
			sub = rel + "/" + name
		}
		var st unix.Stat_t
		if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			if err := f(walkEntry{sub, &st, atName(fd, name)}); err != nil {
				return err
			}
			continue
		}
		child, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		if err := walkDir(child, sub, f); err != nil {
			return err
		}
	}
	return nil
}
