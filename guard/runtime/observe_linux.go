package runtime

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Observer records the files that the processes of one process group open
// and execute, with fanotify marks on every real file system (its
// superblock, so that the mounts of the server's own mount namespace are
// seen too). It observes and never denies: learn mode runs the server,
// confined as policy init runs it, under it. It sees files only (no connects), and a process that exits
// before its events are read cannot be told apart from other processes,
// so its accesses are dropped.
type Observer struct {
	fd   int
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	pgid    int
	seen    map[string]bool // path -> exec
	pending []pendingAccess // seen before Follow named the group

	// Sync's barrier: the file it opened and the channel closed once the
	// loop reads that open.
	marker string
	synced chan struct{}
}

type pendingAccess struct {
	pid  int
	path string
	exec bool
}

// pseudoFS are file systems whose files are no grant's business (or that
// fanotify cannot mark).
var pseudoFS = map[string]bool{"proc": true, "sysfs": true, "cgroup": true, "cgroup2": true, "devpts": true,
	"mqueue": true, "bpf": true, "tracefs": true, "debugfs": true, "securityfs": true, "pstore": true,
	"configfs": true, "fusectl": true, "hugetlbfs": true, "autofs": true, "binfmt_misc": true, "nsfs": true,
	"devtmpfs": true, "efivarfs": true, "rpc_pipefs": true, "selinuxfs": true}

// Observe starts an observer. Follow names the process group to record.
func Observe() (*Observer, error) {
	// An unlimited queue: the default one holds 16384 events and drops the
	// rest, a busy machine's few seconds of opens.
	fd, err := unix.FanotifyInit(unix.FAN_CLASS_NOTIF|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK|unix.FAN_UNLIMITED_QUEUE, unix.O_RDONLY|unix.O_LARGEFILE|unix.O_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("%w: fanotify_init: %v (learn mode needs root)", ErrNoObserver, err)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: %v", ErrNoObserver, err)
	}
	marked := 0
	for _, m := range parseMounts(mounts) {
		if pseudoFS[m.fstype] {
			continue
		}
		// A file system mark, not a mount mark: the server runs in a mount
		// namespace of its own (the launcher's), whose mounts are copies
		// that a mount mark would not see.
		if unix.FanotifyMark(fd, unix.FAN_MARK_ADD|unix.FAN_MARK_FILESYSTEM, unix.FAN_OPEN|unix.FAN_OPEN_EXEC, unix.AT_FDCWD, m.point) == nil ||
			unix.FanotifyMark(fd, unix.FAN_MARK_ADD|unix.FAN_MARK_MOUNT, unix.FAN_OPEN|unix.FAN_OPEN_EXEC, unix.AT_FDCWD, m.point) == nil {
			marked++
		}
	}
	if marked == 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: no mount could be marked", ErrNoObserver)
	}
	o := &Observer{fd: fd, stop: make(chan struct{}), done: make(chan struct{}), seen: map[string]bool{}}
	go o.loop()
	return o, nil
}

type mount struct{ point, fstype string }

// parseMounts reads /proc/self/mountinfo: the mount point (field 5) and
// the file system type (the first field after " - ").
func parseMounts(b []byte) []mount {
	var out []mount
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 1 {
			continue
		}
		out = append(out, mount{point: unescapeMount(f[4]), fstype: g[0]})
	}
	return out
}

var octal = regexp.MustCompile(`\\[0-7]{3}`)

func unescapeMount(s string) string {
	return octal.ReplaceAllStringFunc(s, func(m string) string {
		n, _ := strconv.ParseUint(m[1:], 8, 8)
		return string(rune(n))
	})
}

// Follow records the accesses of process group pgid (the server started
// with Setpgid, and every child that stays in its group).
func (o *Observer) Follow(pgid int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pgid = pgid
	// The server started before Follow: its first opens are pending.
	for _, p := range o.pending {
		if processGroup(p.pid) == pgid {
			o.seen[p.path] = o.seen[p.path] || p.exec
		}
	}
	o.pending = nil
}

// Stop ends observing and returns what was seen, sorted by path.
func (o *Observer) Stop() []Access {
	close(o.stop)
	<-o.done
	unix.Close(o.fd)
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]Access, 0, len(o.seen))
	for p, x := range o.seen {
		out = append(out, Access{Path: p, Exec: x})
	}
	slices.SortFunc(out, func(a, b Access) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// Sync waits until the observer has read every event queued before the
// call, so that a server's opens are recorded while it still runs: once
// it exits, its process group can no longer be read and its pending
// events are dropped. fanotify queues events in order, so Sync opens a
// file of its own and waits for that open to come through. It reports
// whether it did within timeout (the marker's mount may be unmarked).
func (o *Observer) Sync(timeout time.Duration) bool {
	f, err := os.CreateTemp("", "mcpguard-observe-*")
	if err != nil {
		return false
	}
	defer os.Remove(f.Name()) // after the event is read: its fd names the live path
	f.Close()
	marker, err := filepath.EvalSymlinks(f.Name()) // as the event's fd names it
	if err != nil {
		return false
	}
	ch := make(chan struct{})
	o.mu.Lock()
	o.marker, o.synced = marker, ch
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		o.marker, o.synced = "", nil
		o.mu.Unlock()
	}()
	// The create may have been read before the marker was set: open again.
	g, err := os.Open(marker)
	if err != nil {
		return false
	}
	g.Close()
	select {
	case <-ch:
		return true
	case <-time.After(timeout):
		return false
	}
}

func (o *Observer) loop() {
	defer close(o.done)
	buf := make([]byte, 64<<10)
	fds := []unix.PollFd{{Fd: int32(o.fd), Events: unix.POLLIN}}
	for {
		select {
		case <-o.stop:
			o.drain(buf) // what is queued still counts
			return
		default:
		}
		if n, err := unix.Poll(fds, 100); err != nil || n == 0 {
			continue
		}
		o.drain(buf)
	}
}

// drain reads at most a few batches: fanotify reports every open on the
// marked mounts, and on a busy machine the queue never empties, so the
// loop must get back to checking whether it should stop.
func (o *Observer) drain(buf []byte) {
	for range 8 {
		n, err := unix.Read(o.fd, buf)
		if err != nil || n <= 0 {
			return
		}
		o.events(buf[:n])
	}
}

func (o *Observer) events(b []byte) {
	const size = int(unsafe.Sizeof(unix.FanotifyEventMetadata{}))
	for len(b) >= size {
		m := (*unix.FanotifyEventMetadata)(unsafe.Pointer(&b[0]))
		if m.Event_len < uint32(size) || int(m.Event_len) > len(b) {
			return
		}
		if m.Fd >= 0 {
			o.record(int(m.Pid), int(m.Fd), m.Mask&unix.FAN_OPEN_EXEC != 0)
			unix.Close(int(m.Fd))
		}
		b = b[m.Event_len:]
	}
}

func (o *Observer) record(pid, fd int, exec bool) {
	path, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil || !filepath.IsAbs(path) {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.synced != nil && path == o.marker && pid == os.Getpid() {
		close(o.synced)
		o.synced = nil
		return
	}
	if o.pgid == 0 {
		if len(o.pending) < 1<<16 {
			o.pending = append(o.pending, pendingAccess{pid, path, exec})
		}
		return
	}
	if processGroup(pid) != o.pgid {
		return
	}
	o.seen[path] = o.seen[path] || exec
}

// processGroup reads pid's process group from /proc (-1 when it is gone).
func processGroup(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return -1
	}
	g, err := strconv.Atoi(f[2])
	if err != nil {
		return -1
	}
	return g
}
