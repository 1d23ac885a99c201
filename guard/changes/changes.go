// Package changes is the session change report: the files in a server's
// write roots that the user's tools execute or read as configuration
// (package.json and its scripts, lock files, Python .pth files and build
// configuration, Makefiles, CI workflows, container files), snapshotted
// when the session starts and compared when it ends. Each one created,
// changed or removed is reported, with the change, in the audit log and on
// stderr: writing such a file is what a write grant allows, and the next
// `npm test`, `make` or CI run executes it as the user.
package changes

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/mcpguard/mcpguard/guard/audit"
)

// Names of the files reported wherever they are in a write root.
var Names = []string{
	"package.json", "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "bun.lockb",
	"setup.py", "setup.cfg", "pyproject.toml", "Pipfile", "Pipfile.lock", "poetry.lock", "uv.lock",
	"tox.ini", "noxfile.py", "conftest.py", "sitecustomize.py", "usercustomize.py",
	"Makefile", "makefile", "GNUmakefile", "CMakeLists.txt", "Justfile", "justfile", "Taskfile.yml", "Rakefile",
	"Cargo.toml", "Cargo.lock", "build.rs", "go.mod", "go.sum", "go.work", "Gemfile", "Gemfile.lock",
	"meson.build", "tsconfig.json",
	"composer.json", "composer.lock", "build.gradle", "build.gradle.kts", "pom.xml",
	"Dockerfile", "Containerfile", "docker-compose.yml", "docker-compose.yaml", "compose.yml", "compose.yaml",
	".gitlab-ci.yml", ".travis.yml", "azure-pipelines.yml", "Jenkinsfile", ".pre-commit-config.yaml",
	// Found by the red-team pass of issue 32 (docs/eval.md): project
	// files that build tools and editors run as code or obey as commands.
	// JavaScript tool configuration is a module the tool imports (ESLint's
	// editor integration loads it when the folder opens).
	"eslint.config.js", "eslint.config.mjs", "eslint.config.cjs", "eslint.config.ts",
	".eslintrc.js", ".eslintrc.cjs", "prettier.config.js", ".prettierrc.js", ".prettierrc.cjs",
	"babel.config.js", ".babelrc.js", "jest.config.js", "jest.config.ts", "vitest.config.ts", "vitest.config.js",
	"vite.config.ts", "vite.config.js", "webpack.config.js", "rollup.config.js", "next.config.js", "next.config.mjs",
	"postcss.config.js", "tailwind.config.js", "playwright.config.ts",
	// Wrappers the user runs (./gradlew, ./mvnw) and what picks the
	// build tool they download and run (the wrapper's distributionUrl).
	"gradlew", "mvnw", "gradle-wrapper.properties", "gradle.properties", "settings.gradle", "settings.gradle.kts",
	// Test runners' and task runners' configuration that loads plugins or
	// runs commands (pytest's addopts -p, mise's hooks and tasks, Bazel's
	// flags), and requirement files pip installs from (an index URL, an
	// editable VCS install runs its build).
	"pytest.ini", "mise.toml", ".mise.toml", "mise.local.toml", ".mise.local.toml", ".bazelrc", "MODULE.bazel",
	"requirements.txt", "requirements-dev.txt", "constraints.txt",
	"bitbucket-pipelines.yml", ".drone.yml",
	// What the next coding agent reads as its instructions.
	"CLAUDE.md", "CLAUDE.local.md", "AGENTS.md", "GEMINI.md",
	// What picks the compiler or runtime the user's next command runs
	// (rustup follows a toolchain file's path; bun preloads modules).
	"rust-toolchain", "rust-toolchain.toml", "bunfig.toml", "deno.json", "deno.jsonc",
}

// Suffixes of the files reported: .pth files run code at every start of
// the Python that owns their site-packages; .mk files are Makefiles.
// A sourceless .pyc imports in place of a module of its name.
// A VS Code workspace file carries tasks that run when it is opened.
var Suffixes = []string{".pth", ".mk", ".pyc", ".code-workspace"}

// Trees are directories whose files are all reported (CI definitions,
// git-hook managers' scripts, Cargo's project configuration with its
// rustc-wrapper and runners, Maven's extensions and JVM options).
// Python's bytecode caches are there too: a .pyc whose header carries the
// unchanged source's size and mtime runs in its place on the next import,
// and neither a diff of the sources nor git status shows it (red team F7).
var Trees = []string{".github", ".circleci", ".husky", ".gitlab", ".buildkite", ".cargo", ".mvn", "__pycache__"}

// skip are directories not walked: dependencies (their files change with
// every install) and git's own data (protected by name instead).
var skip = []string{"node_modules", ".git"}

// Watched reports whether the path (relative to a write root, or
// absolute) is a file the report covers: Listed, and besides the lists
// every hidden entry and everything below a hidden directory, relative to
// the write root (not below node_modules or .git). The names and trees of
// the lists are examples of a convention, not its whole (rust-toolchain's
// directory, .tool-versions, .pdbrc, .exrc, .nvim.lua, .env, the next
// agent's settings: red team F2, F3), and a review of a project's files
// does not see hidden ones. An absolute path is judged by the lists only:
// which of its directories are the write root's is not known here.
func Watched(rel string) bool {
	if Listed(rel) {
		return true
	}
	clean := filepath.ToSlash(filepath.Clean(rel))
	parts := strings.Split(clean, "/")
	if strings.HasPrefix(clean, "/") || slices.ContainsFunc(parts[:len(parts)-1], skipped) {
		return false
	}
	return slices.ContainsFunc(parts, hidden) || topModule(parts)
}

// topModule reports whether parts name a Python module at the top of a
// write root (x.py, x/__init__.py): python -m and a script run there put
// the directory first on the import path, so it shadows the module of its
// name, the standard library's included (red team: venv/__init__.py ran on
// the user's python3 -m venv).
func topModule(parts []string) bool {
	switch len(parts) {
	case 1:
		return strings.HasSuffix(parts[0], ".py")
	case 2:
		return parts[1] == "__init__.py"
	}
	return false
}

func skipped(dir string) bool { return slices.Contains(skip, dir) }

// Listed reports whether the path (relative to a write root, or absolute)
// is one of the files the lists name (Names, Suffixes, Trees), not below
// node_modules or .git: what filesystem.protect_exec_config refuses on
// both backends (the BPF programs look the same lists up by name).
func Listed(rel string) bool {
	parts := strings.Split(filepath.ToSlash(filepath.Clean(rel)), "/")
	name := parts[len(parts)-1]
	if slices.ContainsFunc(parts[:len(parts)-1], skipped) {
		return false
	}
	if slices.Contains(Names, name) {
		return true
	}
	for _, s := range Suffixes {
		if strings.HasSuffix(name, s) && len(name) > len(s) {
			return true
		}
	}
	for _, d := range parts[:len(parts)-1] {
		if slices.Contains(Trees, d) {
			return true
		}
	}
	return false
}

// hidden reports whether a path component is a hidden name.
func hidden(part string) bool { return len(part) > 1 && part[0] == '.' && part != ".." }

// MaxWalk bounds the entries looked at in all write roots together.
const MaxWalk = 200000

// maxContent is the largest file whose content is kept for the diff
// (larger ones are compared by digest).
const maxContent = 256 << 10

type entry struct {
	sum     [32]byte
	content []byte // nil when larger than maxContent
	size    int64
	// hashed: sum and content were read (a Listed file); otherwise the
	// file is compared by meta alone, which costs one lstat (a
	// virtualenv's or a hidden cache's thousands of files).
	hashed bool
	meta   meta
}

// meta is what tells a file changed without reading it: the change time is
// the kernel's, which no unprivileged process sets back (touch -d sets the
// modification time only).
type meta struct {
	ino, size, ctime int64
	mode             uint32
}

func metaOf(fi fs.FileInfo) meta {
	m := meta{size: fi.Size(), mode: uint32(fi.Mode())}
	m.ino, m.ctime = inoCtime(fi)
	return m
}

// Snapshot is the watched files of the write roots at one moment, and
// their symbolic links that lead out of them.
type Snapshot struct {
	roots []string
	files map[string]entry
	// links holds every symbolic link in the roots (not only at a
	// watched name): one whose target lies outside every root is
	// reported when it is new or retargeted, since whatever the user's
	// tools later read or write through it (an editor, git, an archive,
	// an agent reading the workspace) reaches the target instead, a key
	// or a start-up file.
	links    map[string]link
	Complete bool // false when the walk stopped at MaxWalk
	// git holds the repositories the walk met (their refs, HEAD and
	// index: git's data, which the server may write, decides what the
	// user's next checkout writes; red team F8).
	git *GitSnapshot
	// protected is launch.IsProtected (passed in: package launch
	// imports this one), for the git comparison.
	protected func(rel string) bool
}

// Take snapshots the watched files under roots (directories; symlinks
// are not followed) and the git repositories among them. protected says
// which paths (relative to a write root) are protected names, for
// entries git's index would write there; nil: none.
func Take(roots []string, protected func(rel string) bool) *Snapshot {
	s := take(roots, MaxWalk)
	s.protected = protected
	return s
}

// take walks breadth first, each directory's files before its
// subdirectories, so that a flood of entries deep in one directory (a
// server that wants the walk to stop before the files it changed) stops
// the walk after the shallow files — where the project's configuration
// lives — have been read. A walk that stops is marked incomplete, and
// Compare re-reads the files of the earlier snapshot it did not reach.
func take(roots []string, limit int) *Snapshot {
	s := &Snapshot{roots: roots, files: map[string]entry{}, links: map[string]link{}, Complete: true,
		git: &GitSnapshot{Repos: map[string]*GitState{}, Complete: true, roots: roots}}
	defer func() { s.git.Complete = s.Complete }()
	seen := 0
	for _, root := range roots {
		queue := []walkDir{{path: root}}
		for len(queue) > 0 && s.Complete {
			dir := queue[0]
			queue = queue[1:]
			ents, err := os.ReadDir(dir.path)
			if err != nil {
				continue
			}
			// A directory holding pyvenv.cfg is a Python environment:
			// everything in it is code its python runs or a shell
			// sources (bin/activate, site-packages), whatever its
			// name (red team: venv/ is not hidden).
			if slices.ContainsFunc(ents, func(d fs.DirEntry) bool { return d.Name() == "pyvenv.cfg" && d.Type().IsRegular() }) {
				dir.code = true
			}
			for _, d := range ents {
				if seen++; seen > limit {
					s.Complete = false
					break
				}
				p := filepath.Join(dir.path, d.Name())
				if d.IsDir() {
					switch {
					case d.Name() == "node_modules" || dir.dep:
						// Dependencies are code the user's scripts load
						// (red team: a package's lib/ rewritten ran on npm
						// test): compared by meta, reported by package.
						// npm puts node_modules/.bin first on PATH: its
						// entries, files or links, are programs.
						bin := d.Name() == ".bin" && filepath.Base(dir.path) == "node_modules"
						queue = append(queue, walkDir{path: p, code: true, dep: true, programs: bin})
					case d.Name() == ".git":
						if _, ok := s.git.Repos[dir.path]; !ok {
							s.git.Repos[dir.path] = ReadGit(dir.path, relTo(root, dir.path))
						}
					case !slices.Contains(skip, d.Name()):
						queue = append(queue, walkDir{path: p, code: dir.code})
					}
					continue
				}
				s.add(root, p, d, dir)
			}
		}
	}
	return s
}

// walkDir is a directory the walk will read: in a Python environment or a
// node_modules/.bin (code: every file is watched), and whether its entries
// are on a PATH (programs: every link is reported, wherever it leads).
type walkDir struct {
	path           string
	code, programs bool
	dep            bool // in a node_modules
}

// add reads p into the snapshot if it is a watched regular file, or a
// symbolic link out of the roots.
func (s *Snapshot) add(root, p string, d fs.DirEntry, dir walkDir) {
	rel, err := filepath.Rel(root, p)
	if err != nil {
		return
	}
	watched := dir.code || Watched(rel)
	if d.Type()&fs.ModeSymlink != 0 {
		t, out, ok := s.leads(p)
		if !ok {
			return
		}
		s.links[p] = link{t, out, dir.programs, watched}
		// A link at a watched name is what the user's tools open there:
		// what it leads to is compared as the file (red team:
		// package.json -> src/conf.json, then the target rewritten).
		if watched && !out {
			if e, ok := readEntry(p, Listed(rel)); ok {
				s.files[p] = e
			}
		}
		return
	}
	if watched && d.Type().IsRegular() {
		if e, ok := readEntry(p, Listed(rel)); ok {
			s.files[p] = e
		}
	}
}

// readEntry reads the regular file p (followed if a link): by content when
// listed and at most maxHashed bytes, else by meta. ok is false when p is
// not a regular file.
func readEntry(p string, listed bool) (entry, bool) {
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return entry{}, false
	}
	if listed && fi.Size() <= maxHashed {
		if e, ok := read(p); ok {
			return e, true
		}
	}
	return entry{meta: metaOf(fi)}, true
}

// maxHashed is the largest file read for its content: a larger one (a
// sparse terabyte package.json, red team) is compared by meta, so that
// the report costs a stat, not an hour of reading.
const maxHashed = 16 << 20

type link struct {
	target string
	out    bool
	// program: the link is on a PATH (node_modules/.bin): the user's
	// tools run what it leads to under its name, wherever that is
	// (red team: .bin/eslint -> /usr/bin/python3 ran the workspace's
	// __main__.py on npm run lint).
	program bool
	// watched: the link has a watched name (package.json, Makefile).
	watched bool
}

// leads returns link p's target and whether it lies outside every root:
// by the target's text (made absolute from p's directory), or where the
// chain of links ends, when it resolves (a link to a link in the roots
// that points out). ok is false when p cannot be read.
func (s *Snapshot) leads(p string) (target string, out, ok bool) {
	t, err := os.Readlink(p)
	if err != nil {
		return "", false, false
	}
	abs := t
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(filepath.Dir(p), abs)
	}
	if !s.inRoots(filepath.Clean(abs)) {
		return t, true, true
	}
	if end, err := filepath.EvalSymlinks(p); err == nil && !s.inRoots(end) {
		return t + " (resolving to " + end + ")", true, true
	}
	return t, false, true
}

func (s *Snapshot) inRoots(p string) bool {
	for _, r := range s.roots {
		if rel, err := filepath.Rel(r, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return true
		}
		// The roots as the kernel names them (a root below a symlinked
		// /tmp or home).
		if real, err := filepath.EvalSymlinks(r); err == nil && real != r {
			if rel, err := filepath.Rel(real, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
				return true
			}
		}
	}
	return false
}

// reread reads p as it is now, for a file an incomplete walk did not
// reach, the way was was (hashed or by meta): ok is false when p is no
// longer a regular file.
func reread(p string, was entry) (entry, bool) {
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return entry{}, false
	}
	if !was.hashed || fi.Size() > maxHashed {
		return entry{meta: metaOf(fi)}, true
	}
	return read(p)
}

// same reports whether two readings of a file are the same file unchanged.
func same(a, b entry) bool {
	if a.hashed && b.hashed {
		return a.sum == b.sum
	}
	return a.meta == b.meta && a.hashed == b.hashed
}

func read(p string) (entry, bool) {
	// O_NONBLOCK: a FIFO swapped in after the stat does not hang the
	// guard; the limit holds for a file that grows meanwhile.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return entry{}, false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return entry{}, false
	}
	h := sha256.New()
	var buf bytes.Buffer
	n, err := io.Copy(io.MultiWriter(h, &limited{&buf, maxContent + 1}), io.LimitReader(f, maxHashed+1))
	if err != nil {
		return entry{}, false
	}
	e := entry{size: n, hashed: true}
	copy(e.sum[:], h.Sum(nil))
	if n <= maxContent {
		e.content = buf.Bytes()
	}
	return e, true
}

// limited writes at most n bytes to w and swallows the rest.
type limited struct {
	w *bytes.Buffer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.n - l.w.Len(); room > 0 {
		l.w.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// Change is one watched file that differs between two snapshots.
type Change struct {
	Path string
	Kind string // "created", "changed", "removed", "incomplete" (the walk stopped; Path names the roots)
	// Diff is a unified diff of the content (at most maxDiffLines), or a
	// note when the file is too large or not text.
	Diff string
}

const maxDiffLines = 40

// Compare lists what changed from before to after, by path.
func Compare(before, after *Snapshot) []Change {
	var out []Change
	for p, a := range after.files {
		b, ok := before.files[p]
		switch {
		case !ok:
			out = append(out, Change{Path: p, Kind: "created", Diff: diff(p, nil, &a)})
		case !same(a, b):
			out = append(out, Change{Path: p, Kind: "changed", Diff: diff(p, &b, &a)})
		}
	}
	for p, b := range before.files {
		if _, ok := after.files[p]; ok {
			continue
		}
		// A walk that stopped early did not look: ask the file itself.
		if !after.Complete {
			if a, ok := reread(p, b); ok {
				if !same(a, b) {
					out = append(out, Change{Path: p, Kind: "changed", Diff: diff(p, &b, &a)})
				}
				continue
			}
		}
		out = append(out, Change{Path: p, Kind: "removed", Diff: diff(p, &b, nil)})
	}
	for p, l := range after.links {
		if !l.out && !l.program && !l.watched {
			continue
		}
		switch b, ok := before.links[p]; {
		case !ok:
			out = append(out, Change{Path: p, Kind: "created", Diff: linkNote(l)})
		case b != l:
			out = append(out, Change{Path: p, Kind: "changed", Diff: linkNote(l)})
		}
	}
	out = byDependency(out)
	out = append(out, CompareGit(before.git, after.git, before.protected)...)
	if !before.Complete || !after.Complete {
		// Said loudly: a watched file created past the limit is not in
		// this report (the server may have flooded its roots for that).
		out = append(out, Change{Path: strings.Join(after.roots, ", "), Kind: "incomplete",
			Diff: fmt.Sprintf("the walk stopped after %d entries: watched files created beyond them are not in this report; look at the write roots yourself", MaxWalk)})
	}
	slices.SortFunc(out, func(x, y Change) int { return strings.Compare(x.Path, y.Path) })
	return out
}

// byDependency folds the changes below a node_modules (but its .bin) into
// one per package: an install changes thousands of files, and which
// packages changed is what the user needs to know.
func byDependency(changes []Change) []Change {
	var out []Change
	type tally struct {
		kinds map[string]int
		first []string
	}
	pkgs := map[string]*tally{}
	for _, c := range changes {
		pkg, ok := dependencyOf(c.Path)
		if !ok {
			out = append(out, c)
			continue
		}
		t := pkgs[pkg]
		if t == nil {
			t = &tally{kinds: map[string]int{}}
			pkgs[pkg] = t
		}
		t.kinds[c.Kind]++
		if rel, err := filepath.Rel(pkg, c.Path); err == nil && len(t.first) < 3 {
			t.first = append(t.first, rel)
		}
	}
	for pkg, t := range pkgs {
		var kinds []string
		for _, k := range slices.Sorted(maps.Keys(t.kinds)) {
			kinds = append(kinds, fmt.Sprintf("%d %s", t.kinds[k], k))
		}
		out = append(out, Change{Path: pkg, Kind: "dependency", Diff: fmt.Sprintf(
			"files of this dependency, code the project's scripts load, changed during the session: %s (for example %s); npm ci puts it back\n",
			strings.Join(kinds, ", "), strings.Join(t.first, ", "))})
	}
	return out
}

// dependencyOf returns the package directory below the last node_modules
// in p (node_modules/x or node_modules/@scope/x), unless p is in that
// node_modules' .bin or is no deeper than the package directory.
func dependencyOf(p string) (string, bool) {
	parts := strings.Split(filepath.ToSlash(p), "/")
	i := len(parts) - 1
	for i >= 0 && parts[i] != "node_modules" {
		i--
	}
	end := i + 2
	if i >= 0 && i+1 < len(parts) && strings.HasPrefix(parts[i+1], "@") {
		end++
	}
	if i < 0 || end >= len(parts) || parts[i+1] == ".bin" {
		return "", false
	}
	return filepath.FromSlash(strings.Join(parts[:end], "/")), true
}

func linkNote(l link) string {
	if l.program {
		return "symbolic link to " + l.target + " on npm's PATH: the user's scripts run it under this name\n"
	}
	return "symbolic link to " + l.target + ", outside the write roots: whatever reads or writes it later reaches that instead\n"
}

func diff(p string, a, b *entry) string {
	if a != nil && !a.hashed || b != nil && !b.hashed {
		return "(content not kept: a hidden file, or one in a Python environment or node_modules/.bin; look at it yourself)"
	}
	text := func(e *entry) ([]string, bool) {
		if e == nil {
			return nil, true
		}
		if e.content == nil || bytes.IndexByte(e.content, 0) >= 0 {
			return nil, false
		}
		return difflib.SplitLines(string(e.content)), true
	}
	x, okx := text(a)
	y, oky := text(b)
	if !okx || !oky {
		return fmt.Sprintf("(binary or larger than %d KiB: content not shown)", maxContent>>10)
	}
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: x, B: y, FromFile: p, ToFile: p, Context: 1})
	if err != nil {
		return ""
	}
	lines := strings.SplitAfter(d, "\n")
	if len(lines) > maxDiffLines {
		lines = append(lines[:maxDiffLines], fmt.Sprintf("... (%d more lines)\n", len(lines)-maxDiffLines))
	}
	return strings.Join(lines, "")
}

// maxShown is how many changes Report prints on stderr with their diffs.
const maxShown = 50

// Rule is the audit rule of a reported change.
const Rule = "report.exec_config_changed"

// Report writes the changes to the audit log (one event each, decision
// "allow": the write was within the grant) and to w (stderr), if any.
func Report(w io.Writer, log *audit.Logger, server, config string, changes []Change) {
	if len(changes) == 0 {
		return
	}
	// The audit log gets every change; stderr the first maxShown, then a
	// count (a server that writes thousands of hidden files does not
	// bury the terminal).
	for _, c := range changes {
		log.Log(audit.Event{Server: server, Config: config, Layer: "L3", Rule: Rule, Decision: audit.Allow,
			Target: c.Path, Reason: c.Kind + " in a write root; the user's tools run or read it: " + firstLines(c.Diff, 12)})
	}
	if w == nil {
		return
	}
	fmt.Fprintf(w, "mcpguard: session change report (%s): %d file(s) the user's tools run, read as configuration, or follow out of the write roots changed:\n", server, len(changes))
	for i, c := range changes {
		if i == maxShown {
			fmt.Fprintf(w, "  ... and %d more: the audit log lists every one (rule %s)\n", len(changes)-maxShown, Rule)
			break
		}
		// Paths and lines the server wrote reach the terminal escaped
		// (red team: a changed file's escape sequences erased its own
		// lines of this report).
		fmt.Fprintf(w, "  %s %s\n", c.Kind, audit.Printable(c.Path))
		for _, l := range strings.Split(strings.TrimRight(c.Diff, "\n"), "\n") {
			fmt.Fprintf(w, "    %s\n", audit.Printable(l))
		}
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "")
}
