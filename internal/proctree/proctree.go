// Package proctree supervises a process and every process it starts: one
// group (a process group on unix, a Job Object on Windows) that is stopped
// as a whole, so that nothing the server started outlives the session.
package proctree

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"
)

// Group is a started command and its descendants.
type Group struct {
	cmd  *exec.Cmd
	pid  int
	done chan struct{} // closed when the command was reaped
	err  error         // its exit status, once done is closed
	sys  groupSys      // the platform's handle on the group
}

// Prepare makes cmd start as the leader of a group of its own. Call it
// before hooks that change cmd.SysProcAttr further, and before Start.
func Prepare(cmd *exec.Cmd) { prepare(cmd) }

// Pipe returns w as a writer that os/exec copies to through a pipe: a
// process given it never holds w's descriptor (a terminal, on which it
// could read keystrokes or type commands, or a file it could seek in).
func Pipe(w io.Writer) io.Writer {
	if _, ok := w.(*os.File); ok {
		return struct{ io.Writer }{w}
	}
	return w
}

// Start starts cmd (made ready by Prepare) and puts it under supervision.
// On an error nothing was left running.
func Start(cmd *exec.Cmd) (*Group, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	g := &Group{cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{})}
	if err := g.sys.attach(cmd); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("put the process in a group: %w", err)
	}
	go func() {
		g.err = cmd.Wait()
		close(g.done)
	}()
	return g, nil
}

// Pid is the command's process id.
func (g *Group) Pid() int { return g.pid }

// Done is closed once the command exited and was reaped.
func (g *Group) Done() <-chan struct{} { return g.done }

// Err is the command's exit status (as exec.Cmd.Wait returns it), valid
// once Done is closed.
func (g *Group) Err() error { return g.err }

// Kill stops every process of the group at once (SIGKILL, or terminating
// the Job). Processes that already left are not an error.
func (g *Group) Kill() error { return g.sys.kill(g.pid) }

// Stop ends the command the way a polite supervisor does: it first calls
// hangUp (which should close the command's stdin, the MCP way of asking a
// server to stop), waits up to grace, then asks the group to terminate
// (SIGTERM; where there is no such signal, this step is skipped), waits up
// to grace again, and then kills it. Whatever is left of the group is
// killed in every case, and the command is reaped. It returns the
// command's exit status.
func (g *Group) Stop(grace time.Duration, hangUp func()) error {
	if hangUp != nil {
		hangUp()
	}
	if !g.wait(grace) {
		if g.sys.terminate(g.pid) == nil {
			g.wait(grace)
		}
	}
	g.Kill()
	<-g.done
	// The leader is gone; a child that left the group's leader behind is
	// killed now as well (its group id is still the leader's pid).
	g.Kill()
	g.sys.close()
	return g.err
}

// Close kills the rest of the group after the command exited on its own
// and releases the group's handle.
func (g *Group) Close() {
	g.Kill()
	g.sys.close()
}

func (g *Group) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-g.done:
		return true
	case <-t.C:
		return false
	}
}

// errNoTerminate: the platform has no polite way to ask a group to stop.
var errNoTerminate = errors.New("no terminate signal on this platform")
