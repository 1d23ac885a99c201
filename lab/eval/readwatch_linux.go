//go:build linux

package eval

import (
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ReadWatch watches files with inotify and records which were opened or
// read. It is the file_read oracle's evidence: inotify reports IN_OPEN only
// after the open succeeded (after the LSM hooks allowed it), so a denied
// open leaves no trace, and it sees opens by any process, children included.
// The watch follows symlinks to the target file.
type ReadWatch struct {
	fd     int // raw: (*os.File).Fd would switch the file to blocking mode
	f      *os.File
	mu     sync.Mutex
	wds    map[int]string
	opened map[string]bool
	done   chan struct{}
}

// NewReadWatch starts watching paths. Start it after setup (the harness's
// own writes must not count) and stop it before any oracle reads files.
func NewReadWatch(paths []string) (*ReadWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	w := &ReadWatch{fd: fd, wds: map[int]string{}, opened: map[string]bool{}, done: make(chan struct{})}
	for _, p := range paths {
		wd, err := unix.InotifyAddWatch(fd, p, unix.IN_OPEN|unix.IN_ACCESS)
		if err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("inotify watch %s: %w", p, err)
		}
		w.wds[wd] = p
	}
	// A non-blocking fd wrapped in os.File goes through the runtime poller,
	// so Close wakes a pending Read.
	w.f = os.NewFile(uintptr(fd), "inotify")
	go w.loop(len(w.wds))
	return w, nil
}

func (w *ReadWatch) loop(watches int) {
	defer close(w.done)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	ignored := 0
	for ignored < watches {
		n, err := w.f.Read(buf)
		if err != nil {
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			w.mu.Lock()
			if p, ok := w.wds[int(ev.Wd)]; ok && ev.Mask&(unix.IN_OPEN|unix.IN_ACCESS) != 0 {
				w.opened[p] = true
			}
			w.mu.Unlock()
			if ev.Mask&unix.IN_IGNORED != 0 {
				ignored++
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
	}
}

// Stop ends the watch and returns the paths seen opened or read.
func (w *ReadWatch) Stop() map[string]bool {
	// Removing a watch queues IN_IGNORED after every earlier event of that
	// watch, so once the loop has seen them all, nothing was missed.
	for wd := range w.wds {
		unix.InotifyRmWatch(w.fd, uint32(wd))
	}
	select {
	case <-w.done:
	case <-time.After(time.Second):
	}
	w.f.Close()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]bool{}
	for p, v := range w.opened {
		out[p] = v
	}
	return out
}
