//go:build linux

// Command vminit is the /init of the VM that `mcpguard vm` boots. It is built
// statically (CGO_ENABLED=0) by the runner and packed into the initramfs with
// the kernel modules it needs.
//
// It loads the modules, receives a vmproto.Request on the control port,
// mounts the host's root (9p, read-only) with fresh proc, sys, securityfs,
// bpffs, cgroup2, devtmpfs and tmpfs on top, makes it the root, runs the
// command with its stdout and stderr on their own ports, reports the exit
// status, waits for the host's ack and powers off.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpguard/mcpguard/lab/vm/vmproto"
)

const (
	newRoot     = "/newroot"
	scratch     = "/scratch" // tmpfs for overlay upper and work dirs
	moduleDir   = "/modules"
	portTimeout = 20 * time.Second
	ackTimeout  = 60 * time.Second
	drainDelay  = 2 * time.Second
)

func main() {
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "vminit: this is the init of `mcpguard vm`'s VM; it runs only as PID 1")
		os.Exit(2)
	}
	if err := run(); err != nil {
		// The console is the last resort: the host shows its tail.
		fmt.Fprintf(os.Stderr, "vminit: %v\n", err)
	}
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	// Reboot only returns on failure; PID 1 must not exit.
	select {}
}

func run() error {
	for _, m := range []struct{ src, dst, fstype string }{
		{"devtmpfs", "/dev", "devtmpfs"},
		{"proc", "/proc", "proc"},
		{"sysfs", "/sys", "sysfs"},
	} {
		if err := mount(m.src, m.dst, m.fstype, 0, ""); err != nil {
			return err
		}
	}
	trace("mounted")
	if err := loadModules(moduleDir); err != nil {
		return err
	}
	trace("modules loaded")
	ctl, err := openPort(vmproto.PortControl, os.O_RDWR)
	if err != nil {
		return err
	}
	trace("control port open")
	defer ctl.Close()
	lines := vmproto.NewScanner(ctl)
	report := func(m vmproto.Message) {
		m.Uptime = uptime()
		if err := vmproto.WriteJSON(ctl, m); err != nil {
			fmt.Fprintf(os.Stderr, "vminit: report %s: %v\n", m.Kind, err)
		}
	}
	status, counts, err := serve(lines, report)
	if err != nil {
		report(vmproto.Message{Kind: vmproto.KindError, Error: err.Error()})
		return err
	}
	report(vmproto.Message{Kind: vmproto.KindExit, Status: status, Stdout: counts[0], Stderr: counts[1]})
	// Power off only when the host has every byte: data still queued in
	// a port would be lost.
	acked := make(chan struct{})
	go func() {
		for lines.Scan() {
			if lines.Text() == vmproto.Ack {
				break
			}
		}
		close(acked)
	}()
	select {
	case <-acked:
		trace("acked")
		return nil
	case <-time.After(ackTimeout):
		return errors.New("no ack from the host")
	}
}

// serve reads the request, sets up the root and runs the command.
func serve(lines *bufio.Scanner, report func(vmproto.Message)) (int, [2]int64, error) {
	req, err := vmproto.ReadRequest(lines)
	if err != nil {
		return 0, [2]int64{}, err
	}
	trace("request read")
	if err := setupRoot(req); err != nil {
		return 0, [2]int64{}, err
	}
	trace("root ready")
	return runCommand(req, report)
}

// trace notes a step on the console with the guest's uptime: the console
// is shown with --debug, and its tail when the VM fails.
func trace(step string) {
	fmt.Fprintf(os.Stderr, "vminit: %.3fs %s\n", uptime(), step)
}
