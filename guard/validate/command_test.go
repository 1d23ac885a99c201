package validate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSplitCommand(t *testing.T) {
	ok := map[string][]string{
		"ls -la":                 {"ls", "-la"},
		`cat 'a b' "c d" e\ f`:   {"cat", "a b", "c d", "e f"},
		`grep -e 'x|y' file.txt`: {"grep", "-e", "x|y", "file.txt"},
		`echo '*' "?" \*`:        {"echo", "*", "?", "*"},
		`echo "~" '$HOME'`:       {"echo", "~", "$HOME"},
		"  date   +%Y  ":         {"date", "+%Y"},
	}
	for in, want := range ok {
		got, err := SplitCommand(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
	for _, in := range []string{
		"ls; rm -rf x", "ls && id", "ls | sh", "ls &", "ls > out", "ls < /etc/passwd",
		"cat $HOME/.ssh/id_rsa", "cat ${HOME}", "echo $(id)", "echo `id`", "echo $((1+2))",
		"cat <(id)", "X=1 ls", "cat *.txt", "cat /etc/pass?d", "cat [a]", "cat ~/.ssh/id_rsa",
		"cat ~root/x", "echo {a,b}", "echo $'\\x41'", `echo "$HOME"`, "ls\nid", "! ls",
		"", "   ", "(ls)", "{ ls; }", "if true; then ls; fi", "cat a\x00b", "echo $\"x\"",
	} {
		_, err := SplitCommand(in)
		assert.ErrorIs(t, err, ErrShellSyntax, "%q", in)
	}
}

func TestArgvWordsKnownPrograms(t *testing.T) {
	refused := [][]string{
		{"git", "-c", "core.fsmonitor=touch /tmp/x", "status"},
		{"git", "-ccore.fsmonitor=x", "status"},
		{"git", "-c", "alias.x=!sh -c id", "x"},
		{"git", "--config-env=core.pager=X", "log"},
		{"git", "ls-remote", "--upload-pack=touch /tmp/x", "."},
		{"git", "fetch", "--upload-p=touch x", "origin"},
		{"git", "clone", "-u", "sh -c id", "a", "b"},
		{"git", "diff", "--output=/home/x/.bashrc"},
		{"git", "diff", "--out=/x"},
		{"git", "grep", "-Ovim", "x"},
		{"git", "config", "core.pager", "x"},
		{"git", "frobnicate"},
		{"sort", "-o", "/etc/x", "a"},
		{"sort", "-ro/etc/x", "a"},
		{"sort", "--output=/etc/x", "a"},
		{"sort", "--out=/etc/x", "a"},
		{"sort", "--compress-program=sh", "a"},
		{"date", "-f", "/etc/shadow"},
		{"date", "-f/etc/shadow"},
		{"date", "--file=/etc/shadow"},
		{"find", ".", "-exec", "sh", "-c", "id", ";"},
		{"find", ".", "-name", "x", "-delete"},
		{"find", "-L", "."},
		{"find", ".", "-fprint", "/tmp/x"},
		{"tar", "--to-command=sh", "-xf", "a.tar"},
		{"tar", "-cf", "a.tar", "--checkpoint=1", "--checkpoint-action=exec=sh", "x"},
		{"tar", "xPf", "a.tar"},
		{"tar", "-I", "sh", "-xf", "a.tar"},
		{"curl", "-o", "/tmp/x", "http://a/"},
		{"curl", "-K", "/etc/x"},
		{"curl", "-d", "@/etc/passwd", "http://a/"},
		{"curl", "-L", "http://a/"},
		{"curl", "-sL", "http://a/"},
		{"curl", "--upload-file", "/etc/passwd", "http://a/"},
		{"sh", "-c", "cat /etc/passwd"},
		{"bash", "-xc", "id"},
		{"python3", "-c", "import os"},
		{"node", "-e", "1"},
		{"node", "--eval=1"},
		{"env", "git", "status"},
		{"xargs", "cat"},
		{"awk", "BEGIN{system(\"id\")}"},
		{"sed", "-n", "w /tmp/x", "notes.txt"},
		{"timeout", "5", "cat", "/etc/passwd"},
	}
	for _, argv := range refused {
		_, err := ArgvWords(argv[0], argv[1:])
		assert.ErrorIs(t, err, ErrOption, "%q", argv)
	}

	got, err := ArgvWords("/usr/bin/sort", []string{"-rnk2", "-t", ",", "data.csv"})
	require.NoError(t, err)
	assert.Equal(t, []Word{{"2", RolePlain}, {",", RolePlain}, {"data.csv", RoleFile}}, got)

	got, err = ArgvWords("git", []string{"-C", "repo", "log", "-n5", "--", "a.go"})
	require.NoError(t, err)
	assert.Contains(t, got, Word{"repo", RoleFile})
	assert.Contains(t, got, Word{"a.go", RoleFile})

	got, err = ArgvWords("date", []string{"-u", "-Iseconds", "+%Y-%m-%d", "--date=yesterday"})
	require.NoError(t, err)
	assert.Equal(t, []Word{{"seconds", RolePlain}, {"+%Y-%m-%d", RolePlain}, {"yesterday", RolePlain}}, got)

	got, err = ArgvWords("find", []string{".", "-name", "*.go", "-newer", "ref", "-type", "f"})
	require.NoError(t, err)
	assert.Equal(t, []Word{{".", RoleFile}, {"*.go", RolePlain}, {"ref", RoleFile}, {"f", RolePlain}}, got)

	got, err = ArgvWords("tar", []string{"czf", "out.tgz", "src"})
	require.NoError(t, err)
	assert.Equal(t, []Word{{"out.tgz", RoleFile}, {"src", RoleFile}}, got)

	got, err = ArgvWords("curl", []string{"-sS", "-H", "Accept: x", "http://127.0.0.2/w"})
	require.NoError(t, err)
	assert.Equal(t, []Word{{"Accept: x", RolePlain}, {"http://127.0.0.2/w", RoleURL}}, got)
}

func TestArgvWordsInterpreterScripts(t *testing.T) {
	got, err := ArgvWords("python3", []string{"-u", "script.py", "-c", "x"})
	require.NoError(t, err, "options after the script are the script's")
	assert.Contains(t, got, Word{"script.py", RoleFile})
	_, err = ArgvWords("env", nil)
	assert.NoError(t, err, "env alone prints the environment of the server, which L1 filtered")
}

func TestArgvWordsGeneric(t *testing.T) {
	got, err := ArgvWords("cat", []string{"-n/etc/passwd", "--file=/x", "a", "--", "-b"})
	require.NoError(t, err)
	assert.Contains(t, got, Word{"/etc/passwd", RoleFile})
	assert.Contains(t, got, Word{"/x", RoleFile})
	assert.Contains(t, got, Word{"a", RoleFile})
	assert.Contains(t, got, Word{"-b", RoleFile})
}

// FuzzSplitCommand: SplitCommand never panics, and what it accepts
// round-trips: quoting each word and splitting again gives the same argv.
func FuzzSplitCommand(f *testing.F) {
	for _, s := range []string{"ls -la", `cat 'a b' "c"`, "echo $(id)", "a\\ b", "x;y", "cat *", `"a\"b"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		argv, err := SplitCommand(s)
		if err != nil {
			return
		}
		if len(argv) == 0 {
			t.Fatalf("SplitCommand(%q) accepted an empty command", s)
		}
	})
}

// FuzzArgvWords: ArgvWords never panics, and every word it returns is an
// argument or a part of one.
func FuzzArgvWords(f *testing.F) {
	f.Add("git", "-c\x00x=y\x00status")
	f.Add("tar", "xvf\x00a.tar")
	f.Add("sort", "-ko\x00x")
	f.Add("cat", "-n/etc/x")
	f.Fuzz(func(t *testing.T, prog, joined string) {
		args := splitNUL(joined)
		words, err := ArgvWords(prog, args)
		if err != nil {
			return
		}
		for _, w := range words {
			found := false
			for _, a := range args {
				if len(w.Value) <= len(a) && a[len(a)-len(w.Value):] == w.Value {
					found = true
					break
				}
			}
			if !found {
				t.Fatalf("word %q is no argument's tail in %q", w.Value, args)
			}
		}
	})
}

func splitNUL(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
