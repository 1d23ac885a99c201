package runtime

import (
	"bufio"
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
)

// helper grants a program the server's runtime runs besides the server
// itself (a runtime.exec entry, a binary bundled in its package): the
// program, the chain the kernel executes to start it (its ELF loader, its
// #! interpreter), and, for a program that reads configuration the user
// keeps outside the server's trees, the files it says it reads (git).
func (r *Resolver) helper(ctx context.Context, c Command, prog, why string, g *grants) {
	if !filepath.IsAbs(prog) {
		return
	}
	g.exec(prog, why)
	chain, err := Interpreters(prog, envValue(c.Env, "PATH"))
	if err != nil {
		g.note("%s %s: %v", why, prog, err)
	}
	for _, p := range chain {
		g.exec(p, "interpreter of "+prog)
	}
	if filepath.Base(prog) == "git" {
		r.git(ctx, c, prog, g)
	}
}

// git grants, read-only, the configuration files git reads in every
// repository: the system and global files (git-config(1), FILES) and what
// they include. git is asked (`git config --show-origin`, with the
// server's environment, so GIT_CONFIG_GLOBAL, GIT_CONFIG_SYSTEM, HOME and
// XDG_CONFIG_HOME count); the documented locations that exist are added
// because git lists only files that hold an entry, yet dies on an
// unreadable system file and warns on an unreadable ignore file. A
// repository's own .git/config is the repository's, i.e. data.
func (r *Resolver) git(ctx context.Context, c Command, git string, g *grants) {
	var files []string
	for _, scope := range []string{"--system", "--global"} {
		out, err := r.ask(ctx, 1, Command{Argv: []string{git, "config", scope, "--includes", "--show-origin", "--list"}, Dir: c.Dir, Env: c.Env})
		if err != nil {
			// git config --list exits 1 when the file does not exist.
			continue
		}
		files = append(files, gitOrigins(out)...)
	}
	home, xdg := envValue(c.Env, "HOME"), envValue(c.Env, "XDG_CONFIG_HOME")
	if xdg == "" && home != "" {
		xdg = filepath.Join(home, ".config")
	}
	files = append(files, envValue(c.Env, "GIT_CONFIG_SYSTEM"), envValue(c.Env, "GIT_CONFIG_GLOBAL"), "/etc/gitconfig")
	if home != "" {
		files = append(files, filepath.Join(home, ".gitconfig"))
	}
	if xdg != "" {
		for _, f := range []string{"config", "ignore", "attributes"} {
			files = append(files, filepath.Join(xdg, "git", f))
		}
	}
	slices.Sort(files)
	for _, f := range slices.Compact(files) {
		if g.read(f, "git configuration") {
			g.note("git reads %s: granted read-only", f)
		}
	}
}

// gitOrigins parses `git config --show-origin --list`: lines
// "file:PATH\tKEY=VALUE" (PATH quoted when it holds odd characters; those
// are skipped).
func gitOrigins(out []byte) []string {
	var files []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		origin, _, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			continue
		}
		p, ok := strings.CutPrefix(origin, "file:")
		if !ok || !filepath.IsAbs(p) {
			continue
		}
		files = append(files, filepath.Clean(p))
	}
	return files
}
