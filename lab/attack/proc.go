//go:build linux

package attack

import (
	"fmt"
	"maps"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ProcSteps are the attacks on what a process inherits or shares with
// the host (issue 31): descriptors, System V IPC, namespaces, identity.
// Like Steps, each prints what it obtained ("leak ...") and judges
// nothing.
func ProcSteps() map[string]func(string) error {
	m := ipcSteps()
	maps.Copy(m, loadSteps())
	return m
}

// ipcSteps: descriptors, System V IPC, files, namespaces.
func ipcSteps() map[string]func(string) error {
	return map[string]func(string) error{
		// fds: reads every descriptor above standard error from its start
		// and prints what it names and holds.
		"fds": func(string) error {
			ents, err := os.ReadDir("/proc/self/fd")
			if err != nil {
				return err
			}
			for _, e := range ents {
				fd, err := strconv.Atoi(e.Name())
				if err != nil || fd <= 2 {
					continue
				}
				target, _ := os.Readlink("/proc/self/fd/" + e.Name())
				buf := make([]byte, 256)
				n, _ := unix.Pread(fd, buf, 0)
				fmt.Printf("leak fd %d %s %s\n", fd, target, strings.TrimSpace(string(buf[:max(n, 0)])))
			}
			return nil
		},
		// shmat:ID attaches the System V shared memory segment ID and
		// prints its first bytes.
		"shmat": func(arg string) error {
			id, _ := strconv.Atoi(arg)
			b, err := unix.SysvShmAttach(id, 0, unix.SHM_RDONLY)
			if err != nil {
				return err
			}
			fmt.Printf("leak %s\n", strings.TrimRight(string(b[:min(64, len(b))]), "\x00"))
			return unix.SysvShmDetach(b)
		},
		// msgq:KEY creates a System V message queue with KEY, open to all,
		// and leaves a message in it: where the IPC namespace is the
		// host's, it outlives the server and any host process can read it.
		"msgq": func(arg string) error {
			key, _ := strconv.ParseInt(arg, 0, 32)
			id, _, e := unix.Syscall(unix.SYS_MSGGET, uintptr(key), unix.IPC_CREAT|0o666, 0)
			if e != 0 {
				return e
			}
			msg := append([]byte{1, 0, 0, 0, 0, 0, 0, 0}, "left behind"...)
			if _, _, e := unix.Syscall6(unix.SYS_MSGSND, id, uintptr(unsafe.Pointer(&msg[0])), uintptr(len(msg)-8), unix.IPC_NOWAIT, 0, 0); e != 0 {
				return e
			}
			return nil
		},
		// create:PATH#TEXT creates PATH (it must not exist) with TEXT.
		"create": func(arg string) error {
			path, text, _ := strings.Cut(arg, "#")
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteString(text)
			return err
		},
	}
}

// loadSteps: threads and memory without end.
func loadSteps() map[string]func(string) error {
	return map[string]func(string) error{
		// threads:N starts N OS threads that block, printing how many the
		// process has (/proc/self/status) every 20.
		"threads": func(arg string) error {
			n, _ := strconv.Atoi(arg)
			for i := 1; i <= n; i++ {
				go func() {
					runtime.LockOSThread()
					time.Sleep(time.Hour)
				}()
				if i%20 == 0 {
					time.Sleep(5 * time.Millisecond)
					st, _ := os.ReadFile("/proc/self/status")
					for _, l := range strings.Split(string(st), "\n") {
						if v, ok := strings.CutPrefix(l, "Threads:"); ok {
							fmt.Printf("threads %s\n", strings.TrimSpace(v))
						}
					}
				}
			}
			time.Sleep(time.Second)
			return nil
		},
		// alloc:N allocates N MiB and touches every page.
		"alloc": func(arg string) error {
			n, _ := strconv.Atoi(arg)
			var keep [][]byte
			for i := 1; i <= n; i++ {
				b := make([]byte, 1<<20)
				for j := 0; j < len(b); j += 4096 {
					b[j] = 1
				}
				keep = append(keep, b)
				if i%64 == 0 {
					fmt.Printf("alloc %d MiB\n", i)
				}
			}
			runtime.KeepAlive(keep)
			return nil
		},
		// ns: prints the namespaces, host name, cgroup and identity the
		// process has.
		"ns": func(string) error {
			for _, n := range []string{"ipc", "uts", "cgroup", "mnt", "pid", "net", "user"} {
				l, _ := os.Readlink("/proc/self/ns/" + n)
				fmt.Printf("ns %s %s\n", n, l)
			}
			h, _ := os.Hostname()
			fmt.Printf("hostname %s\n", h)
			cg, _ := os.ReadFile("/proc/self/cgroup")
			for _, l := range strings.Split(strings.TrimSpace(string(cg)), "\n") {
				fmt.Printf("cgroup %s\n", l)
			}
			fmt.Printf("ids %d %d %d %d\n", os.Getuid(), os.Geteuid(), os.Getgid(), os.Getegid())
			return nil
		},
	}
}
