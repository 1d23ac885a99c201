// Package stage runs one step of a long job (make bench) as a child
// process and shows how far along it is: the step's name, what is done of
// what it has to do (counted from the lines the child prints), the time
// spent and an estimate of what is left. It keeps the child's output in
// files and records the step's wall and CPU time.
package stage

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"time"
)

// Stage is one step and how to count its progress.
type Stage struct {
	// Name is shown on every progress line ("3/7 VM eval").
	Name string
	// Total is how many units the step has to do (0: unknown, no
	// estimate); Unit names them ("cases", "runs").
	Total int
	Unit  string
	// Done counts a unit for each line of the child's output that
	// matches it; Skip counts SkipUnits for each line that matches it (a
	// config skipped with all its cases).
	Done, Skip *regexp.Regexp
	SkipUnits  int
	// Every is how often a progress line is printed when Progress is not
	// a terminal (a terminal gets one line, redrawn every second).
	Every time.Duration
}

// Result is what a finished step took.
type Result struct {
	Wall, CPU time.Duration
	Done      int
	Err       error
}

// meter counts units and draws progress lines.
type meter struct {
	mu    sync.Mutex
	s     Stage
	start time.Time
	done  int
	out   io.Writer
	tty   bool
}

func (m *meter) line(l string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.s.Done != nil && m.s.Done.MatchString(l):
		m.done++
	case m.s.Skip != nil && m.s.Skip.MatchString(l):
		m.done += m.s.SkipUnits
	}
}

// Progress formats the state after elapsed: done of total, the time
// spent, and what is left at the rate so far.
func Progress(name string, done, total int, unit string, elapsed time.Duration) string {
	s := fmt.Sprintf("[%s] %d", name, done)
	if total > 0 {
		s += fmt.Sprintf("/%d", total)
	}
	s += " " + unit + ", " + Round(elapsed)
	switch {
	case total <= 0:
	case done >= total:
		s += ", finishing"
	case done == 0:
		s += ", estimating what is left"
	default:
		left := time.Duration(float64(elapsed) / float64(done) * float64(total-done))
		s += ", ~" + Round(left) + " left"
	}
	return s
}

// Round formats d in minutes and seconds.
func Round(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Minute {
		return d.String()
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

func (m *meter) show() {
	m.mu.Lock()
	p := Progress(m.s.Name, m.done, m.s.Total, m.s.Unit, time.Since(m.start))
	m.mu.Unlock()
	if m.tty {
		fmt.Fprintf(m.out, "\r\033[K%s", p)
	} else {
		fmt.Fprintln(m.out, p)
	}
}

// Run runs argv, its standard output into stdout and its standard error
// into stderr (either may be nil: discarded), counting progress on both,
// with progress lines on progress. It returns when the child has ended.
func Run(s Stage, argv []string, stdout, stderr, progress io.Writer, tty bool) Result {
	m := &meter{s: s, start: time.Now(), out: progress, tty: tty}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = os.Stdin
	var wg sync.WaitGroup
	pipe := func(dst io.Writer) (io.Writer, func()) {
		pr, pw := io.Pipe()
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(pr)
			sc.Buffer(make([]byte, 64<<10), 16<<20)
			for sc.Scan() {
				if dst != nil {
					fmt.Fprintln(dst, sc.Text())
				}
				m.line(sc.Text())
			}
			io.Copy(io.Discard, pr) // a line too long to scan: drain the rest
		}()
		return pw, func() { pw.Close() }
	}
	var closeOut, closeErr func()
	cmd.Stdout, closeOut = pipe(stdout)
	cmd.Stderr, closeErr = pipe(stderr)
	every := s.Every
	if tty || every <= 0 {
		every = time.Second
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	if err := cmd.Start(); err != nil {
		closeOut()
		closeErr()
		wg.Wait()
		return Result{Err: fmt.Errorf("start %s: %w", argv[0], err)}
	}
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }()
	var err error
	for waiting := true; waiting; {
		select {
		case err = <-ended:
			waiting = false
		case <-tick.C:
			m.show()
		}
	}
	closeOut()
	closeErr()
	wg.Wait()
	if tty {
		fmt.Fprint(progress, "\r\033[K")
	}
	res := Result{Wall: time.Since(m.start), Done: m.done, Err: err}
	if ps := cmd.ProcessState; ps != nil {
		res.CPU = ps.UserTime() + ps.SystemTime()
	}
	return res
}
