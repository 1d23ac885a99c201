// Command stage runs one step of make bench (scripts/bench.sh) and shows
// its progress on standard error: the step, what is done of what it has
// to do, the time spent and an estimate of what is left.
//
//	stage --name "3/7 VM eval" --total 568 --unit cases --done '^\[[^]]+\] [0-9]+/' \
//	      --stdout eval.json --stderr eval.txt --times stages.txt -- CMD ARGS...
//
// The child's standard output and error go to the files named (the
// error's tail is shown when the child fails); --times gets a line
// `NAME: W s wall, C s CPU` (the CPU time of the child and every process
// it waited for). The exit status is the child's.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/mcpguard/mcpguard/lab/stage"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("stage", flag.ContinueOnError)
	var s stage.Stage
	fs.StringVar(&s.Name, "name", "stage", "the step's `name` on its progress lines")
	fs.IntVar(&s.Total, "total", 0, "units to do (0: unknown)")
	fs.StringVar(&s.Unit, "unit", "done", "what a unit is called")
	done := fs.String("done", "", "a line matching this `regexp` (on stdout or stderr) is one unit done")
	skip := fs.String("skip", "", "a line matching this `regexp` is --skip-units units done")
	fs.IntVar(&s.SkipUnits, "skip-units", 0, "units a --skip line counts for")
	fs.DurationVar(&s.Every, "every", 30*time.Second, "progress line interval when stderr is not a terminal")
	stdoutFile := fs.String("stdout", "", "`file` for the child's standard output (default: ours)")
	stderrFile := fs.String("stderr", "", "`file` for the child's standard error (default: ours)")
	times := fs.String("times", "", "append the step's wall and CPU time to `file`")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "stage: no command after the flags")
		return 2
	}
	var err error
	if s.Done, err = compile(*done); err == nil {
		s.Skip, err = compile(*skip)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "stage:", err)
		return 2
	}
	stdout, closeOut, err := open(*stdoutFile, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stage:", err)
		return 1
	}
	defer closeOut()
	stderr, closeErr, err := open(*stderrFile, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stage:", err)
		return 1
	}
	defer closeErr()
	fi, err := os.Stderr.Stat()
	tty := err == nil && fi.Mode()&os.ModeCharDevice != 0
	res := stage.Run(s, fs.Args(), stdout, stderr, os.Stderr, tty)
	summary := fmt.Sprintf("%.0f s wall, %.0f s CPU", res.Wall.Seconds(), res.CPU.Seconds())
	if s.Total > 0 {
		summary += fmt.Sprintf(", %d %s", res.Done, s.Unit)
	}
	fmt.Fprintf(os.Stderr, "[%s] %s in %s (%s)\n", s.Name, status(res.Err), stage.Round(res.Wall), summary)
	if *times != "" {
		if err := appendLine(*times, s.Name+": "+summary); err != nil {
			fmt.Fprintln(os.Stderr, "stage:", err)
		}
	}
	if res.Err != nil {
		if *stderrFile != "" {
			closeErr()
			showTail(*stderrFile, 25)
		}
		var ee *exec.ExitError
		if errors.As(res.Err, &ee) && ee.ExitCode() > 0 {
			return ee.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "stage:", res.Err)
		return 1
	}
	return 0
}

func status(err error) string {
	if err != nil {
		return "FAILED (" + err.Error() + ")"
	}
	return "done"
}

func compile(re string) (*regexp.Regexp, error) {
	if re == "" {
		return nil, nil
	}
	return regexp.Compile(re)
}

// open returns the file to write to (created), or def when path is empty.
func open(path string, def io.Writer) (io.Writer, func(), error) {
	if path == "" {
		return def, func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	once := false
	return f, func() {
		if !once {
			once = true
			f.Close()
		}
	}, nil
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// showTail prints the last n lines of path on stderr.
func showTail(path string, n int) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		if lines = append(lines, sc.Text()); len(lines) > n {
			lines = lines[1:]
		}
	}
	fmt.Fprintf(os.Stderr, "--- last lines of %s:\n%s\n", path, strings.Join(lines, "\n"))
}
