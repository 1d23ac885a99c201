package validate

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Command errors; the engine maps them to rule ids.
var (
	// ErrShellSyntax is a command line that is not one simple command of
	// literal words: pipes, lists, substitutions, expansions, redirections,
	// assignments, globs, "~" and brace expansion all make a shell do more
	// than run one program with the arguments the guard checked.
	ErrShellSyntax = errors.New("command is not one simple command of literal words")
	// ErrOption is an option a program's allow-list does not admit (or a
	// known-dangerous one: config injection, a program to run, a file to
	// write).
	ErrOption = errors.New("option not allowed")
)

// SplitCommand splits a command line the way a POSIX shell (or bash) would
// before running it, and refuses every line whose words a shell would not
// pass on verbatim: more than one command, pipes, "&&", background jobs,
// redirections, variable assignments, command and parameter substitution,
// arithmetic, process substitution, $'...' and $"..." quoting, unquoted
// globs, a leading "~" and braces. What it returns is then exactly the
// argv the program receives.
func SplitCommand(s string) ([]string, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return nil, fmt.Errorf("%w: NUL byte", ErrShellSyntax)
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(s), "")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrShellSyntax, err)
	}
	if len(f.Stmts) != 1 {
		return nil, fmt.Errorf("%w: %d commands", ErrShellSyntax, len(f.Stmts))
	}
	st := f.Stmts[0]
	if st.Negated || st.Background || st.Coprocess || st.Disown || len(st.Redirs) > 0 {
		return nil, fmt.Errorf("%w: negation, background job or redirection", ErrShellSyntax)
	}
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Assigns) > 0 || len(call.Args) == 0 {
		return nil, fmt.Errorf("%w: not a plain program call", ErrShellSyntax)
	}
	argv := make([]string, 0, len(call.Args))
	for _, w := range call.Args {
		v, err := literalWord(w)
		if err != nil {
			return nil, err
		}
		argv = append(argv, v)
	}
	return argv, nil
}

// literalWord returns the value of a word that a shell takes as written
// (quotes removed), and refuses one whose value a shell would compute.
func literalWord(w *syntax.Word) (string, error) {
	var b strings.Builder
	for i, p := range w.Parts {
		switch t := p.(type) {
		case *syntax.Lit:
			if i == 0 && strings.HasPrefix(t.Value, "~") {
				return "", fmt.Errorf("%w: tilde expansion in %q", ErrShellSyntax, t.Value)
			}
			if c, ok := unescapedMeta(t.Value); ok {
				return "", fmt.Errorf("%w: unquoted %q (glob or brace expansion)", ErrShellSyntax, c)
			}
			unescape(&b, t.Value, func(byte) bool { return true })
		case *syntax.SglQuoted:
			if t.Dollar {
				return "", fmt.Errorf("%w: $'...' quoting", ErrShellSyntax)
			}
			b.WriteString(t.Value)
		case *syntax.DblQuoted:
			if t.Dollar {
				return "", fmt.Errorf("%w: $\"...\" quoting", ErrShellSyntax)
			}
			for _, q := range t.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return "", fmt.Errorf("%w: expansion inside double quotes", ErrShellSyntax)
				}
				// Inside double quotes a backslash escapes only these.
				unescape(&b, l.Value, func(c byte) bool { return strings.IndexByte("$`\"\\\n", c) >= 0 })
			}
		default:
			return "", fmt.Errorf("%w: expansion or substitution", ErrShellSyntax)
		}
	}
	return b.String(), nil
}

// unescape writes raw with each backslash that escapes a byte esc admits
// removed (a backslash-newline is removed whole: a line continuation).
func unescape(b *strings.Builder, raw string, esc func(byte) bool) {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c == '\\' && i+1 < len(raw) && esc(raw[i+1]) {
			i++
			if raw[i] != '\n' {
				b.WriteByte(raw[i])
			}
			continue
		}
		b.WriteByte(c)
	}
}

// unescapedMeta finds a glob or brace character not escaped by a backslash
// in the raw text of an unquoted literal.
func unescapedMeta(raw string) (byte, bool) {
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '\\':
			i++
		case '*', '?', '[', ']', '{', '}':
			return raw[i], true
		}
	}
	return 0, false
}

// Word roles in an argument list.
const (
	// RolePlain names no file and no destination (a count, a format, a
	// pattern).
	RolePlain = iota
	// RoleFile names a file the program reads or writes.
	RoleFile
	// RoleURL names a network destination.
	RoleURL
)

// Word is one word of an argument list with its role.
type Word struct {
	Value string
	Role  int
}

// optSpec says what an option does: whether it takes a value and what the
// value is, or that it is refused.
type optSpec struct {
	value bool
	// optional: the value may only be attached ("-Iseconds",
	// "--iso-8601=seconds"); a separate next word is not taken.
	optional bool
	role     int
	deny     string // non-empty: refused, with this reason
}

// progSpec is a program's option allow-list. A program with a spec has
// every option it is given checked against it: an option it does not list
// is refused (an abbreviation of a long option too: GNU getopt and git
// accept unique prefixes, so "--out" may be "--output").
type progSpec struct {
	short   map[byte]optSpec
	long    map[string]optSpec
	operand int // role of operands
	// subs holds the allowed subcommands (git), each with its own spec:
	// the first operand must be one, and the options after it are read
	// by its spec (an option it does not list is refused).
	subs map[string]*progSpec
	// negatable: "--no-NAME" is admitted where NAME is a flag or an
	// optional-value option of the spec (git's parse-options).
	negatable bool
	// findExpr: find's expression primaries, allow-listed.
	findExpr map[string]optSpec
}

var (
	flag      = optSpec{}
	plainVal  = optSpec{value: true, role: RolePlain}
	fileVal   = optSpec{value: true, role: RoleFile}
	urlVal    = optSpec{value: true, role: RoleURL}
	denied    = func(why string) optSpec { return optSpec{deny: why} }
	deniedVal = func(why string) optSpec { return optSpec{value: true, deny: why} }
	optPlain  = optSpec{value: true, optional: true, role: RolePlain}
)

func shorts(flags string, extra map[byte]optSpec) map[byte]optSpec {
	m := map[byte]optSpec{}
	for i := 0; i < len(flags); i++ {
		m[flags[i]] = flag
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// programs holds the option allow-lists of programs servers commonly run
// with model-chosen arguments. Read-only after package init.
var programs = map[string]*progSpec{
	"sort": {
		short: shorts("bdfghiMnrRsuVzcC", map[byte]optSpec{
			'k': plainVal, 't': plainVal, 'S': plainVal,
			'o': deniedVal("writes its output to a file"),
			'T': deniedVal("writes temporary files elsewhere"),
		}),
		long: map[string]optSpec{
			"ignore-leading-blanks": flag, "dictionary-order": flag, "ignore-case": flag,
			"general-numeric-sort": flag, "human-numeric-sort": flag, "ignore-nonprinting": flag,
			"month-sort": flag, "numeric-sort": flag, "random-sort": flag, "reverse": flag,
			"stable": flag, "unique": flag, "version-sort": flag, "zero-terminated": flag,
			"check": flag, "key": plainVal, "field-separator": plainVal, "buffer-size": plainVal,
			"parallel": plainVal, "sort": plainVal,
			"output":           deniedVal("writes its output to a file"),
			"compress-program": deniedVal("runs a program"),
			"files0-from":      deniedVal("reads the names of files to sort from a file"),
			"random-source":    deniedVal("reads a file"),
		},
		operand: RoleFile,
	},
	"date": {
		short: shorts("uR", map[byte]optSpec{
			'I': optPlain, 'd': plainVal, 'r': fileVal,
			'f': deniedVal("reads a file line by line and echoes what it cannot parse"),
			's': deniedVal("sets the clock"),
		}),
		long: map[string]optSpec{
			"utc": flag, "universal": flag, "rfc-email": flag, "iso-8601": optPlain, "debug": flag,
			"date": plainVal, "rfc-3339": plainVal, "reference": fileVal,
			"file": deniedVal("reads a file line by line and echoes what it cannot parse"),
			"set":  deniedVal("sets the clock"),
		},
		operand: RolePlain,
	},
	"curl": {
		short: shorts("sSfIiGvkq", map[byte]optSpec{
			'X': plainVal, 'H': plainVal, 'A': plainVal, 'm': plainVal, 'e': plainVal, 'u': plainVal,
			'x': urlVal,
			'o': deniedVal("writes a file"), 'O': denied("writes a file"),
			'K': deniedVal("reads options from a file"), 'T': deniedVal("uploads a file"),
			'd': deniedVal("posts data, @FILE reads a file"), 'F': deniedVal("posts a form, @FILE reads a file"),
			'b': deniedVal("reads cookies from a file"), 'c': deniedVal("writes a cookie jar"),
			'D': deniedVal("writes headers to a file"), 'L': denied("follows redirects the guard never sees"),
			'E': deniedVal("reads a certificate file"),
		}),
		long: map[string]optSpec{
			"silent": flag, "show-error": flag, "fail": flag, "head": flag, "include": flag, "get": flag,
			"verbose": flag, "compressed": flag, "insecure": flag,
			"request": plainVal, "header": plainVal, "user-agent": plainVal, "max-time": plainVal,
			"connect-timeout": plainVal, "referer": plainVal, "user": plainVal, "url": urlVal, "proxy": urlVal,
			"output": deniedVal("writes a file"), "remote-name": denied("writes a file"),
			"config": deniedVal("reads options from a file"), "upload-file": deniedVal("uploads a file"),
			"data": deniedVal("@FILE reads a file"), "data-binary": deniedVal("@FILE reads a file"),
			"data-urlencode": deniedVal("@FILE reads a file"), "form": deniedVal("@FILE reads a file"),
			"cookie": deniedVal("reads cookies from a file"), "cookie-jar": deniedVal("writes a cookie jar"),
			"dump-header": deniedVal("writes a file"), "trace": deniedVal("writes a file"),
			"trace-ascii": deniedVal("writes a file"), "stderr": deniedVal("writes a file"),
			"location": denied("follows redirects the guard never sees"), "netrc-file": deniedVal("reads a file"),
			"unix-socket": deniedVal("connects to a local socket"),
		},
		operand: RoleURL,
	},
	"tar": {
		short: shorts("cxtvzjJaOkpW", map[byte]optSpec{
			'f': fileVal, 'C': fileVal, 'T': fileVal, 'X': fileVal,
			'I': deniedVal("runs a compression program"), 'F': deniedVal("runs a script"),
			'P': denied("keeps absolute names: extracts outside the directory"),
			'M': denied("multi-volume: runs a script"), 'h': denied("follows symlinks out of the tree"),
		}),
		long: map[string]optSpec{
			"create": flag, "extract": flag, "get": flag, "list": flag, "verbose": flag, "gzip": flag,
			"bzip2": flag, "xz": flag, "auto-compress": flag, "to-stdout": flag, "keep-old-files": flag,
			"file": fileVal, "directory": fileVal, "files-from": fileVal, "exclude-from": fileVal,
			"exclude": plainVal, "strip-components": plainVal,
			"to-command":           deniedVal("runs a program"),
			"checkpoint-action":    deniedVal("runs a program"),
			"checkpoint":           denied("with an action, runs a program"),
			"use-compress-program": deniedVal("runs a program"), "rsh-command": deniedVal("runs a program"),
			"rmt-command": deniedVal("runs a program"), "info-script": deniedVal("runs a script"),
			"new-volume-script": deniedVal("runs a script"), "absolute-names": denied("extracts outside the directory"),
			"dereference": denied("follows symlinks out of the tree"),
		},
		operand: RoleFile,
	},
	"find": {
		short: shorts("P", map[byte]optSpec{
			'L': denied("follows symlinks out of the tree"), 'H': denied("follows symlinks out of the tree"),
		}),
		long:    map[string]optSpec{},
		operand: RoleFile,
		findExpr: map[string]optSpec{
			"-name": plainVal, "-iname": plainVal, "-path": plainVal, "-ipath": plainVal, "-wholename": plainVal,
			"-regex": plainVal, "-iregex": plainVal, "-type": plainVal, "-xtype": plainVal, "-size": plainVal,
			"-mtime": plainVal, "-mmin": plainVal, "-atime": plainVal, "-amin": plainVal, "-ctime": plainVal,
			"-cmin": plainVal, "-maxdepth": plainVal, "-mindepth": plainVal, "-perm": plainVal,
			"-newer": fileVal, "-empty": flag, "-print": flag, "-print0": flag, "-prune": flag, "-quit": flag,
			"-not": flag, "!": flag, "-a": flag, "-and": flag, "-o": flag, "-or": flag, "(": flag, ")": flag,
			"-true": flag, "-false": flag, "-readable": flag, "-writable": flag, "-executable": flag,
			"-depth": flag, "-xdev": flag, "-mount": flag, "-noleaf": flag, "-ls": flag,
			"-exec": denied("runs a program"), "-execdir": denied("runs a program"), "-ok": denied("runs a program"),
			"-okdir": denied("runs a program"), "-delete": denied("deletes files"), "-fprint": denied("writes a file"),
			"-fprint0": denied("writes a file"), "-fprintf": denied("writes a file"), "-fls": denied("writes a file"),
			"-follow": denied("follows symlinks out of the tree"), "-files0-from": denied("reads a file"),
		},
	},
	"git": {
		short: map[byte]optSpec{
			'C': fileVal, 'P': flag,
			'c': deniedVal("sets configuration: core.fsmonitor, core.sshCommand, alias.x=!cmd run programs"),
		},
		long: map[string]optSpec{
			"version": flag, "help": flag, "no-pager": flag, "git-dir": fileVal, "work-tree": fileVal, "no-optional-locks": flag,
			"literal-pathspecs": flag, "no-replace-objects": flag, "bare": flag,
			"config-env": deniedVal("sets configuration from the environment"),
			"exec-path":  deniedVal("changes where git finds the programs it runs"),
		},
		operand: RoleFile,
		subs:    gitSubcommands,
	},
}

// ArgvWords reads the argument list args of program prog (its base name
// picks the option rules) and returns every word with its role, so that
// the caller can confine files to roots and destinations to the network
// allow-list. Options are understood as the program's parser understands
// them: "--opt=value" and "--opt value", short-option clusters ("-abc"),
// a value attached to a short option ("-fVALUE"), "--" ending the
// options. For the programs it knows (git, sort, date, find, tar, curl) an
// option outside the allow-list is ErrOption (for git, the allow-list of
// its subcommand: gitopts.go). For others, every option
// value and operand is returned as a file, and each tail of a short
// cluster too (in "-xVALUE" the program may read VALUE).
func ArgvWords(prog string, args []string) ([]Word, error) {
	base := prog
	if i := strings.LastIndexByte(base, '/'); i >= 0 {
		base = base[i+1:]
	}
	spec := programs[base]
	if spec == nil {
		// A name the allow-list reaches through a symlink (/usr/bin/gitx
		// -> git) gets the rules of the program it is.
		if p, err := exec.LookPath(prog); err == nil {
			if r, err := filepath.EvalSymlinks(p); err == nil {
				base = filepath.Base(r)
				spec = programs[base]
			}
		}
	}
	if why, ok := launchers[base]; ok && len(args) > 0 {
		return nil, fmt.Errorf("%w: %s %s", ErrOption, base, why)
	}
	if flags, ok := interpreters[base]; ok {
		if err := interpreterArgs(base, flags, args); err != nil {
			return nil, err
		}
	}
	if spec == nil {
		return genericWords(args), nil
	}
	return spec.words(base, args)
}

// launchers run the program their arguments name: an exec allow-list that
// admits one admits everything, so they take no arguments.
var launchers = map[string]string{
	"env": "runs another program", "timeout": "runs another program", "nice": "runs another program",
	"nohup": "runs another program", "xargs": "runs another program", "sudo": "runs another program",
	"su": "runs another program", "setsid": "runs another program", "stdbuf": "runs another program",
	"chroot": "runs another program", "nsenter": "runs another program", "flock": "runs another program",
	"watch": "runs another program", "busybox": "runs another program", "doas": "runs another program",
	"strace": "runs another program", "ltrace": "runs another program", "time": "runs another program",
	"awk": "runs the program given as its first operand (system())", "gawk": "runs the program given as its first operand (system())",
	"mawk": "runs the program given as its first operand (system())",
	"sed":  "runs its script, whose e command runs programs and w command writes files",
}

// interpreters run code given on their command line with these short
// options (or the long ones, for node).
var interpreters = map[string]string{
	"sh": "c", "bash": "c", "dash": "c", "zsh": "c", "ksh": "c", "ash": "c", "fish": "c",
	"python": "cm", "python3": "cm", "perl": "eEM", "ruby": "e", "node": "epr", "php": "r",
}

// interpreterArgs refuses the options with which an interpreter runs code
// from its command line (sh -c, python -c, node -e, ...), clustered or not.
func interpreterArgs(prog, flags string, args []string) error {
	for _, a := range args {
		if a == "--" || !strings.HasPrefix(a, "-") {
			break
		}
		if strings.HasPrefix(a, "--") {
			switch strings.SplitN(a, "=", 2)[0] {
			case "--eval", "--print", "--command", "--rcfile", "--init-file", "--require", "--import":
				return fmt.Errorf("%w: %s %s (runs code from the command line)", ErrOption, prog, a)
			}
			continue
		}
		if strings.ContainsAny(a[1:], flags) {
			return fmt.Errorf("%w: %s %s (runs code from the command line)", ErrOption, prog, a)
		}
	}
	return nil
}

// genericWords is ArgvWords for a program whose options are unknown: every
// word, every value after "=", and each tail of a short-option cluster may
// name a file.
func genericWords(args []string) []Word {
	var out []Word
	ended := false
	for _, a := range args {
		switch {
		case ended || !strings.HasPrefix(a, "-") || a == "-":
			out = append(out, Word{a, RoleFile})
		case a == "--":
			ended = true
		case strings.HasPrefix(a, "--"):
			if _, v, ok := strings.Cut(a, "="); ok {
				out = append(out, Word{v, RoleFile})
			}
		default:
			// "-fVALUE": any tail may be an attached value.
			for i := 2; i < len(a); i++ {
				out = append(out, Word{a[i:], RoleFile})
			}
			if _, v, ok := strings.Cut(a, "="); ok {
				out = append(out, Word{v, RoleFile})
			}
		}
	}
	return out
}

func (s *progSpec) words(prog string, args []string) ([]Word, error) {
	r := &argvReader{s: s, cur: s, prog: prog, args: args}
	for ; r.i < len(r.args); r.i++ {
		if err := r.word(r.args[r.i]); err != nil {
			return nil, err
		}
	}
	return r.out, nil
}

// argvReader reads one argument list by a program's spec, word by word:
// i is the word being read; a word that takes the next as its value
// advances i past it.
type argvReader struct {
	s      *progSpec
	prog   string
	args   []string
	i      int
	out    []Word
	sub    string    // the git subcommand, once read
	cur    *progSpec // the spec options are read by: s, or the subcommand's
	ended  bool      // after "--"
	inExpr bool      // inside find's expression
}

func (r *argvReader) deny(opt, why string) error {
	if r.sub != "" {
		return fmt.Errorf("%w: %s %s %s (%s)", ErrOption, r.prog, r.sub, opt, why)
	}
	return fmt.Errorf("%w: %s %s (%s)", ErrOption, r.prog, opt, why)
}

// next takes the word after the current one as opt's value.
func (r *argvReader) next(opt string, role int) error {
	if r.i+1 >= len(r.args) {
		return r.deny(opt, "missing value")
	}
	r.i++
	r.out = append(r.out, Word{r.args[r.i], role})
	return nil
}

func (r *argvReader) word(a string) error {
	s := r.s
	switch {
	case s.findExpr != nil && !r.ended && (r.inExpr || isFindPrimary(a)):
		return r.findPrimary(a)
	case r.prog == "tar" && r.i == 0 && !strings.HasPrefix(a, "-"):
		// Old-style "tar cvf FILE DIR": letters, each value-taking
		// one consuming the next word in order.
		n, w, err := s.oldStyle(r.prog, a, r.args[1:])
		if err != nil {
			return err
		}
		r.out = append(r.out, w...)
		r.i += n
		return nil
	case r.ended || !strings.HasPrefix(a, "-") || a == "-":
		if s.subs != nil && r.sub == "" {
			sub, ok := s.subs[a]
			if !ok {
				return r.deny(a, "subcommand not allowed")
			}
			r.sub, r.cur = a, sub
			return nil
		}
		if r.sub != "" && remoteHelper.MatchString(a) {
			// "NAME::ADDRESS" makes git run git-remote-NAME (ext:: runs
			// any command).
			return r.deny(a, "runs a remote helper program")
		}
		r.out = append(r.out, Word{a, r.cur.operand})
		return nil
	case a == "--":
		r.ended = true
		return nil
	case strings.HasPrefix(a, "--"):
		return r.long(a)
	}
	return r.shortCluster(a)
}

func (r *argvReader) findPrimary(a string) error {
	r.inExpr = true
	o, ok := r.s.findExpr[a]
	if !ok {
		return r.deny(a, "not an allowed find expression")
	}
	if o.deny != "" {
		return r.deny(a, o.deny)
	}
	if o.value {
		return r.next(a, o.role)
	}
	return nil
}

func (r *argvReader) long(a string) error {
	name, val, hasVal := strings.Cut(a[2:], "=")
	o, ok := r.cur.long[name]
	if !ok && r.cur.negatable && !hasVal {
		// "--no-NAME" turns off what "--NAME" turns on.
		if p, neg := r.cur.long[strings.TrimPrefix(name, "no-")]; neg && strings.HasPrefix(name, "no-") &&
			p.deny == "" && (!p.value || p.optional) {
			return nil
		}
	}
	if !ok {
		return r.deny("--"+name, "not in the allow-list")
	}
	if o.deny != "" {
		return r.deny("--"+name, o.deny)
	}
	switch {
	case o.value && hasVal:
		r.out = append(r.out, Word{val, o.role})
	case o.value && !o.optional:
		return r.next("--"+name, o.role)
	case hasVal:
		// The program will refuse it; confine it meanwhile.
		r.out = append(r.out, Word{val, RoleFile})
	}
	return nil
}

// shortCluster reads flags, then at most one option that takes the rest
// of the word (or the next word) as its value.
func (r *argvReader) shortCluster(a string) error {
	for j := 1; j < len(a); j++ {
		c := a[j]
		o, ok := r.cur.short[c]
		if !ok {
			return r.deny("-"+string(c), "not in the allow-list")
		}
		if o.deny != "" {
			return r.deny("-"+string(c), o.deny)
		}
		if !o.value {
			continue
		}
		if j+1 < len(a) {
			r.out = append(r.out, Word{a[j+1:], o.role})
		} else if !o.optional {
			return r.next("-"+string(c), o.role)
		}
		return nil
	}
	return nil
}

// oldStyle reads tar's old-style first word (letters without a dash) and
// the values it takes from rest; it returns how many of rest it used.
func (s *progSpec) oldStyle(prog, a string, rest []string) (int, []Word, error) {
	var out []Word
	n := 0
	for j := 0; j < len(a); j++ {
		o, ok := s.short[a[j]]
		if !ok {
			return 0, nil, fmt.Errorf("%w: %s -%c (not in the allow-list)", ErrOption, prog, a[j])
		}
		if o.deny != "" {
			return 0, nil, fmt.Errorf("%w: %s -%c (%s)", ErrOption, prog, a[j], o.deny)
		}
		if o.value {
			if n >= len(rest) {
				return 0, nil, fmt.Errorf("%w: %s -%c (missing value)", ErrOption, prog, a[j])
			}
			out = append(out, Word{rest[n], o.role})
			n++
		}
	}
	return n, out, nil
}

// remoteHelper is git's "<transport>::<address>" remote syntax.
var remoteHelper = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*::`)

// isFindPrimary reports whether a starts find's expression.
func isFindPrimary(a string) bool {
	return a == "!" || a == "(" || a == ")" || (strings.HasPrefix(a, "-") && len(a) > 2 && a != "--")
}
