package gateway

import (
	"sync"
	"time"
)

// warmPool keeps sessions of servers started before a client asks for one
// (a server's "warm" in gateway.json), so that a new session does not wait
// for its server process to start. A warm session has run nothing but the
// server's start-up: the client's initialize is its first message, and it
// gets its caller's identity when it is taken.
type warmPool struct {
	g    *Gateway
	want map[string]int

	mu     sync.Mutex
	ready  map[string][]*backend
	closed bool
	kick   chan struct{}
	done   chan struct{}
	wg     sync.WaitGroup // warm backends not taken, until their server is gone
}

func newWarmPool(g *Gateway) *warmPool {
	p := &warmPool{g: g, want: map[string]int{}, ready: map[string][]*backend{},
		kick: make(chan struct{}, 1), done: make(chan struct{})}
	for _, name := range g.cfg.names() {
		if n := g.cfg.Servers[name].Warm; n > 0 {
			p.want[name] = n
		}
	}
	if len(p.want) == 0 {
		close(p.done)
	}
	return p
}

// start begins filling the pool (once the gateway holds it: the filler
// measures the gateway's sessions).
func (p *warmPool) start() {
	if len(p.want) > 0 {
		go p.fill()
		p.signal()
	}
}

func (p *warmPool) signal() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// take returns a warm session of server name for identity, or nil.
func (p *warmPool) take(name, identity string) *backend {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.signal()
	for len(p.ready[name]) > 0 {
		b := p.ready[name][0]
		p.ready[name] = p.ready[name][1:]
		if b.ended() {
			continue
		}
		b.ident.set(identity)
		return b
	}
	return nil
}

// all lists the warm sessions not taken yet.
func (p *warmPool) all() []*backend {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*backend
	for _, bs := range p.ready {
		out = append(out, bs...)
	}
	return out
}

// fill keeps every server's pool full, one start at a time, within the
// memory budget.
func (p *warmPool) fill() {
	defer close(p.done)
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		select {
		case <-p.kick:
		case <-retry.C:
		}
		for name, n := range p.want {
			for p.short(name, n) {
				if p.g.mem.admit([]string{name}) != nil {
					retry.Reset(5 * time.Second) // try again when memory may be free
					break
				}
				if !p.add(name) {
					retry.Reset(5 * time.Second)
					break
				}
			}
		}
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return
		}
	}
}

// short reports whether server name has fewer than n live warm sessions.
func (p *warmPool) short(name string, n int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	live := p.ready[name][:0]
	for _, b := range p.ready[name] {
		if !b.ended() {
			live = append(live, b)
		}
	}
	p.ready[name] = live
	return !p.closed && len(live) < n
}

// add starts one warm session of server name.
func (p *warmPool) add(name string) bool {
	ident := &identity{}
	pr, err := p.g.proxy(name, ident)
	if err != nil {
		p.g.logf("warm session of %s: %v", name, err)
		return false
	}
	b := startBackend(name, pr, ident)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		b.close()
		return false
	}
	p.ready[name] = append(p.ready[name], b)
	p.wg.Add(1)
	go func() { <-b.done; p.wg.Done() }()
	return true
}

// close stops filling and ends the warm sessions not taken.
func (p *warmPool) close() {
	p.mu.Lock()
	p.closed = true
	var left []*backend
	for _, bs := range p.ready {
		left = append(left, bs...)
	}
	p.ready = map[string][]*backend{}
	p.mu.Unlock()
	p.signal()
	<-p.done
	for _, b := range left {
		b.close()
	}
}
