package egress

import (
	"bufio"
	"bytes"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// FuzzAnswer: whatever a server sends the DNS responder, it answers
// without failing, and an answer is one DNS message with the query's id.
func FuzzAnswer(f *testing.F) {
	q := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, RecursionDesired: true})
	q.StartQuestions()
	q.Question(dnsmessage.Question{Name: dnsmessage.MustNewName("api.example.com."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	b, _ := q.Finish()
	f.Add(b)
	f.Add([]byte{0, 1, 0, 0, 0, 2})
	f.Fuzz(func(t *testing.T, query []byte) {
		granted := func(n string) bool { return n == "api.example.com" }
		resp, _, _ := Answer(query, granted, func(string) ([4]byte, error) { return [4]byte{198, 18, 0, 1}, nil })
		if resp == nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(resp)
		if err != nil {
			t.Fatalf("answer does not parse: %v", err)
		}
		var qh dnsmessage.Parser
		if qhd, err := qh.Start(query); err == nil && h.ID != qhd.ID {
			t.Fatalf("answer id %d, query id %d", h.ID, qhd.ID)
		}
	})
}

// FuzzClientHelloName: any first bytes of a connection are read without
// failing, and what was read is a prefix of them (it goes on as it came).
func FuzzClientHelloName(f *testing.F) {
	f.Add([]byte{0x16, 3, 1, 0, 5, 1, 0, 0, 1, 0})
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, head, _ := ClientHelloName(bytes.NewReader(data))
		if !bytes.HasPrefix(data, head) {
			t.Fatalf("read %q, not a prefix of %q", head, data)
		}
	})
}

// FuzzSOCKSRequest: any SOCKS5 request is parsed or refused without
// failing; a parsed host is never empty.
func FuzzSOCKSRequest(f *testing.F) {
	f.Add([]byte{5, 1, 0, 3, 3, 'a', '.', 'b', 0, 80})
	f.Add([]byte{5, 1, 0, 1, 127, 0, 0, 1, 1, 187})
	f.Fuzz(func(t *testing.T, data []byte) {
		host, _, _, err := readSOCKSRequest(bufio.NewReader(bytes.NewReader(data)))
		if err == nil && host == "" && len(data) > 4 && data[3] != socksDomain {
			t.Fatalf("no host from %x", data)
		}
	})
}
