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
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Steps returns the attack steps by name; each takes one argument and
// prints what it obtained ("leak ..."), so a canary in the output is a
// successful attack.
func Steps() map[string]func(string) error {
	return map[string]func(string) error{
		"maptamper": MapTamper,
		"leakfile":  leakFile,
		"uringudp":  URingUDP,
		"ptrace":    ptrace,
		"vmread":    vmRead,
		"bind":      bind,
		"rawudp":    rawUDP,
		"packet":    packet,
		"unix":      unixSend,
		"key":       key,
		"gitswap":   gitSwap,
		"gitnew":    gitNew,
		"dirswap":   dirSwap,
		"gitlink":   gitLink,
		"symswap":   symSwap,
		"symwrite":  symWrite,
		"append":    appendStep,
		"caps":      caps,
		"memfdexec": MemfdExec,
		"name":      Name,
		"plantexec": PlantExec,
	}
}

// leakFile ("leakfile:PATH") reads PATH and prints it.
func leakFile(p string) error {
	b, err := os.ReadFile(p)
	if err == nil {
		fmt.Printf("leak %s\n", strings.TrimSpace(string(b)))
	}
	return err
}

// ptrace ("ptrace:PID") attaches to PID (and detaches).
func ptrace(arg string) error {
	pid, _ := strconv.Atoi(arg)
	if err := unix.PtraceAttach(pid); err != nil {
		return err
	}
	return unix.PtraceDetach(pid)
}

// vmRead ("vmread:PID@ADDR#LEN") reads another process's memory and
// prints it.
func vmRead(arg string) error {
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
}

// bind ("bind:SRC>DST") bind-mounts SRC onto DST and prints DST/id_rsa.
func bind(arg string) error {
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
}

// rawUDP ("rawudp:PORT#PAYLOAD") sends PAYLOAD to 127.0.0.1:PORT over a
// raw IP socket (the UDP header built by hand).
func rawUDP(arg string) error {
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
}

// packet ("packet:PAYLOAD") opens a packet socket on lo and sends a frame.
func packet(arg string) error {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM, int(htons(unix.ETH_P_IP)))
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Sendto(fd, []byte(arg), 0, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: 1})
}

// unixSend ("unix:PATH#PAYLOAD") connects to a pathname (or @abstract)
// unix socket and writes PAYLOAD.
func unixSend(arg string) error {
	path, payload, _ := strings.Cut(arg, "#")
	c, err := net.Dial("unix", path)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte(payload))
	return err
}

// key ("key:DESC") searches the session keyring for a user key and prints
// it.
func key(arg string) error {
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
}

// gitSwap ("gitswap:WS") renames WS/.git away, plants a hook, renames it
// back.
func gitSwap(ws string) error {
	git, away := filepath.Join(ws, ".git"), filepath.Join(ws, ".git-away")
	if err := os.Rename(git, away); err != nil {
		return err
	}
	err := os.WriteFile(filepath.Join(away, "hooks", "pre-commit"), []byte(hook), 0o755)
	if rerr := os.Rename(away, git); err == nil {
		err = rerr
	}
	return err
}

// gitNew ("gitnew:WS") builds a fresh .git with a hook beside the real one
// and swaps it in.
func gitNew(ws string) error {
	fresh := filepath.Join(ws, "fresh-git")
	if err := hookDir(fresh); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(ws, ".git"), filepath.Join(ws, "old-git")); err != nil {
		return err
	}
	return os.Rename(fresh, filepath.Join(ws, ".git"))
}

// dirSwap ("dirswap:DIR#GIT") renames DIR (a directory holding a
// repository, or a parent of one) away, plants a hook in the repository's
// hooks and core.hooksPath in its config (GIT: the .git directory
// relative to DIR, ".git" if empty), and renames it back: protection by
// name would not see the planted files under their new path.
func dirSwap(arg string) error {
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
}

// gitLink ("gitlink:WS") hard-links WS/.git/config to WS/cfg-link and
// writes core.hooksPath through the new name.
func gitLink(ws string) error {
	link := filepath.Join(ws, "cfg-link")
	if err := os.Link(filepath.Join(ws, ".git", "config"), link); err != nil {
		return err
	}
	return appendFile(link, "[core]\n\thooksPath = /tmp/evil\n")
}

// symSwap ("symswap:WS") replaces WS/.git/hooks, then WS/.git, with a
// symlink to a directory holding a hook.
func symSwap(ws string) error {
	evil := filepath.Join(ws, "evil-git")
	if err := hookDir(evil); err != nil {
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
}

// symWrite ("symwrite:WS") writes a hook through a symlink to
// WS/.git/hooks.
func symWrite(ws string) error {
	l := filepath.Join(ws, "hooks-link")
	if err := os.Symlink(filepath.Join(ws, ".git", "hooks"), l); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(l, "pre-commit"), []byte(hook), 0o755)
}

// appendStep ("append:PATH#TEXT") appends to a file (.git/config:
// core.hooksPath).
func appendStep(arg string) error {
	path, text, _ := strings.Cut(arg, "#")
	return appendFile(path, text)
}

// caps prints the effective, bounding and ambient capability sets, the
// no_new_privs and seccomp state, and the ids.
func caps(string) error {
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
}

// MemfdExec ("memfdexec:PROG") is a fileless exec: it copies PROG into a
// memfd and runs it from there (through /proc/self/fd, which reaches the
// kernel's exec hooks with the memfd as the file, as execveat with
// AT_EMPTY_PATH does), with the argument EXECUTED and this process's
// stdout: a guard that let it run shows as EXECUTED in the output of a
// program that prints its arguments.
func MemfdExec(prog string) error {
	b, err := os.ReadFile(prog)
	if err != nil {
		return err
	}
	fd, err := unix.MemfdCreate("payload", 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), "memfd")
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		return err
	}
	cmd := exec.Command(fmt.Sprintf("/proc/self/fd/%d", fd), "EXECUTED")
	cmd.Stdout = os.Stdout
	return cmd.Run()
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// hook is what the git attacks plant: a pre-commit hook leaving a marker.
const hook = "#!/bin/sh\ntouch pwned\n"

// hookDir makes git/hooks/pre-commit: a git directory of the attacker's
// with the hook in it.
func hookDir(git string) error {
	if err := os.MkdirAll(filepath.Join(git, "hooks"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(git, "hooks", "pre-commit"), []byte(hook), 0o755)
}

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
