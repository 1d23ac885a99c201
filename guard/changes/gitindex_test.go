package changes_test

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/guard/changes"
)

// needGit skips a test that builds its repositories with git: the code
// under test never runs git, only its tests do.
func needGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed: the test builds its repositories with it")
	}
}

// gitIn runs git in dir with no user or system configuration, and
// returns its output without the trailing newline.
func gitIn(t testing.TB, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), stderr.String())
	return strings.TrimRight(string(out), "\n")
}

// newRepo makes a repository at dir with index version v and one
// commit of README.md; format is "sha1" or "sha256".
func newRepo(t testing.TB, dir string, v int, format string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	gitIn(t, dir, "", "init", "-q", "-b", "main", "--object-format="+format)
	gitIn(t, dir, "", "config", "index.version", strconv.Itoa(v))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("hello\n"), 0o644))
	gitIn(t, dir, "", "add", "README.md")
	gitIn(t, dir, "", "commit", "-q", "-m", "first")
}

// fillRepo adds what exercises the index format: shared prefixes (v4's
// compression), a name of 0xfff bytes or more (its length not in the
// flags; unless small), an assume-unchanged entry, an intent-to-add entry
// and a skip-worktree one (extended flags: version 3, unless not
// extended), a link and a conflicted path's stages.
func fillRepo(t testing.TB, dir string, extended, small bool) {
	t.Helper()
	for _, p := range []string{"src/a/one.go", "src/a/two.go", "src/b/three.go", "src/bb.go", "z.txt"} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte(p+"\n"), 0o644))
	}
	require.NoError(t, os.Symlink("README.md", filepath.Join(dir, "link")))
	gitIn(t, dir, "", "add", ".")
	gitIn(t, dir, "", "update-index", "--assume-unchanged", "src/bb.go")
	blob := gitIn(t, dir, "long\n", "hash-object", "-w", "--stdin")
	if !small {
		long := strings.Repeat("d/", 0xfff/2) + "f" // 4095 bytes: the flags say 0xfff
		gitIn(t, dir, "", "update-index", "--add", "--cacheinfo", "100644,"+blob+","+long)
	}
	if extended {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "new.txt"), []byte("n\n"), 0o644))
		gitIn(t, dir, "", "add", "-N", "new.txt")
		gitIn(t, dir, "", "update-index", "--skip-worktree", "z.txt")
	}
	gitIn(t, dir, "1 "+blob+"\tconflict\n"+"2 "+blob+"\tconflict\n", "update-index", "--index-info")
}

// lsFiles is what git says the index holds: "mode id stage\tpath".
func lsFiles(t testing.TB, dir string) []string {
	out := gitIn(t, dir, "", "ls-files", "-s", "-z")
	return strings.Split(strings.TrimRight(out, "\x00"), "\x00")
}

func readRepoIndex(t testing.TB, dir string, hs int) *changes.Index {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
	require.NoError(t, err)
	ix, err := changes.ReadIndex(data, hs)
	require.NoError(t, err)
	return ix
}

// TestReadIndexAsGit: the parser reads what git reads, in index versions
// 2, 3 and 4 and with SHA-256 ids.
func TestReadIndexAsGit(t *testing.T) {
	needGit(t)
	for _, tc := range []struct {
		v       int
		format  string
		hs      int
		threads bool // git writes IEOT blocks and an EOIE
	}{{2, "sha1", 20, false}, {3, "sha1", 20, false}, {4, "sha1", 20, false}, {4, "sha256", 32, false}, {4, "sha1", 20, true}, {2, "sha1", 20, true}} {
		t.Run(strconv.Itoa(tc.v)+tc.format+map[bool]string{true: "threads"}[tc.threads], func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "repo")
			newRepo(t, dir, tc.v, tc.format)
			if tc.threads {
				gitIn(t, dir, "", "config", "index.threads", "4")
				gitIn(t, dir, "", "config", "index.recordOffsetTable", "true")
				gitIn(t, dir, "", "config", "index.recordEndOfIndexEntries", "true")
			}
			fillRepo(t, dir, tc.v != 2, false)
			gitIn(t, dir, "", "update-index", "--index-version", strconv.Itoa(tc.v))
			ix := readRepoIndex(t, dir, tc.hs)
			assert.Equal(t, tc.v, ix.Version)
			var got []string
			flags := map[string]changes.IndexEntry{}
			for _, e := range ix.Entries {
				got = append(got, strconv.FormatUint(uint64(e.Mode), 8)+" "+e.ID+" "+strconv.Itoa(int(e.Stage))+"\t"+e.Path)
				flags[e.Path] = e
			}
			assert.Equal(t, lsFiles(t, dir), got)
			assert.Equal(t, tc.v != 2, flags["new.txt"].IntentToAdd)
			assert.Equal(t, tc.v != 2, flags["z.txt"].SkipWorktree)
			assert.True(t, flags["src/bb.go"].AssumeValid)
			assert.False(t, flags["README.md"].SkipWorktree || flags["README.md"].IntentToAdd || flags["README.md"].AssumeValid)
			assert.Empty(t, ix.Threaded)
			if tc.threads {
				assert.Subset(t, ix.Extensions, []string{"IEOT", "EOIE"})
			}
		})
	}
}

// entry is one entry of an index a test writes itself.
type entry struct {
	path  string
	mode  uint32
	flags uint16 // besides the name length: stage, extended
	ext   uint16 // the extended flags, when flags has 0x4000
	// v4: strip and suffix as written; strip < 0 derives both from the
	// previous name
	strip  int
	suffix string
	// nameLen overrides the flags' name length when not 0
	nameLen int
}

// gitVarint encodes as git's encode_varint.
func gitVarint(v uint64) []byte {
	var b [16]byte
	pos := len(b) - 1
	b[pos] = byte(v & 127)
	for v >>= 7; v != 0; v >>= 7 {
		v--
		pos--
		b[pos] = 128 | byte(v&127)
	}
	return b[pos:]
}

type ext struct {
	sig  string
	body []byte
}

// buildIndex writes an index of version v with hs-byte ids; blocks, when
// not nil, adds IEOT and EOIE extensions with blocks of that many entries.
func buildIndex(v, hs int, ents []entry, exts []ext, blocks []int) []byte {
	var b bytes.Buffer
	b.WriteString("DIRC")
	binary.Write(&b, binary.BigEndian, uint32(v))
	binary.Write(&b, binary.BigEndian, uint32(len(ents)))
	offsets := make([]int, len(ents))
	starts := map[int]bool{}
	for i, at := 0, 0; at < len(blocks); at++ {
		starts[i] = true
		i += blocks[at]
	}
	prev := ""
	for i, e := range ents {
		offsets[i] = b.Len()
		start := b.Len()
		var fixed [40]byte
		binary.BigEndian.PutUint32(fixed[24:], e.mode)
		b.Write(fixed[:])
		b.Write(bytes.Repeat([]byte{0xab}, hs))
		n := min(len(e.path), 0xfff)
		if e.nameLen != 0 {
			n = e.nameLen
		}
		binary.Write(&b, binary.BigEndian, e.flags|uint16(n))
		if e.flags&0x4000 != 0 {
			binary.Write(&b, binary.BigEndian, e.ext)
		}
		if v == 4 {
			strip, suffix := e.strip, e.suffix
			switch {
			case strip < 0 && starts[i]:
				// as git writes a block's first entry: nothing kept
				strip, suffix = len(prev), e.path
			case strip < 0:
				common := 0
				for common < len(prev) && common < len(e.path) && prev[common] == e.path[common] {
					common++
				}
				strip, suffix = len(prev)-common, e.path[common:]
			}
			b.Write(gitVarint(uint64(strip)))
			b.WriteString(suffix)
			b.WriteByte(0)
		} else {
			b.WriteString(e.path)
			b.WriteByte(0)
			for (b.Len()-start)%8 != 0 {
				b.WriteByte(0)
			}
		}
		prev = e.path
	}
	extStart := b.Len()
	for _, x := range exts {
		b.WriteString(x.sig)
		binary.Write(&b, binary.BigEndian, uint32(len(x.body)))
		b.Write(x.body)
	}
	if blocks != nil {
		var ieot bytes.Buffer
		binary.Write(&ieot, binary.BigEndian, uint32(1))
		i := 0
		for _, n := range blocks {
			binary.Write(&ieot, binary.BigEndian, uint32(offsets[i]))
			binary.Write(&ieot, binary.BigEndian, uint32(n))
			i += n
		}
		b.WriteString("IEOT")
		binary.Write(&b, binary.BigEndian, uint32(ieot.Len()))
		b.Write(ieot.Bytes())
		b.WriteString("EOIE")
		binary.Write(&b, binary.BigEndian, uint32(24))
		binary.Write(&b, binary.BigEndian, uint32(extStart))
		b.Write(make([]byte, 20))
	}
	if hs == 20 {
		sum := sha1.Sum(b.Bytes())
		b.Write(sum[:])
	} else {
		sum := sha256.Sum256(b.Bytes())
		b.Write(sum[:])
	}
	return b.Bytes()
}

func auto(path string) entry { return entry{path: path, mode: 0o100644, strip: -1} }

// TestReadIndexBuilt: the test's own writer and the parser agree, in
// every version; a v4 index read in IEOT blocks names what a single pass
// names.
func TestReadIndexBuilt(t *testing.T) {
	ents := []entry{auto("a/b/c"), auto("a/b/d"), auto("a/x"), auto(strings.Repeat("y", 0x1000)), auto("z")}
	for _, v := range []int{2, 3, 4} {
		for _, hs := range []int{20, 32} {
			ix, err := changes.ReadIndex(buildIndex(v, hs, ents, nil, []int{2, 3}), hs)
			require.NoError(t, err, "v%d", v)
			require.Len(t, ix.Entries, len(ents))
			for i, e := range ix.Entries {
				assert.Equal(t, ents[i].path, e.Path)
				assert.Equal(t, strings.Repeat("ab", hs), e.ID)
			}
			assert.Empty(t, ix.Threaded, "v%d: blocks git wrote read the same", v)
		}
	}
}

// TestReadIndexFlags: the bits that hide an entry's file from git status
// are read in every version: assume-valid in the flags, skip-worktree in
// the extended flags.
func TestReadIndexFlags(t *testing.T) {
	ents := []entry{auto("a"), {path: "b", mode: 0o100644, flags: 0x8000, strip: -1},
		{path: "c", mode: 0o100644, flags: 0x4000, ext: 0x4000, strip: -1},
		{path: "d", mode: 0o100644, flags: 0x8000 | 0x4000, ext: 0x6000, strip: -1}}
	for _, v := range []int{2, 3, 4} {
		ix, err := changes.ReadIndex(buildIndex(v, 20, ents, nil, nil), 20)
		require.NoError(t, err, "v%d", v)
		var got []string
		for _, e := range ix.Entries {
			got = append(got, fmt.Sprintf("%s %t %t %t", e.Path, e.AssumeValid, e.SkipWorktree, e.IntentToAdd))
		}
		assert.Equal(t, []string{"a false false false", "b true false false", "c false true false", "d true true true"}, got, "v%d", v)
	}
}

// TestReadIndexThreaded: a v4 entry that starts an IEOT block, keeps
// part of the previous name and leaves its length to its NUL (0xfff)
// reads as one path in one pass ("foo.mcp.json") and as another to git's
// threads (".mcp.json"): the second is reported with the first.
func TestReadIndexThreaded(t *testing.T) {
	ents := []entry{auto("foo"), {path: "foo.mcp.json", mode: 0o100644, strip: 0, suffix: ".mcp.json", nameLen: 0xfff}}
	ix, err := changes.ReadIndex(buildIndex(4, 20, ents, nil, []int{1, 1}), 20)
	require.NoError(t, err)
	assert.Equal(t, "foo.mcp.json", ix.Entries[1].Path)
	require.Len(t, ix.Threaded, 1)
	assert.Equal(t, ".mcp.json", ix.Threaded[0].Path)
}

// TestReadIndexMalformed: what is not an index, or one git would refuse,
// or one that would make the reader go past the file or grow without
// bound, is an error, never a panic.
func TestReadIndexMalformed(t *testing.T) {
	good := buildIndex(4, 20, []entry{auto("a/b"), auto("a/c"), auto("d")}, []ext{{"TREE", []byte("x")}}, nil)
	_, err := changes.ReadIndex(good, 20)
	require.NoError(t, err)
	set := func(b []byte, at int, v uint32) []byte {
		b = bytes.Clone(b)
		binary.BigEndian.PutUint32(b[at:], v)
		return b
	}
	for name, tc := range map[string]struct {
		data []byte
		err  string
	}{
		"empty":           {nil, "truncated"},
		"header only":     {good[:12], "truncated"},
		"signature":       {append([]byte("DIRX"), good[4:]...), "signature"},
		"version 1":       {set(good, 4, 1), "version 1"},
		"version 5":       {set(good, 4, 5), "version 5"},
		"huge count":      {set(good, 8, 0xffffffff), "more than 1000000"},
		"count past data": {set(good, 8, 999999), "do not fit"},
		"strip too long": {buildIndex(4, 20, []entry{auto("ab"), {path: "x", mode: 0o100644, strip: 3, suffix: "x"}}, nil, nil),
			"strips 3 bytes of a 2-byte name"},
		"extended flags": {buildIndex(3, 20, []entry{{path: "a", mode: 0o100644, flags: 0x4000, ext: 0x1000}}, nil, nil), "unknown extended flags"},
		"lowercase ext":  {buildIndex(2, 20, []entry{auto("a")}, []ext{{"abcd", nil}}, nil), "does not understand"},
		"ext overrun":    {set(good, len(good)-20-1-4, 1000), "overruns"},
		"unterminated":   {buildIndex(2, 20, []entry{{path: "abcdefgh", mode: 0o100644, nameLen: 2}}, nil, nil), "not terminated"},
		"name too long":  {buildIndex(2, 20, []entry{auto(strings.Repeat("n", 5000))}, nil, nil), "more than 4096"},
		"v4 name short": {buildIndex(4, 20, []entry{auto("abc"), {path: "abx", mode: 0o100644, strip: 1, suffix: "x", nameLen: 1}}, nil, nil),
			"shorter than"},
		"link short": {buildIndex(2, 20, []entry{auto("a")}, []ext{{"link", []byte("short")}}, nil), "link extension"},
	} {
		t.Run(name, func(t *testing.T) {
			ix, err := changes.ReadIndex(tc.data, 20)
			assert.Nil(t, ix)
			assert.ErrorContains(t, err, tc.err)
		})
	}
	// Cut anywhere: an error, or (cut inside the last extension, which
	// then reads as the checksum) the same entries.
	for n := range len(good) {
		ix, err := changes.ReadIndex(good[:n], 20)
		if err == nil {
			assert.Len(t, ix.Entries, 3, "cut at %d", n)
		}
	}
	// v4 names that each keep the whole previous one and add to it stop
	// at the bound on all names' bytes.
	ents := []entry{auto(strings.Repeat("p", 4000))}
	for range 100 {
		ents = append(ents, entry{path: ents[0].path, mode: 0o100644, strip: 0, suffix: ""})
	}
	_, err = changes.ReadIndexNames(buildIndex(4, 20, ents, nil, nil), 20, 100_000)
	assert.ErrorContains(t, err, "names longer than 100000 bytes")
}

// FuzzReadIndex: no input makes the parser panic, read out of bounds or
// return what it should not; seeded with real indexes of every version
// and the test's own. The seeds are small (no 4 KiB name; a name whose
// length the flags leave to its NUL is short): the fuzzer minimizes each
// new input byte by byte, and a large one takes its whole run.
func FuzzReadIndex(f *testing.F) {
	if _, err := exec.LookPath("git"); err == nil {
		for _, v := range []int{2, 3, 4} {
			dir := filepath.Join(f.TempDir(), "repo"+strconv.Itoa(v))
			newRepo(f, dir, v, "sha1")
			fillRepo(f, dir, v != 2, true)
			gitIn(f, dir, "", "update-index", "--index-version", strconv.Itoa(v))
			data, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
			require.NoError(f, err)
			f.Add(data, false)
		}
	}
	ents := []entry{auto("a/b"), auto("a/c"), {path: "a/long", mode: 0o100644, strip: -1, nameLen: 0xfff},
		{path: "e", mode: 0o100644, flags: 0x4000 | 0x1000, ext: 0x6000, strip: -1}}
	for _, v := range []int{2, 3, 4} {
		f.Add(buildIndex(v, 20, ents, []ext{{"TREE", []byte("tree")}, {"link", make([]byte, 20)}}, []int{2, 2}), false)
		f.Add(buildIndex(v, 32, ents, nil, []int{1, 3}), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, sha256 bool) {
		hs := 20
		if sha256 {
			hs = 32
		}
		ix, err := changes.ReadIndex(data, hs)
		if err != nil {
			require.Nil(t, ix)
			return
		}
		require.Equal(t, binary.BigEndian.Uint32(data[8:]), uint32(len(ix.Entries)))
		require.Contains(t, []int{2, 3, 4}, ix.Version)
		require.LessOrEqual(t, len(ix.Threaded), len(ix.Entries))
		for _, e := range append(ix.Entries, ix.Threaded...) {
			require.Len(t, e.ID, 2*hs)
			_, err := hex.DecodeString(e.ID)
			require.NoError(t, err)
			require.LessOrEqual(t, len(e.Path), 4096)
			require.LessOrEqual(t, e.Stage, uint8(3))
		}
	})
}
