//go:build linux

// Package attack holds the containment attacks of the edge tests (issue
// #18), shared by the Landlock tests on the host and the BPF LSM tests in
// the VM: a test binary runs them as the guarded server. Each judges
// nothing itself: it does the attack and prints what it got, and the test
// looks for its canary at a sink it owns, in this output, or in the files.
package attack

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Steps returns the attack steps by name; each takes one argument and
// prints what it obtained ("leak ..."), so a canary in the output is a
// successful attack.
func Steps() map[string]func(string) error {
	return map[string]func(string) error{
		"maptamper": MapTamper,
		// leakfile:PATH reads PATH and prints it.
		"leakfile": func(p string) error {
			b, err := os.ReadFile(p)
			if err == nil {
				fmt.Printf("leak %s\n", strings.TrimSpace(string(b)))
			}
			return err
		},
		"uringudp": URingUDP,
		// ptrace:PID attaches to PID (and detaches).
		"ptrace": func(arg string) error {
			pid, _ := strconv.Atoi(arg)
			if err := unix.PtraceAttach(pid); err != nil {
				return err
			}
			return unix.PtraceDetach(pid)
		},
		// vmread:PID@ADDR#LEN reads another process's memory and prints it.
		"vmread": func(arg string) error {
			pidS, rest, _ := strings.Cut(arg, "@")
			addrS, lenS, _ := strings.Cut(rest, "#")
			pid, _ := strconv.Atoi(pidS)
			addr, _ := strconv.ParseUint(addrS, 0, 64)
			n, _ := strconv.Atoi(lenS)
			buf := make([]byte, n)
			local := []unix.Iovec{{Base: &buf[0], Len: uint64(n)}}
			remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: n}}
			if _, err := unix.ProcessVMReadv(pid, local, remote, 0); err != nil {
				return err
			}
			fmt.Printf("leak %s\n", buf)
			return nil
		},
		// bind:SRC>DST bind-mounts SRC onto DST and prints DST/id_rsa.
		"bind": func(arg string) error {
			src, dst, _ := strings.Cut(arg, ">")
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
			if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
				return err
			}
			b, err := os.ReadFile(filepath.Join(dst, "id_rsa"))
			fmt.Printf("leak %s\n", b)
			return err
		},
		// rawudp:PORT#PAYLOAD sends PAYLOAD to 127.0.0.1:PORT over a raw IP
		// socket (the UDP header built by hand).
		"rawudp": func(arg string) error {
			portS, payload, _ := strings.Cut(arg, "#")
			port, _ := strconv.Atoi(portS)
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_UDP)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			pkt := make([]byte, 8+len(payload))
			binary.BigEndian.PutUint16(pkt[0:], 40000)
			binary.BigEndian.PutUint16(pkt[2:], uint16(port))
			binary.BigEndian.PutUint16(pkt[4:], uint16(len(pkt)))
			copy(pkt[8:], payload)
			return unix.Sendto(fd, pkt, 0, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
		},
		// packet:PAYLOAD opens a packet socket on lo and sends a frame.
		"packet": func(arg string) error {
			fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM, int(htons(unix.ETH_P_IP)))
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			return unix.Sendto(fd, []byte(arg), 0, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: 1})
		},
		// unix:PATH#PAYLOAD connects to a pathname (or @abstract) unix socket
		// and writes PAYLOAD.
		"unix": func(arg string) error {
			path, payload, _ := strings.Cut(arg, "#")
			c, err := net.Dial("unix", path)
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte(payload))
			return err
		},
		// key:DESC searches the session keyring for a user key and prints it.
		"key": func(arg string) error {
			id, err := unix.KeyctlSearch(unix.KEY_SPEC_SESSION_KEYRING, "user", arg, 0)
			if err != nil {
				return err
			}
			buf := make([]byte, 256)
			n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0)
			if err != nil {
				return err
			}
			fmt.Printf("leak %s\n", buf[:n])
			return nil
		},
		// gitswap:WS renames WS/.git away, plants a hook, renames it back.
		"gitswap": func(ws string) error {
			git, away := filepath.Join(ws, ".git"), filepath.Join(ws, ".git-away")
			if err := os.Rename(git, away); err != nil {
				return err
			}
			err := os.WriteFile(filepath.Join(away, "hooks", "pre-commit"), []byte("#!/bin/sh\ntouch pwned\n"), 0o755)
			if rerr := os.Rename(away, git); err == nil {
				err = rerr
			}
			return err
		},
		// gitnew:WS builds a fresh .git with a hook beside the real one and
		// swaps it in.
		"gitnew": func(ws string) error {
			fresh := filepath.Join(ws, "fresh-git")
			if err := os.MkdirAll(filepath.Join(fresh, "hooks"), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(fresh, "hooks", "pre-commit"), []byte("#!/bin/sh\ntouch pwned\n"), 0o755); err != nil {
				return err
			}
			if err := os.Rename(filepath.Join(ws, ".git"), filepath.Join(ws, "old-git")); err != nil {
				return err
			}
			return os.Rename(fresh, filepath.Join(ws, ".git"))
		},
		// dirswap:DIR#GIT renames DIR (a directory holding a repository,
		// or a parent of one) away, plants a hook in the repository's
		// hooks and core.hooksPath in its config (GIT: the .git directory
		// relative to DIR, ".git" if empty), and renames it back:
		// protection by name would not see the planted files under their
		// new path.
		"dirswap": func(arg string) error {
			dir, rel, _ := strings.Cut(arg, "#")
			if rel == "" {
				rel = ".git"
			}
			away := dir + "-away"
			if err := os.Rename(dir, away); err != nil {
				return err
			}
			err := plant(filepath.Join(away, rel))
			if rerr := os.Rename(away, dir); err == nil {
				err = rerr
			}
			return err
		},
		// gitlink:WS hard-links WS/.git/config to WS/cfg-link and writes
		// core.hooksPath through the new name.
		"gitlink": func(ws string) error {
			link := filepath.Join(ws, "cfg-link")
			if err := os.Link(filepath.Join(ws, ".git", "config"), link); err != nil {
				return err
			}
			return appendFile(link, "[core]\n\thooksPath = /tmp/evil\n")
		},
		// symswap:WS replaces WS/.git/hooks, then WS/.git, with a symlink to
		// a directory holding a hook.
		"symswap": func(ws string) error {
			evil := filepath.Join(ws, "evil-git")
			if err := os.MkdirAll(filepath.Join(evil, "hooks"), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(evil, "hooks", "pre-commit"), []byte(hook), 0o755); err != nil {
				return err
			}
			var first error
			for _, sw := range []struct{ target, at string }{
				{filepath.Join(evil, "hooks"), filepath.Join(ws, ".git", "hooks")},
				{evil, filepath.Join(ws, ".git")},
			} {
				tmp := sw.at + "-link"
				if err := os.Symlink(sw.target, tmp); err != nil {
					first = cmpErr(first, err)
					continue
				}
				first = cmpErr(first, os.Rename(tmp, sw.at))
			}
			return first
		},
		// symwrite:WS writes a hook through a symlink to WS/.git/hooks.
		"symwrite": func(ws string) error {
			l := filepath.Join(ws, "hooks-link")
			if err := os.Symlink(filepath.Join(ws, ".git", "hooks"), l); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(l, "pre-commit"), []byte(hook), 0o755)
		},
		// append:PATH#TEXT appends to a file (.git/config: core.hooksPath).
		"append": func(arg string) error {
			path, text, _ := strings.Cut(arg, "#")
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteString(text)
			return err
		},
		// caps prints the effective, bounding and ambient capability sets.
		"caps": func(string) error {
			b, err := os.ReadFile("/proc/self/status")
			if err != nil {
				return err
			}
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "Cap") || strings.HasPrefix(l, "NoNewPrivs") || strings.HasPrefix(l, "Seccomp:") ||
					strings.HasPrefix(l, "Uid:") || strings.HasPrefix(l, "Gid:") || strings.HasPrefix(l, "Groups:") {
					fmt.Printf("status %s\n", strings.Join(strings.Fields(l), " "))
				}
			}
			return nil
		},
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// hook is what the git attacks plant: a pre-commit hook leaving a marker.
const hook = "#!/bin/sh\ntouch pwned\n"

// plant writes a pre-commit hook into git/hooks and core.hooksPath into
// git/config; the first error is returned, both are tried.
func plant(git string) error {
	err := os.WriteFile(filepath.Join(git, "hooks", "pre-commit"), []byte(hook), 0o755)
	return cmpErr(err, appendFile(filepath.Join(git, "config"), "[core]\n\thooksPath = /tmp/evil\n"))
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// cmpErr keeps the first error.
func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// MapTamper ("maptamper:PINDIR#SECRET") opens the guard's pinned maps,
// deletes every session's membership and then reads SECRET: with its own
// entries gone, a process the guard trusted the maps for would be free.
func MapTamper(arg string) error {
	dir, secret, _ := strings.Cut(arg, "#")
	var first error
	for _, name := range []string{"cgroups", "tasks"} {
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), nil)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		var keys [][]byte
		k := make([]byte, m.KeySize())
		v := make([]byte, m.ValueSize())
		it := m.Iterate()
		for it.Next(&k, &v) {
			keys = append(keys, append([]byte(nil), k...))
		}
		for _, k := range keys {
			if err := m.Delete(k); err != nil && first == nil {
				first = err
			}
		}
		m.Close()
	}
	b, err := os.ReadFile(secret)
	if err == nil {
		fmt.Printf("leak %s\n", b)
	}
	if first != nil {
		return first
	}
	return err
}

// URingUDP ("uringudp:PORT#PAYLOAD") makes a UDP socket through io_uring
// (IORING_OP_SOCKET, which socket(2) filters never see) and sends PAYLOAD
// to 127.0.0.1:PORT with a plain sendto.
func URingUDP(arg string) error {
	portS, payload, _ := strings.Cut(arg, "#")
	port, _ := strconv.Atoi(portS)
	var sqe [64]byte
	sqe[0] = 45                                                   // IORING_OP_SOCKET
	*(*int32)(unsafe.Pointer(&sqe[4])) = unix.AF_INET             // fd: domain
	*(*uint64)(unsafe.Pointer(&sqe[8])) = uint64(unix.SOCK_DGRAM) // off: type
	*(*uint32)(unsafe.Pointer(&sqe[24])) = 0                      // len: protocol
	fd, err := uringSubmit(sqe)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Sendto(fd, []byte(payload), 0, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
}

// uringSubmit runs one submission on a fresh ring and returns its result.
func uringSubmit(sqe [64]byte) (int, error) {
	var p [120]byte // struct io_uring_params
	fd, _, e := syscall.Syscall(unix.SYS_IO_URING_SETUP, 4, uintptr(unsafe.Pointer(&p[0])), 0)
	if e != 0 {
		return -1, fmt.Errorf("io_uring_setup: %w", e)
	}
	defer unix.Close(int(fd))
	u32 := func(off int) uint32 { return *(*uint32)(unsafe.Pointer(&p[off])) }
	sqEntries, cqEntries := u32(0), u32(4)
	const sqOff, cqOff = 40, 80
	sqRing, err := unix.Mmap(int(fd), 0, int(u32(sqOff+24)+sqEntries*4), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return -1, fmt.Errorf("mmap sq: %w", err)
	}
	defer unix.Munmap(sqRing)
	cqRing, err := unix.Mmap(int(fd), 0x8000000, int(u32(cqOff+20)+cqEntries*16), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return -1, fmt.Errorf("mmap cq: %w", err)
	}
	defer unix.Munmap(cqRing)
	sqes, err := unix.Mmap(int(fd), 0x10000000, int(sqEntries*64), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return -1, fmt.Errorf("mmap sqes: %w", err)
	}
	defer unix.Munmap(sqes)
	at := func(b []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }
	copy(sqes[:64], sqe[:])
	tail := at(sqRing, u32(sqOff+4))
	mask := *at(sqRing, u32(sqOff+8))
	*at(sqRing, u32(sqOff+24)+(*tail&mask)*4) = 0
	*tail++
	head, ctail := at(cqRing, u32(cqOff)), at(cqRing, u32(cqOff+4))
	toSubmit := uintptr(1)
	for atomic.LoadUint32(ctail) == atomic.LoadUint32(head) {
		_, _, e = syscall.Syscall6(unix.SYS_IO_URING_ENTER, fd, toSubmit, 1, 1 /* GETEVENTS */, 0, 0)
		switch {
		case e == syscall.EINTR:
		case e != 0:
			return -1, fmt.Errorf("io_uring_enter: %w", e)
		default:
			toSubmit = 0
		}
	}
	runtime.KeepAlive(sqe)
	cmask := *at(cqRing, u32(cqOff+8))
	cqe := u32(cqOff+20) + (*head&cmask)*16
	res := *(*int32)(unsafe.Pointer(&cqRing[cqe+8]))
	*head++
	if res < 0 {
		return -1, syscall.Errno(-res)
	}
	return int(res), nil
}
