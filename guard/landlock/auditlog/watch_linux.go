//go:build linux

package auditlog

import (
	"errors"
	"os"
	"sync"
)

// Watch reports, through fn, the Landlock denials of the process tree
// started as pid (the launcher's first stage, or the server itself), until
// stop is called. A denial is the tree's when its domain was seen in the
// tree before, or the denied task or the domain's creator is in the
// tree: in pid's pid namespace (the launcher gives the server one of its
// own) or a descendant of pid.
func Watch(pid int, fn func(Denial)) (stop func(), err error) {
	r, err := Open()
	if err != nil {
		return nil, err
	}
	ns := pidNamespace(pid)
	t := &tree{root: pid, ns: ns, domains: map[string]bool{}}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			d, err := r.Next()
			if errors.Is(err, os.ErrClosed) {
				return
			}
			if err != nil {
				continue
			}
			if t.owns(d) {
				fn(d)
			}
		}
	}()
	return func() { r.Close(); wg.Wait() }, nil
}

// tree tells the server's denials from every other sandbox's.
type tree struct {
	root    int
	ns      string
	domains map[string]bool
}

func (t *tree) owns(d Denial) bool {
	if d.Domain != "" && t.domains[d.Domain] {
		return true
	}
	for _, p := range []int{d.PID, d.DomainPID} {
		if p > 0 && t.contains(p) {
			if d.Domain != "" {
				t.domains[d.Domain] = true
			}
			return true
		}
	}
	return false
}

// contains reports whether pid is in the tree: the tree's own pid
// namespace (not the proxy's), or a descendant of its root.
func (t *tree) contains(pid int) bool {
	if pid == t.root {
		return true
	}
	if t.ns != "" && t.ns != pidNamespace(os.Getpid()) && pidNamespace(pid) == t.ns {
		return true
	}
	for p, n := parent(pid), 0; p > 1 && n < 64; p, n = parent(p), n+1 {
		if p == t.root {
			return true
		}
	}
	return false
}
