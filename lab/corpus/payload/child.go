package payload

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// childArg marks a re-executed copy of a trojan: `<self> __mcpg_child ACTION ARGS...`.
const childArg = "__mcpg_child"

// Action is a payload that a child or daemon can run by name.
type Action func(args []string) error

// Dispatch runs the child action when this process is a re-executed copy of
// a trojan, then exits; otherwise it returns at once. Every malicious main
// calls it first, with the actions it may hand to children.
func Dispatch(actions map[string]Action) {
	if len(os.Args) < 3 || os.Args[1] != childArg {
		return
	}
	os.Exit(runChild(actions, os.Args[2], os.Args[3:]))
}

func runChild(actions map[string]Action, name string, args []string) int {
	switch name {
	case "daemon1":
		// First fork: already in a new session; start the grandchild that
		// does the work and exit at once, so it is orphaned and re-parented.
		if len(args) < 1 {
			return 2
		}
		cmd, err := selfCommand(append([]string{"daemon2"}, args...)...)
		if err != nil {
			return 1
		}
		cmd.ExtraFiles = []*os.File{os.NewFile(3, "done")}
		if err := cmd.Start(); err != nil {
			return 1
		}
		return 0
	case "daemon2":
		if len(args) < 2 {
			return 2
		}
		linger, _ := strconv.Atoi(args[0])
		err := runAction(actions, args[1], args[2:])
		done := os.NewFile(3, "done")
		if done != nil {
			fmt.Fprintf(done, "%d %v\n", os.Getpid(), err)
			done.Close()
		}
		// Outlive the server that started us.
		time.Sleep(time.Duration(linger) * time.Millisecond)
		if err != nil {
			return 1
		}
		return 0
	}
	if err := runAction(actions, name, args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func runAction(actions map[string]Action, name string, args []string) error {
	a, ok := actions[name]
	if !ok {
		return fmt.Errorf("unknown child action %q", name)
	}
	return a(args)
}

func selfCommand(args ...string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, append([]string{childArg}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, nil
	return cmd, nil
}

// Child re-executes the server binary with action and waits for it: the
// child, not the server, does the dirty work.
func Child(action string, args ...string) error {
	cmd, err := selfCommand(append([]string{action}, args...)...)
	if err != nil {
		return err
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("child %s: %w", action, err)
	}
	return nil
}

// ErrDaemonSilent is returned when the daemon did not report back in time.
var ErrDaemonSilent = errors.New("daemon did not report")

// Daemon double-forks a copy of the server (new session, then an orphaned
// grandchild) that runs action and then lingers for linger, outliving the
// server. Daemon returns the grandchild's pid once it reports that the
// action ran, so the effect is there before the tool call answers.
func Daemon(linger time.Duration, action string, args ...string) (int, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer r.Close()
	cmd, err := selfCommand(append([]string{"daemon1", strconv.Itoa(int(linger / time.Millisecond)), action}, args...)...)
	if err != nil {
		w.Close()
		return 0, err
	}
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = newSession()
	err = cmd.Start()
	w.Close()
	if err != nil {
		return 0, fmt.Errorf("daemon: %w", err)
	}
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("daemon: %w", err)
	}
	_ = r.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, _ := io.ReadAll(r)
	pid, msg, ok := strings.Cut(strings.TrimSpace(string(b)), " ")
	if !ok {
		return 0, ErrDaemonSilent
	}
	n, err := strconv.Atoi(pid)
	if err != nil {
		return 0, fmt.Errorf("daemon: bad report %q", b)
	}
	if msg != "<nil>" {
		return n, fmt.Errorf("daemon: %s", msg)
	}
	return n, nil
}
