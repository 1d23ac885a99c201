package changes

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
)

// The git index is parsed here rather than by running git: the file is
// written by the server, and the guard runs nothing on what a server
// wrote. The parser follows git's own reader (read-cache.c,
// create_from_disk) rather than the format document where the two differ,
// since what matters is what the user's git will make of the file: the
// name length comes from the entry's flags (not from where a NUL is), the
// extended flags are read in any version, and the trailing checksum is
// not checked (git checks it only in fsck).

// MaxIndexSize is the largest index file read (a 1,000,000-file work
// tree's index is about 100 MiB); a larger one is reported unread.
const MaxIndexSize = 128 << 20

// MaxIndexEntries is the most entries an index may declare.
const MaxIndexEntries = 1_000_000

// maxIndexName is the longest name read: no file system call takes a
// longer path, so git cannot check one out.
const maxIndexName = 4096

// maxIndexNames bounds the bytes of all names read (as many as the
// largest index read holds). A v4 entry keeps any part of the previous
// name, so names can grow with each entry while the file stays small:
// without a bound a 1 MiB index could ask for gigabytes.
const maxIndexNames = MaxIndexSize

// IndexEntry is one entry of a git index.
type IndexEntry struct {
	// Path is the name as git holds it, relative to the work tree. A NUL
	// in it (only a hostile index has one) ends the name git's checkout
	// writes: see CheckoutPath.
	Path         string
	ID           string // the object id, hex
	Mode         uint32 // 0100644, 0100755, 0120000 (link), 0160000 (submodule), 040000 (sparse directory)
	Stage        uint8  // 0, or 1 to 3 for a conflict
	SkipWorktree bool   // extended flag 0x4000 (v3, v4): git takes the work tree's file as what the entry holds
	IntentToAdd  bool
	// AssumeValid is CE_VALID (flag 0x8000, any version; git
	// update-index --assume-unchanged): git status and git diff take the
	// work tree's file as unchanged without looking at it.
	AssumeValid bool
}

// CheckoutPath is the entry's path up to its first NUL: the name git's
// checkout passes to the file system.
func (e IndexEntry) CheckoutPath() string {
	if i := bytes.IndexByte([]byte(e.Path), 0); i >= 0 {
		return e.Path[:i]
	}
	return e.Path
}

// Index is a parsed git index.
type Index struct {
	Version int
	Entries []IndexEntry // in file order; Path "" only in a split index (an entry replacing one of the shared index)
	// SharedIndex is the id of the shared index a split index (the link
	// extension) lays its entries over: .git/sharedindex.<id>.
	SharedIndex string
	Extensions  []string
	// Threaded are the entries git reads differently when it loads the
	// index in blocks on several threads (index.threads, by the offsets of
	// the IEOT extension): a block's first entry starts with no previous
	// name, so a v4 index can name one path to a reader in one thread and
	// another to one in several. Empty for any index git wrote.
	Threaded []IndexEntry
}

var errIndexShort = errors.New("index: truncated")

// ReadIndex parses a git index (versions 2, 3 and 4) whose object ids are
// hashSize bytes long (20 for SHA-1, 32 for SHA-256). It fails on what git
// fails on and on anything it cannot read within bounds; it never reads
// past data, and allocates in proportion to len(data).
func ReadIndex(data []byte, hashSize int) (*Index, error) {
	return readIndex(data, hashSize, maxIndexNames)
}

// readIndex is ReadIndex with a bound on the bytes of all names.
func readIndex(data []byte, hashSize, maxNames int) (*Index, error) {
	if hashSize != 20 && hashSize != 32 {
		return nil, fmt.Errorf("index: hash size %d", hashSize)
	}
	if len(data) > MaxIndexSize {
		return nil, fmt.Errorf("index: %d bytes, more than %d", len(data), MaxIndexSize)
	}
	if len(data) < 12+hashSize {
		return nil, errIndexShort
	}
	if string(data[:4]) != "DIRC" {
		return nil, fmt.Errorf("index: signature %q, not \"DIRC\"", data[:4])
	}
	ix := &Index{Version: int(binary.BigEndian.Uint32(data[4:]))}
	if ix.Version < 2 || ix.Version > 4 {
		return nil, fmt.Errorf("index: version %d, not 2, 3 or 4", ix.Version)
	}
	n := binary.BigEndian.Uint32(data[8:])
	if n > MaxIndexEntries {
		return nil, fmt.Errorf("index: %d entries, more than %d", n, MaxIndexEntries)
	}
	r := indexReader{data: data, end: len(data) - hashSize, v4: ix.Version == 4, hs: hashSize}
	// The smallest entry: its fixed fields, flags, one name byte (v2, v3:
	// padding; v4: the varint) and its NUL.
	if uint64(n)*uint64(40+hashSize+4) > uint64(r.end-12) {
		return nil, fmt.Errorf("index: %d entries do not fit in %d bytes", n, len(data))
	}
	ix.Entries = make([]IndexEntry, 0, n)
	off := 12
	var prev []byte
	names := 0
	for i := range n {
		e, name, next, err := r.entry(off, prev, i > 0)
		if err != nil {
			return nil, fmt.Errorf("index: entry %d: %w", i, err)
		}
		if names += len(name); names > maxNames {
			return nil, fmt.Errorf("index: names longer than %d bytes in all", maxNames)
		}
		ix.Entries = append(ix.Entries, e)
		off, prev = next, name
	}
	if err := ix.extensions(r, off); err != nil {
		return nil, err
	}
	ix.Threaded = r.threaded(ix.Entries, maxNames)
	return ix, nil
}

type indexReader struct {
	data []byte
	end  int // where the trailing checksum starts
	v4   bool
	hs   int
}

// entry reads the entry at off. prev is the previous entry's name, which
// a v4 entry's name extends (hasPrev: there is a previous entry; git's
// first entry, and a thread's first, ignores the number of bytes to strip).
func (r indexReader) entry(off int, prev []byte, hasPrev bool) (IndexEntry, []byte, int, error) {
	d := r.data[:r.end]
	fixed := 40 + r.hs
	if off < 0 || off > len(d) || len(d)-off < fixed+2 {
		return IndexEntry{}, nil, 0, errIndexShort
	}
	e := IndexEntry{Mode: binary.BigEndian.Uint32(d[off+24:]), ID: hex.EncodeToString(d[off+40 : off+fixed])}
	flags := binary.BigEndian.Uint16(d[off+fixed:])
	p := off + fixed + 2
	e.Stage = uint8(flags >> 12 & 3)
	e.AssumeValid = flags&0x8000 != 0
	if flags&0x4000 != 0 {
		if len(d)-p < 2 {
			return IndexEntry{}, nil, 0, errIndexShort
		}
		ext := binary.BigEndian.Uint16(d[p:])
		if ext&^0x6000 != 0 {
			return IndexEntry{}, nil, 0, fmt.Errorf("unknown extended flags %#04x", ext)
		}
		e.IntentToAdd, e.SkipWorktree = ext&0x2000 != 0, ext&0x4000 != 0
		p += 2
	}
	n := int(flags & 0xfff)
	keep := 0
	if r.v4 {
		strip, used, err := gitVarint(d[p:])
		if err != nil {
			return IndexEntry{}, nil, 0, err
		}
		p += used
		if hasPrev {
			if strip > uint64(len(prev)) {
				return IndexEntry{}, nil, 0, fmt.Errorf("strips %d bytes of a %d-byte name", strip, len(prev))
			}
			keep = len(prev) - int(strip)
		}
	}
	if n == 0xfff {
		i := bytes.IndexByte(d[p:], 0)
		if i < 0 {
			return IndexEntry{}, nil, 0, errIndexShort
		}
		n = i + keep
	}
	// git copies the byte after the name as its terminator: one that is
	// not a NUL would leave the name unterminated in git's memory.
	if n > maxIndexName {
		return IndexEntry{}, nil, 0, fmt.Errorf("name of %d bytes, more than %d", n, maxIndexName)
	}
	var name []byte
	next, term := 0, 0
	if r.v4 {
		if n < keep {
			return IndexEntry{}, nil, 0, fmt.Errorf("name length %d shorter than the %d bytes kept", n, keep)
		}
		suffix := n - keep
		if len(d)-p < suffix+1 {
			return IndexEntry{}, nil, 0, errIndexShort
		}
		name = make([]byte, 0, n)
		name = append(append(name, prev[:keep]...), d[p:p+suffix]...)
		term = p + suffix
		next = term + 1
	} else {
		size := (p - off + n + 8) &^ 7
		if len(d)-off < size {
			return IndexEntry{}, nil, 0, errIndexShort
		}
		name = d[p : p+n]
		term = p + n
		next = off + size
	}
	if d[term] != 0 {
		return IndexEntry{}, nil, 0, errors.New("name not terminated")
	}
	e.Path = string(name)
	return e, name, next, nil
}

// gitVarint decodes git's offset varint (varint.c), as git does: an
// overflowing one reads as 0 and consumes nothing.
func gitVarint(b []byte) (uint64, int, error) {
	if len(b) == 0 {
		return 0, 0, errIndexShort
	}
	c := b[0]
	v := uint64(c & 127)
	for i := 1; c&128 != 0; i++ {
		v++
		if v == 0 || v>>(64-7) != 0 {
			return 0, 0, nil
		}
		if i >= len(b) {
			return 0, 0, errIndexShort
		}
		c = b[i]
		v = v<<7 + uint64(c&127)
		if c&128 == 0 {
			return v, i + 1, nil
		}
	}
	return v, 1, nil
}

// extensions reads the extensions after the entries, as git does: while
// there is room for a header before the checksum, and refusing an
// extension git must understand (its name not starting with A to Z) and
// does not.
func (ix *Index) extensions(r indexReader, off int) error {
	for r.end-off >= 8 {
		sig := string(r.data[off : off+4])
		size := binary.BigEndian.Uint32(r.data[off+4:])
		if uint64(size) > uint64(r.end-off-8) {
			return fmt.Errorf("index: extension %q of %d bytes overruns the file", sig, size)
		}
		body := r.data[off+8 : off+8+int(size)]
		switch {
		case sig == "link":
			if len(body) < r.hs {
				return errors.New("index: link extension shorter than an object id")
			}
			ix.SharedIndex = hex.EncodeToString(body[:r.hs])
		case sig == "sdir":
		case sig[0] < 'A' || sig[0] > 'Z':
			return fmt.Errorf("index: extension %q, which git does not understand either", sig)
		}
		if len(ix.Extensions) < 64 {
			ix.Extensions = append(ix.Extensions, sig)
		}
		off += 8 + int(size)
	}
	return nil
}

// eoieSize is the end-of-index-entries extension with its header; git
// sizes its hash as SHA-1's whatever the repository's hash.
const eoieSize = 8 + 4 + 20

// threaded reads the entries as git's threaded loader would, by the
// blocks of the IEOT extension that the EOIE extension at the end of the
// file leads to, and returns those that differ from seq (the entries read
// in one pass) at the same position. The EOIE's hash of the extension
// headers is not checked: reading blocks git would not use costs nothing
// but a report of entries no git sees.
func (r indexReader) threaded(seq []IndexEntry, maxNames int) []IndexEntry {
	d := r.data
	at := r.end - eoieSize
	if at < 12 || string(d[at:at+4]) != "EOIE" || binary.BigEndian.Uint32(d[at+4:]) != 4+20 {
		return nil
	}
	off := int(binary.BigEndian.Uint32(d[at+8:]))
	if off < 12 || off >= at {
		return nil
	}
	var ieot []byte
	for r.end-off >= 8 {
		size := binary.BigEndian.Uint32(d[off+4:])
		if uint64(size) > uint64(r.end-off-8) {
			return nil
		}
		if string(d[off:off+4]) == "IEOT" {
			ieot = d[off+8 : off+8+int(size)]
			break
		}
		off += 8 + int(size)
	}
	if len(ieot) < 12 || binary.BigEndian.Uint32(ieot) != 1 {
		return nil
	}
	var out []IndexEntry
	pos, names := 0, 0
	for b := ieot[4:]; len(b) >= 8 && pos < len(seq); b = b[8:] {
		at := binary.BigEndian.Uint32(b)
		nr := binary.BigEndian.Uint32(b[4:])
		var prev []byte
		for i := uint32(0); i < nr && pos < len(seq); i++ {
			e, name, next, err := r.entry(int(at), prev, i > 0)
			if err != nil {
				// git's threads would stop here too (it dies, or reads
				// past the file): entries git cannot read are not ones
				// it writes out.
				return out
			}
			if e != seq[pos] {
				if names += len(e.Path); names > maxNames {
					return out
				}
				out = append(out, e)
			}
			at, prev = uint32(next), name
			pos++
		}
	}
	return out
}
