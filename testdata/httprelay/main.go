// Command httprelay is the floor of any stdio-to-HTTP bridge written with
// net/http, for BenchmarkGateway: `httprelay ADDR CMD [ARGS...]` starts the
// command and serves POST /mcp on ADDR. A request's body goes to the
// command's stdin as one line and the next line from its stdout comes back
// as the JSON answer (202 for a message without an id); nothing is parsed,
// checked or routed. It serves one session, one call at a time.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sync"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: httprelay ADDR CMD [ARGS...]")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[2], os.Args[3:]...)
	cmd.Stderr = os.Stderr
	in, out, err := start(cmd)
	if err != nil {
		fmt.Fprintln(os.Stderr, "httprelay:", err)
		os.Exit(1)
	}
	var mu sync.Mutex
	var body []byte
	http.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		buf := bytes.NewBuffer(body[:0])
		if _, err := buf.ReadFrom(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = append(buf.Bytes(), '\n')
		if _, err := in.Write(body); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Mcp-Session-Id", "1")
		if !bytes.Contains(body, []byte(`"id"`)) {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		line, err := out.ReadSlice('\n')
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(line)
	})
	err = http.ListenAndServe(os.Args[1], nil)
	fmt.Fprintln(os.Stderr, err)
	io.WriteString(in, "")
	os.Exit(1)
}

// start runs cmd with pipes on its stdin and stdout.
func start(cmd *exec.Cmd) (io.WriteCloser, *bufio.Reader, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	return in, bufio.NewReaderSize(stdout, 64<<10), cmd.Start()
}
