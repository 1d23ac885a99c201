package clients

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Store is mcpguard's own directory for the clients it wrapped: the
// policies it derived, what each wrap changed (so that unwrap can put it
// back byte for byte) and a backup of every file before it was changed.
type Store struct{ Dir string }

// DefaultStore is <the user's configuration directory>/mcpguard: XDG on
// Linux ($XDG_CONFIG_HOME, else ~/.config), ~/Library/Application Support
// on macOS, %AppData% on Windows. MCPGUARD_CONFIG_DIR overrides it.
func DefaultStore() (Store, error) {
	if d := os.Getenv("MCPGUARD_CONFIG_DIR"); d != "" {
		return Store{Dir: d}, nil
	}
	d, err := os.UserConfigDir()
	if err != nil {
		return Store{}, fmt.Errorf("configuration directory: %w", err)
	}
	return Store{Dir: filepath.Join(d, "mcpguard")}, nil
}

func hash(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:])
}

// safe makes a name usable as a file name.
func safe(s string) string {
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, s)
	return strings.TrimLeft(s, ".")
}

// PolicyPath is where the policy of one server of one file is kept:
// policies/<client>/<server>-<6 hex digits of the file and entry>.json, so
// that two projects' servers of the same name never share a policy.
func (s Store) PolicyPath(f File, srv Server) string {
	h := hash(append([]string{f.Path}, srv.Key...)...)[:6]
	return filepath.Join(s.Dir, "policies", safe(f.Client), safe(srv.Name)+"-"+h+".json")
}

// PolicyOf returns the policy file wrap keeps for a session name (the
// policy's base name, which wrap makes its server name), and the client
// it is for; "" when the store holds none.
func (s Store) PolicyOf(server string) (file, client string) {
	if server == "" || safe(server) != server {
		return "", ""
	}
	m, _ := filepath.Glob(filepath.Join(s.Dir, "policies", "*", server+".json"))
	if len(m) != 1 {
		return "", ""
	}
	return m[0], filepath.Base(filepath.Dir(m[0]))
}

// PinPath is where `mcpguard scan` keeps the digests it pinned.
func (s Store) PinPath() string { return filepath.Join(s.Dir, "scan-pins.json") }

// record is what wrap changed in one file.
type record struct {
	File    string    `json:"file"`
	Changes []Change  `json:"changes"`
	Backups []string  `json:"backups,omitempty"`
	Updated time.Time `json:"updated"`
}

func (s Store) recordPath(file string) string {
	return filepath.Join(s.Dir, "wrapped", hash(file)[:16]+".json")
}

func (s Store) load(file string) (record, error) {
	r := record{File: file}
	b, err := os.ReadFile(s.recordPath(file))
	if errors.Is(err, os.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", s.recordPath(file), err)
	}
	return r, nil
}

func (s Store) save(r record) error {
	r.Updated = time.Now().UTC()
	if len(r.Changes) == 0 {
		err := os.Remove(s.recordPath(r.File))
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return WriteFile(s.recordPath(r.File), append(b, '\n'), 0o600)
}

// Changes returns what wrap changed in file and has not been undone.
func (s Store) Changes(file string) ([]Change, error) {
	r, err := s.load(file)
	return r.Changes, err
}

// AddChanges records changes made to file (replacing older ones of the
// same entries) and the backup taken before them.
func (s Store) AddChanges(file, backup string, changes []Change) error {
	r, err := s.load(file)
	if err != nil {
		return err
	}
	for _, c := range changes {
		r.Changes = slices.DeleteFunc(r.Changes, func(o Change) bool { return slices.Equal(o.Key, c.Key) })
		r.Changes = append(r.Changes, c)
	}
	if backup != "" {
		r.Backups = append(r.Backups, backup)
	}
	return s.save(r)
}

// DropChanges forgets the changes of the entries at keys (unwrapped).
func (s Store) DropChanges(file string, keys [][]string) error {
	r, err := s.load(file)
	if err != nil {
		return err
	}
	for _, k := range keys {
		r.Changes = slices.DeleteFunc(r.Changes, func(o Change) bool { return slices.Equal(o.Key, k) })
	}
	return s.save(r)
}

// Backup keeps a copy of a file's bytes before mcpguard changes it:
// backups/<base name>-<8 hex digits of its path>-<UTC time>.
func (s Store) Backup(file string, data []byte) (string, error) {
	name := fmt.Sprintf("%s-%s-%s", safe(filepath.Base(file)), hash(file)[:8], time.Now().UTC().Format("20060102T150405.000000000"))
	p := filepath.Join(s.Dir, "backups", name)
	if err := WriteFile(p, data, 0o600); err != nil {
		return "", fmt.Errorf("backup %s: %w", file, err)
	}
	return p, nil
}

// WriteFile replaces path's content atomically (a temporary file beside it,
// renamed over it), keeping the mode and owner of the file it replaces;
// through a symbolic link it replaces the link's target.
func WriteFile(path string, data []byte, mode os.FileMode) error {
	return replace(path, data, mode, nil)
}

// ErrChanged is returned by Replace when the file is no longer what the
// edit was made from: something else (the client itself) wrote it since.
var ErrChanged = errors.New("the file changed while mcpguard was editing it")

// Replace is WriteFile for a file edited from its bytes old: it replaces
// the file only if it still holds old, checked after the new content is
// written beside it, just before the rename, so that a change the client
// made meanwhile is never written over (ErrChanged; read it again and
// redo the edit). What a writer does between that check and the rename is
// the one window left.
func Replace(path string, old, data []byte) error {
	return replace(path, data, 0o600, func(cur []byte) bool { return bytes.Equal(cur, old) })
}

func replace(path string, data []byte, mode os.FileMode, unchanged func([]byte) bool) error {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	uid, gid := -1, -1
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
		uid, gid = owner(fi)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".mcpguard-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if uid >= 0 && uid != os.Geteuid() {
		// Root editing a user's file leaves it the user's (their client
		// must still be able to write it); others cannot give a file away,
		// and keep it as their own.
		tmp.Chown(uid, gid)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if unchanged != nil {
		cur, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !unchanged(cur) {
			return ErrChanged
		}
	}
	return os.Rename(tmp.Name(), path)
}
