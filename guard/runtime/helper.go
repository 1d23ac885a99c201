package runtime

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
)

// helper grants a program the server's runtime runs besides the server
// itself (a runtime.exec entry, a binary bundled in its package): the
// program, the chain the kernel executes to start it (its ELF loader, its
// #! interpreter), and, for a program that reads configuration the user
// keeps outside the server's trees, the files it says it reads (git).
func (r *Resolver) helper(c Command, prog, why string, g *grants) {
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
		r.git(c, g)
	}
}

// git grants, read-only, the configuration files git reads in every
// repository: the system and global files (git-config(1), FILES: the
// documented locations, with the server's GIT_CONFIG_GLOBAL,
// GIT_CONFIG_SYSTEM, HOME and XDG_CONFIG_HOME) and every file they
// include ([include] and [includeIf] path = ..., followed as git does:
// ~/ is HOME, a relative path is relative to the including file). They are
// read, not asked of git: nothing runs outside a sandbox. git dies on an
// unreadable system file and warns on an unreadable ignore file, so the
// documented files are granted where they exist. A repository's own
// .git/config is the repository's, i.e. data.
func (r *Resolver) git(c Command, g *grants) {
	home, xdg := envValue(c.Env, "HOME"), envValue(c.Env, "XDG_CONFIG_HOME")
	if xdg == "" && home != "" {
		xdg = filepath.Join(home, ".config")
	}
	files := []string{envValue(c.Env, "GIT_CONFIG_SYSTEM"), envValue(c.Env, "GIT_CONFIG_GLOBAL"), "/etc/gitconfig"}
	if home != "" {
		files = append(files, filepath.Join(home, ".gitconfig"))
	}
	if xdg != "" {
		for _, f := range []string{"config", "ignore", "attributes"} {
			files = append(files, filepath.Join(xdg, "git", f))
		}
	}
	seen := map[string]bool{}
	for len(files) > 0 && len(seen) < 64 {
		f := files[0]
		files = files[1:]
		if !filepath.IsAbs(f) || seen[f] {
			continue
		}
		seen[f] = true
		if g.read(f, "git configuration") {
			g.note("git reads %s: granted read-only", f)
			files = append(files, gitIncludes(f, home)...)
		}
	}
}

// gitIncludes lists the files a git configuration file includes: the
// `path` keys of its [include] and [includeIf "..."] sections (whatever
// the condition: git may meet it in some repository), ~/ expanded to
// home, relative paths taken from the file's directory.
func gitIncludes(file, home string) []string {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	var out []string
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			name, _, _ := strings.Cut(strings.Trim(line, "[]"), " ")
			section = strings.ToLower(strings.TrimSpace(name))
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || (section != "include" && section != "includeif") || !strings.EqualFold(strings.TrimSpace(k), "path") {
			continue
		}
		p := strings.Trim(strings.TrimSpace(v), `"`)
		switch {
		case strings.HasPrefix(p, "~/") && home != "":
			p = filepath.Join(home, p[2:])
		case !filepath.IsAbs(p):
			p = filepath.Join(filepath.Dir(file), p)
		}
		out = append(out, filepath.Clean(p))
	}
	return out
}
