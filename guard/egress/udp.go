package egress

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"
)

// udpIdle is how long a UDP flow lives without a datagram either way.
const udpIdle = 60 * time.Second

// maxFlows bounds a relay's flows (one per source address inside).
const maxFlows = 256

// udpRelay forwards datagrams arriving on a UDP socket inside the
// namespace to target (from one socket of the guard's per source), and
// the answers back to that source, from the inside socket's own address.
type udpRelay struct {
	f      *Filter
	inside *net.UDPConn
	target string // host:port
	name   string // a granted name when target is one
	// local, when set, answers each datagram itself (the DNS responder)
	// instead of forwarding it.
	local func([]byte) []byte

	mu    sync.Mutex
	flows map[netip.AddrPort]*udpFlow
}

type udpFlow struct {
	out  net.Conn
	last time.Time
}

func (r *udpRelay) serve() {
	defer r.f.wg.Done()
	defer r.closeFlows()
	buf := make([]byte, 65535)
	for {
		n, src, err := r.inside.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || r.f.ctx.Err() != nil {
				return
			}
			continue
		}
		if r.local != nil {
			if resp := r.local(buf[:n]); resp != nil {
				r.inside.WriteToUDPAddrPort(resp, src)
			}
			continue
		}
		fl := r.flow(src)
		if fl == nil {
			continue
		}
		fl.out.Write(buf[:n])
	}
}

// flow returns the outside socket for src, dialling it on first use.
func (r *udpRelay) flow(src netip.AddrPort) *udpFlow {
	r.mu.Lock()
	fl, ok := r.flows[src]
	if ok {
		fl.last = time.Now()
		r.mu.Unlock()
		return fl
	}
	if len(r.flows) >= maxFlows {
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	out, err := r.f.dial(r.f.ctx, "udp", r.target, r.name)
	if err != nil {
		r.f.dialDenied(r.target, err)
		return nil
	}
	fl = &udpFlow{out: out, last: time.Now()}
	r.mu.Lock()
	r.flows[src] = fl
	r.mu.Unlock()
	r.f.wg.Add(1)
	go r.back(src, fl)
	return fl
}

// back relays answers to src until the flow is idle or closed.
func (r *udpRelay) back(src netip.AddrPort, fl *udpFlow) {
	defer r.f.wg.Done()
	defer func() {
		r.mu.Lock()
		delete(r.flows, src)
		r.mu.Unlock()
		fl.out.Close()
	}()
	buf := make([]byte, 65535)
	for {
		fl.out.SetReadDeadline(time.Now().Add(udpIdle))
		n, err := fl.out.Read(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				r.mu.Lock()
				idle := time.Since(fl.last) >= udpIdle
				r.mu.Unlock()
				if !idle && r.f.ctx.Err() == nil {
					continue
				}
			}
			return
		}
		r.mu.Lock()
		fl.last = time.Now()
		r.mu.Unlock()
		r.inside.WriteToUDPAddrPort(buf[:n], src)
	}
}

func (r *udpRelay) closeFlows() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, fl := range r.flows {
		fl.out.Close()
	}
}
