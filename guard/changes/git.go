package changes

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The guard lets a server write git's data inside a .git directory
// (objects, refs, the index: launch.GitData), so that git works for it.
// With that a server can stage a protected file without ever opening it:
// it writes a blob of .mcp.json, puts it in the index, commits it on top of
// HEAD and moves the branch there (red team F8). The server's write of
// .mcp.json is refused, but `git status` now shows the file deleted, and
// the user's routine `git restore .`, `git checkout -- .` or
// `git reset --hard` writes it, outside any sandbox. The file report sees
// nothing: no watched file changed.
//
// So the report also records, for each repository in the write roots,
// where its refs point and what its index holds, and names what moved:
// every ref, with the commands that show what the server committed, and,
// prominently, every index entry new or changed at a path that is
// protected or watched, which git would write for the user.
//
// The server also writes the object store, and git does not check that
// an object it reads hashes to its name: a loose object rewritten in place
// (.git/objects/ab/cdef...) is what git show HEAD:file displays and git
// reset --hard writes (red team F6). So the snapshot records each loose
// object's file by identity (inode, size, change time: no read), and the
// comparison hashes each object whose file changed, and each new one,
// within bounds, and names those whose content does not match their name.
// A pack there at the start whose file changed is hashed and compared with
// its name (a pack is named by its checksum), a pack index with its digest
// at the start; what does not match is said, for git fsck to verify.
//
// The index can also hide a change: an entry marked assume-unchanged or
// skip-worktree during the session is named, since git status and git
// diff no longer look at its file (red team F3).
//
// Nothing here runs git (the guard runs no program on what a server
// wrote), and no file is read through a symbolic link that leads out of
// the repository's .git directory.

// GitHead is where a repository's HEAD points.
type GitHead struct {
	Ref    string // the branch HEAD names ("refs/heads/main"); "" when detached
	Commit string // the commit it resolves to; "" when the branch is unborn or unreadable
}

// GitState is what a snapshot records of one git repository: a
// directory holding a .git directory.
type GitState struct {
	WorkTree string // the directory holding .git
	Rel      string // WorkTree relative to its write root, slash separated ("." for the root)
	HashSize int    // 20 (SHA-1) or 32 (SHA-256), by the repository's extensions.objectformat
	Head     GitHead
	// Refs are loose and packed refs by full name (refs/heads/main,
	// refs/tags/v1, refs/stash) and the pseudo-refs commands act on
	// (ORIG_HEAD, MERGE_HEAD, CHERRY_PICK_HEAD, REVERT_HEAD): a commit id,
	// "ref: NAME" for a symbolic ref, or what the file holds otherwise.
	Refs map[string]string
	// RefTable is a digest of reftable/tables.list when the refs are in
	// a reftable (extensions.refstorage): not parsed, but any ref update
	// rewrites the list.
	RefTable string
	// StashLog is a digest of logs/refs/stash: the stash list beyond
	// refs/stash itself (stash@{1} and on).
	StashLog string
	// Index holds the index's entries by path (a conflicted path's stage
	// 0 entry or its first stage).
	Index        map[string]IndexEntry
	IndexVersion int
	SharedIndex  string // set for a split index: see Index.SharedIndex
	Replaced     string // digest of a split index's entries that replace the shared index's (unnamed)
	IndexErr     string // why the index could not be read ("" when read, or absent)
	// Notes are what else could not be read or looks hostile, said in
	// the report when new at the end of the session.
	Notes []string
	gone  bool // no .git directory
	// The object store's files, by identity only (nothing is read or
	// decompressed when the snapshot is taken): the loose objects by id,
	// and the packs, their indexes and the multi-pack index by name.
	loose       map[objKey]fileID
	packs       map[string]packFile
	looseCapped bool  // more than maxLoose loose objects, or objects/ flooded: not all recorded
	taken       int64 // when the objects were listed, in the clock of fileID.ctime
}

// GitSnapshot is the git repositories of the write roots at one moment.
type GitSnapshot struct {
	Repos    map[string]*GitState // by work tree
	Complete bool                 // false when the search stopped at MaxGitWalk
	roots    []string
}

// MaxGitWalk bounds the entries looked at, in all write roots together,
// in the search for repositories.
const MaxGitWalk = MaxWalk

// Bounds on what one repository's files may make the guard read.
const (
	maxGitSmall   = 4 << 10  // HEAD, a loose ref
	maxGitConfig  = 1 << 20  // .git/config
	maxPackedRefs = 64 << 20 // packed-refs
	maxStashLog   = 16 << 20 // logs/refs/stash
	maxRefs       = 100000   // loose and packed refs, and entries of refs/
	maxRefDepth   = 16       // directories below refs/
	maxSymref     = 5        // symbolic refs followed from HEAD
	maxWorkFile   = 16 << 20 // a work tree file hashed to compare with an index entry
)

// pseudoRefs are the files beside HEAD that commands act on: the user's
// `git reset --hard ORIG_HEAD`, or a commit that concludes a merge or a
// cherry-pick.
var pseudoRefs = []string{"ORIG_HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD"}

// TakeGit records the git repositories under roots: every directory
// holding a .git directory, at any depth the search reaches within
// MaxGitWalk entries, breadth first (a root's own repository, and the
// projects directly below it, first). Depth is not limited because a
// server cannot make a repository (.git is a protected name): the ones
// that matter are those there when the session starts, wherever the user
// keeps them. node_modules is not searched (a dependency's checkout is
// not where the user restores files), nor is anything below a .git (a
// submodule's and a worktree's data is under .git/modules and
// .git/worktrees, which the server cannot write), and symbolic links are
// not followed. A .git file (a linked worktree or a submodule's checkout)
// is not read: the repository it names is protected from the server,
// except its refs, which are read where its .git directory is.
func TakeGit(roots []string) *GitSnapshot { return takeGit(roots, MaxGitWalk) }

func takeGit(roots []string, limit int) *GitSnapshot {
	s := &GitSnapshot{Repos: map[string]*GitState{}, Complete: true, roots: roots}
	seen := 0
	for _, root := range roots {
		queue := []string{root}
		for len(queue) > 0 && s.Complete {
			dir := queue[0]
			queue = queue[1:]
			f, err := os.Open(dir)
			if err != nil {
				continue
			}
			for s.Complete {
				ents, err := f.ReadDir(1024)
				for _, d := range ents {
					if seen++; seen > limit {
						s.Complete = false
						break
					}
					switch {
					case !d.IsDir() || d.Name() == "node_modules":
					case d.Name() == ".git":
						if _, ok := s.Repos[dir]; !ok {
							s.Repos[dir] = ReadGit(dir, relTo(root, dir))
						}
					default:
						queue = append(queue, filepath.Join(dir, d.Name()))
					}
				}
				if err != nil {
					break
				}
			}
			f.Close()
		}
	}
	return s
}

func relTo(root, p string) string {
	rel, err := filepath.Rel(root, p)
	if err != nil {
		return "."
	}
	return filepath.ToSlash(rel)
}

// ReadGit reads the repository whose .git directory is in workTree; rel
// is workTree relative to its write root, for the names the report
// checks. What cannot be read is in the state's notes.
func ReadGit(workTree, rel string) *GitState {
	g := &GitState{WorkTree: workTree, Rel: rel, HashSize: 20, Refs: map[string]string{}, Index: map[string]IndexEntry{}}
	gitDir := filepath.Join(workTree, ".git")
	if fi, err := os.Lstat(gitDir); err != nil || !fi.IsDir() {
		g.note("no .git directory")
		g.gone = true
		return g
	}
	// An os.Root follows no symbolic link out of .git.
	root, err := os.OpenRoot(gitDir)
	if err != nil {
		g.note("the .git directory could not be opened: " + err.Error())
		return g
	}
	defer root.Close()
	// By the configuration only, as git decides: the server can make a
	// reftable directory, not change the configuration.
	if g.readConfig(root) {
		g.readRefTable(root)
	} else {
		g.readRefs(root)
	}
	g.readIndex(root)
	g.readObjects(root)
	return g
}

func (g *GitState) note(s string) {
	if !slices.Contains(g.Notes, s) {
		g.Notes = append(g.Notes, s)
	}
}

// readFile reads name below root if it is a regular file (not a link, a
// FIFO or a device) of at most max bytes. ok is false, with no error,
// when it does not exist.
func readFile(root *os.Root, name string, limit int64) (data []byte, ok bool, err error) {
	f, fi, err := openRegular(root, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	if fi.Size() > limit {
		return nil, false, fmt.Errorf("%s: %d bytes, more than %d", name, fi.Size(), limit)
	}
	data, err = io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(data)) > limit {
		return nil, false, fmt.Errorf("%s: more than %d bytes", name, limit)
	}
	return data, true, nil
}

var errNotRegular = errors.New("not a regular file")

// openRegular opens name below root if it is a regular file: fi is what
// Lstat said of it (set with an error wrapping errNotRegular too).
func openRegular(root *os.Root, name string) (f *os.File, fi fs.FileInfo, err error) {
	fi, err = root.Lstat(name)
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fi, fmt.Errorf("%s: %w (%s)", name, errNotRegular, fi.Mode().Type())
	}
	// O_NONBLOCK: a FIFO put there since the Lstat does not hang the
	// guard; os.Root keeps the open within the root.
	f, err = root.OpenFile(name, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, fi, err
	}
	if fi2, err := f.Stat(); err != nil || !os.SameFile(fi, fi2) {
		f.Close()
		return nil, fi, fmt.Errorf("%s: replaced while read", name)
	}
	return f, fi, nil
}

// readConfig takes the object format from .git/config (which the server
// cannot write) and says whether the refs are in a reftable.
func (g *GitState) readConfig(root *os.Root) (reftable bool) {
	data, _, err := readFile(root, "config", maxGitConfig)
	if err != nil {
		g.note("config: " + err.Error())
	}
	section := ""
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			end := strings.IndexByte(line, ']')
			if end < 0 {
				continue
			}
			section = strings.ToLower(strings.TrimSpace(line[1:end]))
			line = strings.TrimSpace(line[end+1:])
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || section != "extensions" {
			continue
		}
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.ToLower(strings.Trim(strings.TrimSpace(v), `"`))
		switch {
		case k == "objectformat" && v == "sha256":
			g.HashSize = 32
		case k == "refstorage" && v == "reftable":
			reftable = true
		}
	}
	return reftable
}

// readRefTable records the digest of the reftable's table list: the
// tables themselves are not parsed.
func (g *GitState) readRefTable(root *os.Root) {
	data, ok, err := readFile(root, "reftable/tables.list", maxGitConfig)
	switch {
	case err != nil:
		g.note("reftable: " + err.Error())
	case ok:
		g.RefTable = digest(data)
	}
	g.Head.Ref = "(reftable)"
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// readRefs reads packed-refs, then the loose refs below refs/ (which win),
// the pseudo-refs, HEAD, and the stash's log.
func (g *GitState) readRefs(root *os.Root) {
	g.readPacked(root)
	g.walkRefs(root, "refs", 0)
	for _, name := range pseudoRefs {
		data, ok, err := readFile(root, name, maxGitSmall)
		switch {
		case err != nil:
			g.note(err.Error())
		case ok:
			// MERGE_HEAD holds a line per merged commit.
			g.Refs[name] = strings.Join(strings.Fields(string(data)), ",")
		}
	}
	data, ok, err := readFile(root, "HEAD", maxGitSmall)
	switch {
	case err != nil:
		g.note("HEAD: " + err.Error())
	case !ok:
		g.note("HEAD: missing")
	default:
		g.Head = g.resolve(strings.TrimSpace(string(data)))
	}
	if data, ok, err := readFile(root, "logs/refs/stash", maxStashLog); err != nil {
		g.note(err.Error())
	} else if ok {
		g.StashLog = digest(data)
	}
}

// resolve follows HEAD's value through symbolic refs to a commit.
func (g *GitState) resolve(v string) GitHead {
	v = firstN(v, 200)
	if !strings.HasPrefix(v, "ref:") {
		return GitHead{Commit: v}
	}
	h := GitHead{Ref: strings.TrimSpace(strings.TrimPrefix(v, "ref:"))}
	name := h.Ref
	for range maxSymref {
		v, ok := g.Refs[name]
		if !ok {
			return h // unborn
		}
		if !strings.HasPrefix(v, "ref:") {
			h.Commit = v
			return h
		}
		name = strings.TrimSpace(strings.TrimPrefix(v, "ref:"))
	}
	g.note("HEAD: symbolic refs nested more than " + strconv.Itoa(maxSymref) + " deep")
	return h
}

// readPacked reads packed-refs: "<id> <name>" lines, with "#" headers and
// "^<id>" lines (the commit an annotated tag peels to) between them.
func (g *GitState) readPacked(root *os.Root) {
	data, ok, err := readFile(root, "packed-refs", maxPackedRefs)
	if err != nil {
		g.note(err.Error())
	}
	if !ok {
		return
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxGitSmall)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || line[0] == '^' {
			continue
		}
		id, name, ok := strings.Cut(line, " ")
		if !ok || !isHexID(id, g.HashSize) {
			g.note("packed-refs: a line git does not read: " + show(firstN(line, 80)))
			continue
		}
		if len(g.Refs) >= maxRefs {
			g.note(fmt.Sprintf("refs: more than %d, the rest not read", maxRefs))
			return
		}
		g.Refs[name] = id
	}
	if sc.Err() != nil {
		g.note("packed-refs: " + sc.Err().Error())
	}
}

func isHexID(s string, size int) bool {
	if len(s) != 2*size {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// walkRefs reads the loose refs below dir, in batches so that a flooded
// refs/ costs at most maxRefs entries.
func (g *GitState) walkRefs(root *os.Root, dir string, depth int) {
	if depth > maxRefDepth {
		g.note(show(dir) + ": deeper than " + strconv.Itoa(maxRefDepth) + " levels, not read")
		return
	}
	f, err := root.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		g.note(err.Error())
		return
	}
	defer f.Close()
	for {
		ents, err := f.ReadDir(256)
		for _, d := range ents {
			if len(g.Refs) >= maxRefs {
				g.note(fmt.Sprintf("refs: more than %d, the rest not read", maxRefs))
				return
			}
			name := dir + "/" + d.Name()
			switch {
			case d.IsDir():
				g.walkRefs(root, name, depth+1)
			case strings.HasSuffix(name, ".lock"):
			default:
				data, ok, err := readFile(root, name, maxGitSmall)
				if err != nil {
					g.note(err.Error())
					continue
				}
				if ok {
					g.Refs[name] = firstN(strings.TrimSpace(string(data)), 200)
				}
			}
		}
		if err != nil {
			if err != io.EOF {
				g.note(show(dir) + ": " + err.Error())
			}
			return
		}
	}
}

// readIndex reads the index into g.Index.
func (g *GitState) readIndex(root *os.Root) {
	data, ok, err := readFile(root, "index", MaxIndexSize)
	if err == nil && ok {
		var ix *Index
		if ix, err = ReadIndex(data, g.HashSize); err == nil {
			g.setIndex(ix)
		}
	}
	if err != nil {
		g.IndexErr = err.Error()
	}
}

func (g *GitState) setIndex(ix *Index) {
	g.IndexVersion, g.SharedIndex = ix.Version, ix.SharedIndex
	rep := sha256.New()
	for _, e := range ix.Entries {
		if e.Path == "" {
			fmt.Fprintf(rep, "%o %s\n", e.Mode, e.ID)
			continue
		}
		if old, ok := g.Index[e.Path]; !ok || (e.Stage == 0 && old.Stage != 0) {
			g.Index[e.Path] = e
		}
	}
	if ix.SharedIndex != "" {
		g.Replaced = hex.EncodeToString(rep.Sum(nil))
	}
	if len(ix.Threaded) == 0 {
		return
	}
	var names []string
	for _, e := range ix.Threaded {
		if _, ok := g.Index[e.Path]; !ok && e.Path != "" {
			g.Index[e.Path] = e
		}
		if len(names) < 10 {
			names = append(names, show(firstN(e.CheckoutPath(), 100)))
		}
	}
	g.note(fmt.Sprintf("the index reads differently when git loads it on several threads (index.threads): %d entries, as %s (a hostile index: git never writes one)",
		len(ix.Threaded), strings.Join(names, ", ")))
}

// CompareGit lists what moved in the repositories from before to after,
// as changes of Kind "git": refs and HEAD moved, created or deleted (with
// the commands that show what the new commits hold), and each index entry
// new or changed at a path that protected (launch.IsProtected: this
// package cannot import launch, which imports it) or Watched says git
// must not write for the user unseen, at a path git would not write from
// an index of its own, or that is a symbolic link or a submodule; each
// index entry marked assume-unchanged or skip-worktree during the session;
// each loose object whose content does not match its name, and packs
// rewritten. A repository the end's search did not reach is read again.
// protected may be nil.
func CompareGit(before, after *GitSnapshot, protected func(rel string) bool) []Change {
	if before == nil || after == nil {
		return nil
	}
	var out []Change
	for _, wt := range slices.Sorted(maps.Keys(before.Repos)) {
		b := before.Repos[wt]
		a := after.Repos[wt]
		if a == nil {
			a = ReadGit(wt, b.Rel)
		}
		out = append(out, compareRepo(b, a, protected)...)
	}
	for _, wt := range slices.Sorted(maps.Keys(after.Repos)) {
		if _, ok := before.Repos[wt]; !ok {
			out = append(out, Change{Path: filepath.Join(wt, ".git"), Kind: "git",
				Diff: "a git repository not seen when the session started (made by you, or beyond where the search stopped): its refs and index are not compared\n"})
		}
	}
	if !before.Complete || !after.Complete {
		where := strings.Join(after.roots, ", ")
		if where == "" {
			where = "git"
		}
		out = append(out, Change{Path: where, Kind: "incomplete",
			Diff: fmt.Sprintf("the search for git repositories stopped after %d entries: repositories beyond them are not in this report\n", MaxGitWalk)})
	}
	slices.SortStableFunc(out, func(x, y Change) int { return strings.Compare(x.Path, y.Path) })
	return out
}

func compareRepo(b, a *GitState, protected func(string) bool) []Change {
	var out []Change
	gitDir := filepath.Join(a.WorkTree, ".git")
	wt := shq(a.WorkTree)
	add := func(p, diff string) { out = append(out, Change{Path: p, Kind: "git", Diff: diff}) }
	if a.gone && !b.gone {
		add(gitDir, "the repository's .git directory is gone\n")
		return out
	}
	for _, n := range a.Notes {
		if !slices.Contains(b.Notes, n) {
			add(gitDir, show(n)+"\n")
		}
	}
	if a.RefTable != b.RefTable {
		add(filepath.Join(gitDir, "reftable"), fmt.Sprintf("refs changed during the session (a reftable, which this report does not read): see where they point with git -C %s for-each-ref, before restoring or resetting anything\n", wt))
	}

	// HEAD: a branch moved is said once, at the branch.
	switch {
	case a.Head.Ref != b.Head.Ref:
		add(filepath.Join(gitDir, "HEAD"), fmt.Sprintf("HEAD now names %s at %s (it named %s at %s)\n%s",
			refShow(a.Head.Ref), idShow(a.Head.Commit), refShow(b.Head.Ref), idShow(b.Head.Commit),
			moveHint(wt, b.Head.Commit, a.Head.Commit, true)))
	case a.Head.Ref == "" && a.Head.Commit != b.Head.Commit:
		add(filepath.Join(gitDir, "HEAD"), fmt.Sprintf("HEAD (detached) moved from %s to %s\n%s",
			idShow(b.Head.Commit), idShow(a.Head.Commit), moveHint(wt, b.Head.Commit, a.Head.Commit, true)))
	}
	for _, ref := range union(b.Refs, a.Refs) {
		was, wok := b.Refs[ref]
		now, nok := a.Refs[ref]
		if wok && nok && was == now {
			continue
		}
		p := gitDir
		if printable(ref) && cleanRel(ref) {
			p = filepath.Join(gitDir, filepath.FromSlash(ref))
		}
		head := ref == a.Head.Ref
		what := show(ref)
		if head {
			what += " (HEAD's branch, checked out)"
		}
		switch {
		case !wok:
			add(p, fmt.Sprintf("%s created during the session at %s\n%s", what, idShow(now), moveHint(wt, "", now, head)))
		case !nok:
			add(p, fmt.Sprintf("%s deleted during the session (it was at %s)\n", what, idShow(was)))
		default:
			add(p, fmt.Sprintf("%s moved during the session from %s to %s\n%s", what, idShow(was), idShow(now), moveHint(wt, was, now, head)))
		}
		if ref == "refs/stash" && nok {
			out[len(out)-1].Diff += "git stash pop and git stash apply would write what this stash holds\n"
		}
	}
	if a.StashLog != b.StashLog && a.Refs["refs/stash"] == b.Refs["refs/stash"] {
		add(filepath.Join(gitDir, "logs", "refs", "stash"), fmt.Sprintf("the stash list changed during the session below its top entry: see it with git -C %s stash list --stat before popping or applying an entry\n", wt))
	}

	out = append(out, compareIndex(b, a, protected)...)
	return append(out, compareObjects(b, a)...)
}

// compareIndex names what git's index gained at paths the user's restore,
// checkout or reset would write, and the entries it now hides from git
// status and git diff.
func compareIndex(b, a *GitState, protected func(string) bool) []Change {
	var out []Change
	gitDir := filepath.Join(a.WorkTree, ".git")
	wt := shq(a.WorkTree)
	add := func(p, diff string) { out = append(out, Change{Path: p, Kind: "git", Diff: diff}) }
	switch {
	case a.IndexErr != "":
		add(filepath.Join(gitDir, "index"), fmt.Sprintf("the index could not be read (%s): this report cannot say what git restore, git checkout -- . or git reset --hard would write; look with git -C %s status and git -C %s diff --cached --stat first\n",
			show(a.IndexErr), wt, wt))
		return out
	case b.IndexErr != "":
		add(filepath.Join(gitDir, "index"), fmt.Sprintf("the index could not be read when the session started (%s): the entries below are what it holds, not only what changed\n", show(b.IndexErr)))
	}
	if a.SharedIndex != "" && (a.SharedIndex != b.SharedIndex || a.Replaced != b.Replaced) {
		add(filepath.Join(gitDir, "index"), fmt.Sprintf("the index is split (core.splitIndex) and changed: entries that replace those of .git/sharedindex.%s are not named in this report; look with git -C %s diff --cached --stat before restoring\n",
			show(a.SharedIndex), wt))
	}
	work, err := os.OpenRoot(a.WorkTree)
	if err == nil {
		defer work.Close()
	}
	hidden := 0
	for _, k := range slices.Sorted(maps.Keys(a.Index)) {
		e := a.Index[k]
		old, had := b.Index[k]
		diff := ""
		if !had || old.ID != e.ID || old.Mode != e.Mode {
			diff = stagedNote(a, e, old, had, work, protected)
		}
		if hiddenBits(e, old, had) != "" {
			if hidden++; hidden <= maxHiddenNamed {
				diff += hiddenNote(a, e, old, had, work)
			}
		}
		if diff == "" {
			continue
		}
		p := filepath.Join(gitDir, "index")
		if cp := e.CheckoutPath(); printable(e.Path) && cleanRel(cp) {
			p = filepath.Join(a.WorkTree, filepath.FromSlash(cp))
		}
		add(p, diff)
	}
	if hidden > maxHiddenNamed {
		add(filepath.Join(gitDir, "index"), fmt.Sprintf("%d more index entries were marked assume-unchanged or skip-worktree during the session: git status and git diff will not show changes to their files; list them with git -C %s ls-files -v | grep '^[a-zS]'\n",
			hidden-maxHiddenNamed, wt))
	}
	return out
}

// maxHiddenNamed is how many entries newly hidden from git status one
// repository's report names (git sparse-checkout set hides thousands).
const maxHiddenNamed = 50

// stagedNote says why an index entry new or changed in the session is
// reported, or "" when it is not.
func stagedNote(a *GitState, e, old IndexEntry, had bool, work *os.Root, protected func(string) bool) string {
	why := indexWhy(a.Rel, e, protected)
	if why == "" || inWorkTree(work, e, a.HashSize) {
		return ""
	}
	change := "a new entry"
	if had {
		change = fmt.Sprintf("changed from %s %s", modeShow(old.Mode), idShow(old.ID))
	}
	return fmt.Sprintf("the index now holds %s (%s; %s %s, %s): git restore ., git checkout -- . and git reset --hard would write it into the work tree, outside any sandbox\n"+
		"see what it holds with git -C %s cat-file -p %s; git status shows it as deleted or modified, which a restore \"fixes\"\n",
		show(e.Path), why, modeShow(e.Mode), idShow(e.ID), change, shq(a.WorkTree), e.ID)
}

// hiddenBits names the bits that make git status and git diff skip the
// entry's file (assume-unchanged, skip-worktree) set during the session:
// not set at its start, or on an entry new since (red team F3: a server
// edits scripts/build.js and marks it assume-unchanged, and the user's
// git status shows nothing).
func hiddenBits(e, old IndexEntry, had bool) string {
	var set []string
	if e.AssumeValid && (!had || !old.AssumeValid) {
		set = append(set, "assume-unchanged")
	}
	if e.SkipWorktree && (!had || !old.SkipWorktree) {
		set = append(set, "skip-worktree")
	}
	return strings.Join(set, " and ")
}

// hiddenNote says what an entry hidden during the session hides, and how
// to clear its bits.
func hiddenNote(a *GitState, e, old IndexEntry, had bool, work *os.Root) string {
	wt := shq(a.WorkTree)
	bits := hiddenBits(e, old, had)
	var flags []string
	if strings.Contains(bits, "assume-unchanged") {
		flags = append(flags, "--no-assume-unchanged")
	}
	if strings.Contains(bits, "skip-worktree") {
		flags = append(flags, "--no-skip-worktree")
	}
	state := "the file in the work tree is not what the index holds (changed, missing, or not a file this report reads): git hides that difference"
	if inWorkTree(work, e, a.HashSize) {
		state = "the file in the work tree is what the index holds for now"
	}
	var clear string
	if cp := e.CheckoutPath(); cp == e.Path && printable(cp) && cleanRel(cp) {
		clear = fmt.Sprintf("clear it with git -C %s update-index %s -- %s, then see the file's changes with git -C %s diff -- %s\n",
			wt, strings.Join(flags, " "), shq(cp), wt, shq(cp))
	} else {
		clear = fmt.Sprintf("find it with git -C %s ls-files -v | grep '^[a-zS]' and clear it with git update-index %s\n", wt, strings.Join(flags, " "))
	}
	return fmt.Sprintf("the index entry of %s was marked %s during the session: git status and git diff will not show changes to it, and git add -u, git commit -a and git stash will not take them; %s\n%s",
		show(e.Path), bits, state, clear)
}

// indexWhy says why an index entry new or changed in the session is
// reported, or "" when it is not.
func indexWhy(repoRel string, e IndexEntry, protected func(string) bool) string {
	cp := e.CheckoutPath()
	rel := path.Join(repoRel, cp)
	var why []string
	if cp != e.Path || !cleanRel(cp) {
		why = append(why, "a path git would not write from an index of its own")
	}
	if protected != nil && (protected(rel) || protected(cp)) {
		why = append(why, "a name protected from the server's writes")
	}
	if Watched(rel) {
		why = append(why, "a file the user's tools run or read as configuration")
	}
	switch e.Mode & 0170000 {
	case 0120000:
		why = append(why, "a symbolic link: what later reads or writes through it reaches its target")
	case 0160000:
		why = append(why, "a submodule's commit: git submodule update would check it out")
	}
	return strings.Join(why, "; ")
}

// inWorkTree says whether the work tree already holds what the entry
// does (a file of its blob and executable bit, or a link to its target):
// git's restore would write nothing new, and the file report has said
// what changed in the work tree (a server's ordinary commit of a file it
// edited).
func inWorkTree(work *os.Root, e IndexEntry, hashSize int) bool {
	cp := e.CheckoutPath()
	if work == nil || cp != e.Path || !cleanRel(cp) || strings.HasSuffix(cp, "/") {
		return false
	}
	var content []byte
	switch e.Mode & 0170000 {
	case 0100000:
		fi, err := work.Lstat(cp)
		if err != nil || !fi.Mode().IsRegular() || (fi.Mode().Perm()&0o100 != 0) != (e.Mode&0o100 != 0) {
			return false
		}
		data, ok, err := readFile(work, cp, maxWorkFile)
		if err != nil || !ok {
			return false
		}
		content = data
	case 0120000:
		fi, err := work.Lstat(cp)
		if err != nil || fi.Mode().Type() != fs.ModeSymlink {
			return false
		}
		t, err := work.Readlink(cp)
		if err != nil {
			return false
		}
		content = []byte(t)
	default:
		return false
	}
	return blobID(content, hashSize) == e.ID
}

// blobID is git's id of a blob of content.
func blobID(content []byte, hashSize int) string {
	h := sha1.New()
	if hashSize == 32 {
		h = sha256.New()
	}
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

// cleanRel says whether p is a path git writes from an index it made
// itself (verify_path): relative, no empty, "." or ".." component, no .git
// in any case (git's check on case-insensitive file systems), no
// trailing slash but a sparse directory's.
func cleanRel(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") {
		return false
	}
	for _, c := range strings.Split(strings.TrimSuffix(p, "/"), "/") {
		if c == "" || c == "." || c == ".." || strings.EqualFold(strings.TrimRight(c, ". "), ".git") {
			return false
		}
	}
	return true
}

// moveHint is what tells the user how to see what a ref's move brought.
func moveHint(wt, from, to string, head bool) string {
	var b strings.Builder
	switch {
	case !isCommitID(to):
	case !isCommitID(from):
		fmt.Fprintf(&b, "see what it holds: git -C %s show --stat %s\n", wt, to)
	default:
		fmt.Fprintf(&b, "see what the new commits hold: git -C %s diff --stat %s %s and git -C %s log --stat %s..%s\n", wt, from, to, wt, from, to)
	}
	if head && isCommitID(to) {
		b.WriteString("this is what HEAD names: git status shows the difference to it as your own changes, and git reset --hard would write its files into the work tree")
		if isCommitID(from) {
			fmt.Fprintf(&b, "; to undo the move without touching the work tree: git -C %s reset --mixed %s", wt, from)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// isCommitID says whether s is an object id, which a command line may
// hold as it is.
func isCommitID(s string) bool { return isHexID(s, 20) || isHexID(s, 32) }

func union(x, y map[string]string) []string {
	keys := slices.Sorted(maps.Keys(x))
	for k := range y {
		if _, ok := x[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

func refShow(r string) string {
	if r == "" {
		return "no branch (detached)"
	}
	return show(r)
}

func idShow(id string) string {
	if id == "" {
		return "no commit"
	}
	return show(id)
}

func modeShow(m uint32) string {
	switch m & 0170000 {
	case 0120000:
		return "link"
	case 0160000:
		return "submodule"
	case 0040000:
		return "directory"
	}
	return "blob " + strconv.FormatUint(uint64(m), 8)
}

func firstN(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// printable says whether s can be shown as it is: valid UTF-8 without
// control or format characters (a name from the server must not drive the
// user's terminal or reorder the text around it).
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// show is s as it may be printed: quoted, with escapes, unless printable.
func show(s string) string {
	if printable(s) {
		return s
	}
	return strconv.QuoteToASCII(s)
}

// shq quotes a path for a command line the user may paste.
func shq(s string) string {
	if !printable(s) {
		return show(s)
	}
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r < utf8.RuneSelf && (r == '/' || r == '.' || r == '_' || r == '-' || r == '+' || r == ',' || r == ':' || r == '@' || r == '%' || r == '=' ||
			'0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Bounds on the object store's check (red team F6).
const (
	maxObjectsScan  = 2 * 200_000 // entries of objects/ and its fan-out directories looked at
	maxPackScan     = 10_000      // entries of objects/pack looked at
	maxIndexHash    = 256 << 20   // pack indexes hashed when a snapshot is taken
	maxObjectVerify = 64 << 20    // an object's content, inflated, that is hashed
	maxVerifyBytes  = 1 << 30     // all that one repository's comparison inflates and hashes
	maxBadNamed     = 20          // objects that do not match their names named one by one
)

// Variables for the tests.
var (
	// maxLoose is how many loose objects a snapshot records per
	// repository.
	maxLoose = 200_000
	// racyWindow: a file changed this close after the snapshot may keep
	// the change time recorded (a file system that keeps seconds), so an
	// object whose change time is this close to the snapshot is hashed
	// whatever its identity.
	racyWindow = 2 * time.Second
)

// objKey is an object id, zero padded to SHA-256's size.
type objKey [32]byte

// fileID is what tells a file was rewritten without reading it: the
// change time is the kernel's, which no unprivileged process sets back.
type fileID struct{ ino, size, ctime int64 }

func fileIDOf(fi fs.FileInfo) fileID {
	ino, ctime := inoCtime(fi)
	return fileID{ino: ino, size: fi.Size(), ctime: ctime}
}

// packFile is a file of objects/pack: a pack, a pack index or the
// multi-pack index.
type packFile struct {
	id  fileID
	sum string // an index's digest ("" for a pack, or an index past maxIndexHash)
}

// readObjects lists the loose objects (objects/xx/yyyy..., names of
// lowercase hex only: those git looks up) and the packs, by identity,
// and hashes the pack indexes, which are small.
func (g *GitState) readObjects(root *os.Root) {
	g.taken = time.Now().UnixNano()
	g.loose, g.packs = map[objKey]fileID{}, map[string]packFile{}
	scan := maxObjectsScan
	var fanout []string
	complete := g.eachEntry(root, "objects", &scan, func(d fs.DirEntry) {
		if d.IsDir() && isLowerHex(d.Name(), 2) {
			fanout = append(fanout, d.Name())
		}
	})
	for _, dir := range fanout {
		complete = complete && g.eachEntry(root, "objects/"+dir, &scan, func(d fs.DirEntry) {
			key, ok := objectKey(dir+d.Name(), g.HashSize)
			if !ok {
				return
			}
			if len(g.loose) >= maxLoose {
				g.looseCapped = true
				return
			}
			if fi, err := d.Info(); err == nil {
				g.loose[key] = fileIDOf(fi)
			}
		})
	}
	g.looseCapped = g.looseCapped || !complete
	scan = maxPackScan
	budget := int64(maxIndexHash)
	if !g.eachEntry(root, "objects/pack", &scan, func(d fs.DirEntry) {
		n := d.Name()
		pack := strings.HasPrefix(n, "pack-") && strings.HasSuffix(n, ".pack")
		if !pack && n != "multi-pack-index" && !(strings.HasPrefix(n, "pack-") && strings.HasSuffix(n, ".idx")) {
			return
		}
		fi, err := d.Info()
		if err != nil {
			return
		}
		pf := packFile{id: fileIDOf(fi)}
		if !pack {
			pf.sum = digestFile(root, "objects/pack/"+n, &budget)
		}
		g.packs[n] = pf
	}) {
		g.note(fmt.Sprintf("objects/pack: more than %d entries, the rest not looked at", maxPackScan))
	}
}

// eachEntry calls fn on the entries of dir, in batches, while *budget
// lasts (each entry costs one); false when the budget ran out first.
// A directory that does not exist has no entries.
func (g *GitState) eachEntry(root *os.Root, dir string, budget *int, fn func(fs.DirEntry)) bool {
	f, err := root.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil {
		g.note(err.Error())
		return true
	}
	defer f.Close()
	for {
		ents, err := f.ReadDir(256)
		for _, d := range ents {
			if *budget--; *budget < 0 {
				return false
			}
			fn(d)
		}
		if err != nil {
			if err != io.EOF {
				g.note(show(dir) + ": " + err.Error())
			}
			return true
		}
	}
}

func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// objectKey is the id a loose object's directory and file name spell.
func objectKey(name string, hashSize int) (k objKey, ok bool) {
	if !isLowerHex(name, 2*hashSize) {
		return k, false
	}
	hex.Decode(k[:], []byte(name))
	return k, true
}

func (k objKey) hex(hashSize int) string { return hex.EncodeToString(k[:hashSize]) }

func objectPath(id string) string { return "objects/" + id[:2] + "/" + id[2:] }

func newHash(hashSize int) hash.Hash {
	if hashSize == 32 {
		return sha256.New()
	}
	return sha1.New()
}

// hashFile hashes the regular file name below root with h, all but its
// last keep bytes, which it returns; ok is false when it is not a regular
// file, is larger than *budget (which it draws on), or cannot be read.
func hashFile(root *os.Root, name string, h hash.Hash, keep int, budget *int64) (tail []byte, ok bool) {
	f, fi, err := openRegular(root, name)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	if fi.Size() < int64(keep) || fi.Size() > *budget {
		return nil, false
	}
	*budget -= fi.Size()
	tail = make([]byte, keep)
	if _, err := io.CopyN(h, f, fi.Size()-int64(keep)); err != nil {
		return nil, false
	}
	if _, err := io.ReadFull(f, tail); err != nil {
		return nil, false
	}
	return tail, true
}

// digestFile is the digest of a file hashFile reads, "" when not read.
func digestFile(root *os.Root, name string, budget *int64) string {
	h := sha256.New()
	if _, ok := hashFile(root, name, h, 0, budget); !ok {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

// objCheck is one repository's comparison of its object store.
type objCheck struct {
	root   *os.Root
	hs     int
	budget int64 // bytes still to inflate and hash
	bad    []badObject
	// unverified counts the objects changed (there at the session's
	// start: [true]) or new ([false]) that were not hashed: too large, or
	// past the budget.
	unverified map[bool]int
	packs      []string // pack files said to have changed
	badPacks   []string // packs whose content does not match their checksum
}

type badObject struct {
	id, why string
	atStart bool
}

// compareObjects checks the object store (red team F6): each loose object
// there at the session's start whose file changed since (git touches an
// object it would have written again, which changes its change time: so
// the content is hashed, and only a mismatch said), and each loose object
// new since (git writes none that does not match its name; a server that
// removed a pack could put a rewritten copy of one of its objects there),
// within maxVerifyBytes; and the packs there at the start.
func compareObjects(b, a *GitState) []Change {
	if b.loose == nil || a.gone {
		return nil
	}
	root, err := os.OpenRoot(filepath.Join(a.WorkTree, ".git"))
	if err != nil {
		return nil // said in the notes
	}
	defer root.Close()
	v := &objCheck{root: root, hs: a.HashSize, budget: maxVerifyBytes, unverified: map[bool]int{}}
	var changed []objKey
	for k, was := range b.loose {
		now, ok := a.loose[k]
		if !ok { // gone (gc packed it), or not listed at the end
			fi, err := root.Lstat(objectPath(k.hex(v.hs)))
			if err != nil {
				continue
			}
			now = fileIDOf(fi)
		}
		if now != was || was.ctime >= b.taken-int64(racyWindow) {
			changed = append(changed, k)
		}
	}
	slices.SortFunc(changed, func(x, y objKey) int { return bytes.Compare(x[:], y[:]) })
	for _, k := range changed {
		v.verify(k.hex(v.hs), true)
	}
	v.comparePacks(b, a)
	var added []objKey
	for k := range a.loose {
		if _, ok := b.loose[k]; !ok {
			added = append(added, k)
		}
	}
	slices.SortFunc(added, func(x, y objKey) int { return bytes.Compare(x[:], y[:]) })
	for _, k := range added {
		v.verify(k.hex(v.hs), false)
	}
	return v.report(b, a)
}

// verify hashes the loose object id and records what does not match.
func (v *objCheck) verify(id string, atStart bool) {
	why, done := verifyLoose(v.root, objectPath(id), id, v.hs, &v.budget)
	switch {
	case !done:
		v.unverified[atStart]++
	case why != "":
		v.bad = append(v.bad, badObject{id: id, why: why, atStart: atStart})
	}
}

// verifyLoose reads the loose object at name as git does and says why
// its content does not match id ("" when it does, or it is gone); done is
// false when it was not hashed (too large, past the budget, or unreadable
// here). What is not a regular file is not opened.
func verifyLoose(root *os.Root, name, id string, hashSize int, budget *int64) (why string, done bool) {
	f, fi, err := openRegular(root, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", true
	case errors.Is(err, errNotRegular):
		return fmt.Sprintf("it is not a file but a %s, which git would read through", typeName(fi.Mode())), true
	case err != nil:
		return "", false
	}
	defer f.Close()
	if fi.Size() > maxObjectVerify+maxObjectVerify/16 {
		return "", false // zlib grows what it cannot compress by far less
	}
	got, why, done := objectID(io.LimitReader(f, fi.Size()+1), hashSize, budget)
	switch {
	case !done || why != "":
		return why, done
	case got != id:
		return "it hashes to " + got, true
	}
	return "", true
}

func typeName(m fs.FileMode) string {
	switch m.Type() {
	case fs.ModeSymlink:
		return "symbolic link"
	case fs.ModeNamedPipe:
		return "FIFO"
	case fs.ModeDir:
		return "directory"
	case fs.ModeSocket:
		return "socket"
	}
	return "device"
}

// objectID inflates a loose object as git reads it ("<type> <size>\0"
// and size bytes of content, one zlib stream, nothing after it) and
// returns its id; why says what git would not read (done), and done is
// false when its content is larger than maxObjectVerify or *budget.
func objectID(r io.Reader, hashSize int, budget *int64) (id, why string, done bool) {
	file := bufio.NewReader(r) // an io.ByteReader: zlib reads no further than its stream
	zr, err := zlib.NewReader(file)
	if err != nil {
		return "", "it is not zlib data as git writes (" + err.Error() + ")", true
	}
	data := bufio.NewReaderSize(zr, 64)
	hdr, err := data.ReadSlice(0)
	if err != nil {
		return "", "it has no object header git reads", true
	}
	size, ok := objectHeader(hdr[:len(hdr)-1])
	if !ok {
		return "", "its header " + show(firstN(string(hdr[:len(hdr)-1]), 40)) + " is not one git reads", true
	}
	if size > maxObjectVerify || size > *budget {
		return "", "", false
	}
	*budget -= size
	h := newHash(hashSize)
	h.Write(hdr)
	if _, err := io.CopyN(h, data, size); err != nil {
		return "", "its content is shorter than its header says, or corrupt (" + err.Error() + ")", true
	}
	switch _, err := data.ReadByte(); {
	case err == nil:
		return "", "its content is longer than its header says", true
	case err != io.EOF:
		return "", "it is corrupt (" + err.Error() + ")", true
	}
	if _, err := file.ReadByte(); err != io.EOF {
		return "", "data follows its compressed content", true
	}
	return hex.EncodeToString(h.Sum(nil)), "", true
}

// objectHeader reads "<type> <size>" as git's parse_loose_header does: a
// type git knows, a size in canonical decimal.
func objectHeader(h []byte) (int64, bool) {
	typ, size, ok := bytes.Cut(h, []byte{' '})
	switch string(typ) {
	case "blob", "tree", "commit", "tag":
	default:
		return 0, false
	}
	if !ok || len(size) == 0 || len(size) > 18 || size[0] == '0' && len(size) > 1 {
		return 0, false
	}
	var n int64
	for _, c := range size {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// comparePacks looks at the packs, pack indexes and multi-pack index
// there at the session's start whose files changed. One gone, or new, is
// what gc does. gc also writes a pack again under the same name, and git
// touches a pack when it would have written an object the pack holds:
// a pack is named by the checksum it ends with, so one whose content
// still hashes to its name is what it was; an index whose digest is
// what it was is too. Any other is said.
func (v *objCheck) comparePacks(b, a *GitState) {
	for _, name := range slices.Sorted(maps.Keys(b.packs)) {
		was := b.packs[name]
		now, ok := a.packs[name]
		if !ok || now.id == was.id {
			continue
		}
		if !strings.HasSuffix(name, ".pack") {
			if was.sum == "" || digestFile(v.root, "objects/pack/"+name, &v.budget) != was.sum {
				v.packs = append(v.packs, name)
			}
			continue
		}
		h := newHash(v.hs)
		trailer, ok := hashFile(v.root, "objects/pack/"+name, h, v.hs, &v.budget)
		sum := h.Sum(nil)
		switch {
		case !ok:
			v.packs = append(v.packs, name)
		case !bytes.Equal(sum, trailer):
			v.badPacks = append(v.badPacks, name)
		case name != "pack-"+hex.EncodeToString(sum)+".pack":
			v.packs = append(v.packs, name)
		}
	}
}

// report says what the object store's check found.
func (v *objCheck) report(b, a *GitState) []Change {
	var out []Change
	objects := filepath.Join(a.WorkTree, ".git", "objects")
	wt := shq(a.WorkTree)
	add := func(p, diff string) { out = append(out, Change{Path: p, Kind: "git", Diff: diff}) }
	fsck := fmt.Sprintf("run git -C %s fsck before any reset, checkout or restore", wt)
	for i, o := range v.bad {
		if i == maxBadNamed {
			add(objects, fmt.Sprintf("%d more objects' content does not match their names: %s\n", len(v.bad)-maxBadNamed, fsck))
			break
		}
		when := "there when the session started"
		if !o.atStart {
			when = "written during the session"
		}
		add(filepath.Join(objects, o.id[:2], o.id[2:]), fmt.Sprintf("object %s's content does not match its name (%s; %s): something rewrote stored history, and git show, git restore, git checkout and git reset --hard would use what it holds now; %s\n",
			o.id, o.why, when, fsck))
	}
	for _, p := range v.badPacks {
		add(filepath.Join(objects, "pack", p), fmt.Sprintf("the pack %s's content does not match the checksum it ends with: something rewrote stored history in place; %s\n", p, fsck))
	}
	if len(v.packs) > 0 {
		add(filepath.Join(objects, "pack"), fmt.Sprintf("%s, there when the session started, changed during the session and could not be checked here (gc and repack write a pack again only as it was): %s\n",
			strings.Join(v.packs, ", "), fsck))
	}
	if n := v.unverified[true]; n > 0 {
		add(objects, fmt.Sprintf("%d loose objects there when the session started changed on disk and were not hashed here (larger than %d MiB, or past the %d MiB this report hashes): %s\n",
			n, maxObjectVerify>>20, maxVerifyBytes>>20, fsck))
	}
	if b.looseCapped {
		add(objects, fmt.Sprintf("only %d loose objects were recorded when the session started (there were more, or more names in .git/objects than this report looks at): a rewrite of one beyond them is not detected; %s\n", len(b.loose), fsck))
	}
	switch n := v.unverified[false]; {
	case n > 0:
		add(objects, fmt.Sprintf("%d loose objects written during the session were not hashed here (larger than %d MiB, or past the %d MiB this report hashes): git -C %s fsck checks them\n",
			n, maxObjectVerify>>20, maxVerifyBytes>>20, wt))
	case a.looseCapped && !b.looseCapped:
		add(objects, fmt.Sprintf("only %d loose objects were listed at the end of the session (there were more, or more names in .git/objects than this report looks at): new ones beyond them were not hashed here; git -C %s fsck checks them\n", len(a.loose), wt))
	}
	return out
}
