package mcpguard_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/mcpguard/mcpguard"

// floors reads docs/architecture.md's per-package table: package (relative
// to the module, "." for the root) to floor.
func floors(t *testing.T) map[string]int {
	t.Helper()
	f, err := os.Open("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| *([0-9]+) *\\| *`([^`]+)` *\\|")
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := row.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		if _, dup := out[m[2]]; dup {
			t.Errorf("docs/architecture.md lists %s twice", m[2])
		}
		out[m[2]] = n
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("docs/architecture.md has no package table")
	}
	return out
}

type listed struct {
	ImportPath, Dir                    string
	Imports, TestImports, XTestImports []string
}

// packages lists the module's packages with their imports (go list).
func packages(t *testing.T) []listed {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var ps []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

func rel(path string) (string, bool) {
	if path == module {
		return ".", true
	}
	r, ok := strings.CutPrefix(path, module+"/")
	return r, ok
}

// TestFloors keeps docs/architecture.md and the imports in agreement: every
// package is on a floor, and no package imports one on a floor above its
// own. Tests may also import the lab's packages (floor 4: the servers,
// attacks, reference model and harness they run against), never the
// profiler's or the command's.
func TestFloors(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	floor := floors(t)
	seen := map[string]bool{}
	const lab = 4
	for _, p := range packages(t) {
		name, _ := rel(p.ImportPath)
		seen[name] = true
		own, ok := floor[name]
		if !ok {
			t.Errorf("%s is not in docs/architecture.md's table: give it a floor and a line", name)
			continue
		}
		check := func(imports []string, limit int, what string) {
			for _, imp := range imports {
				dep, ok := rel(imp)
				if !ok {
					continue
				}
				f, ok := floor[dep]
				if !ok {
					continue // reported as its own package
				}
				if f > limit {
					t.Errorf("%s (floor %d) %s %s (floor %d): an import up a floor", name, own, what, dep, f)
				}
			}
		}
		check(p.Imports, own, "imports")
		check(p.TestImports, max(own, lab), "tests import")
		check(p.XTestImports, max(own, lab), "tests import")
	}
	for name := range floor {
		if !seen[name] {
			t.Errorf("docs/architecture.md lists %s, which is not a package", name)
		}
	}
}

// maxFuncLines is the longest a function may be: a longer one is broken
// into named steps that read top to bottom.
const maxFuncLines = 100

// stillLong are the functions that were longer than maxFuncLines when the
// check came (issue 36), with their length then. The list only shrinks: a
// function on it may not grow, and one that is split must leave it.
var stillLong = map[string]int{}

// TestFunctionLength fails on a function (tests included, generated code
// not) longer than maxFuncLines, but for those still on stillLong.
func TestFunctionLength(t *testing.T) {
	fset := token.NewFileSet()
	var long []string
	found := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "node_modules" || n == "results" || strings.HasPrefix(n, ".") && path != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil || ast.IsGenerated(f) {
			return nil
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			key := filepath.ToSlash(path) + " " + fn.Name.Name
			was, listed := stillLong[key]
			found[key] = true
			switch {
			case listed && n <= maxFuncLines:
				long = append(long, fmt.Sprintf("%s: %d lines now; take it off stillLong", key, n))
			case listed && n > was:
				long = append(long, fmt.Sprintf("%s: %d lines, longer than the %d it had; split it", key, n, was))
			case listed:
				t.Logf("%s: still %d lines (at most %d)", key, n, maxFuncLines)
			case n > maxFuncLines:
				long = append(long, fmt.Sprintf("%s: %d lines (at most %d)", key, n, maxFuncLines))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for key := range stillLong {
		if !found[key] {
			long = append(long, key+": no such function any more; take it off stillLong")
		}
	}
	slices.Sort(long)
	for _, l := range long {
		t.Error(l)
	}
}
