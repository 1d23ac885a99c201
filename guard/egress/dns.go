package egress

import (
	"encoding/binary"
	"io"
	"net"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsTTL is the TTL of a fake answer: short, so a resolver that caches
// does not outlive a session by much.
const dnsTTL = 5

// Answer is the DNS responder's reply to one query message: a granted
// name's A question gets its fake address (fake allocates it), every
// other question about a granted name an empty NOERROR, and a name no
// rule admits NXDOMAIN. Nothing is ever asked upstream, so query names
// carry nothing out. A message that is not one standard query gets
// FORMERR (or nothing, when it cannot even be parsed).
func Answer(query []byte, granted func(name string) bool, fake func(name string) ([4]byte, error)) ([]byte, string, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, "", false
	}
	qs, err := p.AllQuestions()
	resp := dnsmessage.Message{Header: dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode,
		RecursionDesired: h.RecursionDesired, RecursionAvailable: true, Authoritative: true}}
	if err != nil || h.Response || h.OpCode != 0 || len(qs) != 1 {
		resp.RCode = dnsmessage.RCodeFormatError
		b, _ := resp.Pack()
		return b, "", false
	}
	q := qs[0]
	resp.Questions = qs
	name := strings.TrimSuffix(strings.ToLower(q.Name.String()), ".")
	if !granted(name) {
		resp.RCode = dnsmessage.RCodeNameError
		b, _ := resp.Pack()
		return b, name, false
	}
	if q.Type == dnsmessage.TypeA && q.Class == dnsmessage.ClassINET {
		a, err := fake(name)
		if err != nil {
			resp.RCode = dnsmessage.RCodeServerFailure
		} else {
			resp.Answers = []dnsmessage.Resource{{
				Header: dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: dnsTTL},
				Body:   &dnsmessage.AResource{A: a},
			}}
		}
	}
	b, err := resp.Pack()
	if err != nil {
		return nil, name, true
	}
	return b, name, true
}

// listenDNS serves the responder on one address inside.
func (f *Filter) listenDNS(e Endpoint) error {
	if e.UDP {
		return f.listen(e, nil, func(r *udpRelay) { r.local = f.answerDNS })
	}
	return f.listen(e, f.serveDNSTCP, nil)
}

// answerDNS answers one query, logging a refused name.
func (f *Filter) answerDNS(q []byte) []byte {
	resp, name, ok := Answer(q, f.grantsName, func(name string) ([4]byte, error) {
		a, err := f.fake(name)
		return a.As4(), err
	})
	if !ok && name != "" {
		f.deny(RuleDNSRefused, name, "no network rule names "+name+": NXDOMAIN, nothing asked upstream")
	}
	return resp
}

// grantsName reports whether some name rule admits name, on any port.
func (f *Filter) grantsName(name string) bool {
	for _, r := range f.plan.Rules {
		if r.matchName(name) {
			return true
		}
	}
	return false
}

// serveDNSTCP answers length-prefixed queries on a TCP connection.
func (f *Filter) serveDNSTCP(c net.Conn) {
	for {
		c.SetReadDeadline(time.Now().Add(handshakeTimeout))
		var n [2]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		resp := f.answerDNS(q)
		if resp == nil {
			return
		}
		out := binary.BigEndian.AppendUint16(nil, uint16(len(resp)))
		if _, err := c.Write(append(out, resp...)); err != nil {
			return
		}
	}
}
