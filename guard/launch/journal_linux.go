package launch

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// DefaultStateDir is where a root proxy keeps the journals of what its
// sessions changed on disk outside the server's namespace (ACL entries and
// lent directories of the ACL fallback, stub trees), until the session's
// end puts it back (Options.StateDir).
const DefaultStateDir = "/run/mcpguard/launch"

// A journal is written before a session changes anything on disk that
// its end must put back, one file per change (ID.N.json), next to a lock
// file (ID.lock) on which the proxy and the launcher's stage 1 hold a
// shared flock for as long as they live: the kernel drops it when both
// are gone, however they die. A proxy killed with SIGKILL never runs
// Launch.Close; the next root Prepare takes each unlocked journal's lock
// exclusively (reapJournals), so only sessions whose proxy and server are
// both gone, and puts back what they recorded, as Close would have.
type journal struct {
	dir  string
	id   string
	lock *os.File
	n    int
}

// journalEntry is one recorded change: an ACL grant or a stub tree.
type journalEntry struct {
	ACL  *aclJournal `json:"acl,omitempty"`
	Stub string      `json:"stub,omitempty"`
}

// stateDir makes (or checks) dir: root's, 0700, not a link.
func stateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("state directory %s: not a directory of this user's with mode 0700", dir)
	}
	return nil
}

// openJournal starts a journal in dir, locked before its name appears.
func openJournal(dir string) (*journal, error) {
	if err := stateDir(dir); err != nil {
		return nil, err
	}
	b := make([]byte, 8)
	rand.Read(b)
	j := &journal{dir: dir, id: hex.EncodeToString(b)}
	tmp := filepath.Join(dir, j.id+".lock.tmp")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("journal: lock: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, j.id+".lock")); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("journal: %w", err)
	}
	j.lock = f
	return j, nil
}

// record writes e (complete, or not at all) before the change is made.
func (j *journal) record(e journalEntry) error {
	if j == nil {
		return nil
	}
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	j.n++
	name := filepath.Join(j.dir, fmt.Sprintf("%s.%d.json", j.id, j.n))
	f, err := os.OpenFile(name+".tmp", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(name+".tmp", name)
	}
	if err != nil {
		os.Remove(name + ".tmp")
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// done removes the journal once what it recorded is put back.
func (j *journal) done() {
	if j == nil {
		return
	}
	removeJournal(j.dir, j.id)
	j.lock.Close()
}

func removeJournal(dir, id string) {
	files, _ := filepath.Glob(filepath.Join(dir, id+".*"))
	for _, f := range files {
		if !strings.HasSuffix(f, ".lock") {
			os.Remove(f)
		}
	}
	os.Remove(filepath.Join(dir, id+".lock"))
}

// reapJournals puts back what the sessions of dead proxies recorded in
// dir and left: journals whose lock nobody holds any more. It reports
// how many it reaped; a journal that cannot be read is left for a person
// (the error names it).
func reapJournals(dir string) (int, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".lock")
		if !ok {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			f.Close() // a live proxy or server holds it
			continue
		}
		if err := replay(dir, id); err != nil {
			errs = append(errs, fmt.Errorf("journal %s: %w", filepath.Join(dir, id), err))
		} else {
			removeJournal(dir, id)
			n++
		}
		f.Close()
	}
	return n, errors.Join(errs...)
}

// replay undoes a journal's entries, the last first.
func replay(dir, id string) error {
	files, _ := filepath.Glob(filepath.Join(dir, id+".*.json"))
	seq := func(name string) int {
		n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(name), id+"."), ".json"))
		return n
	}
	slices.SortFunc(files, func(a, b string) int { return seq(a) - seq(b) })
	var entries []journalEntry
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		var e journalEntry
		if err := json.Unmarshal(b, &e); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		entries = append(entries, e)
	}
	var errs []error
	for _, e := range slices.Backward(entries) {
		switch {
		case e.ACL != nil:
			errs = append(errs, e.ACL.undo())
		case e.Stub != "":
			errs = append(errs, os.RemoveAll(e.Stub))
		}
	}
	return errors.Join(errs...)
}
