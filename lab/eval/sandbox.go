package eval

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Sandbox is the world one case runs in. Everything lives under Root:
//
//	Root/home     HOME, with canaries (.ssh/id_rsa, .aws/credentials, .env, .bashrc)
//	Root/ws       the workspace (the server's legitimate root)
//	Root/.env     a second .env just outside the workspace ({{WS}}/../.env)
//	Root/tmp      per-case stand-in for /tmp staging (also TMPDIR)
//	Root/markers  where a forbidden exec leaves its marker
//
// plus a TCP and a UDP sink on 127.0.0.1 (attacker endpoints) and the weather
// API on 127.0.0.2 (a legitimate endpoint).
type Sandbox struct {
	Root, Home, WS, TMP, MarkerDir string
	// Token tags the server's environment (MCPGUARD_CASE=Token) so that the
	// harness can find and kill every process the case left behind.
	Token string
	// Canaries maps a canary name to its random value for this case.
	Canaries map[string]string
	// CanaryFiles maps a canary name to the file that holds it.
	CanaryFiles map[string]string

	TCP     *TCPSink
	UDP     *UDPSink
	Weather *WeatherAPI
	// shm is the System V segment of Setup.SharedMemory, if shmHeld.
	shm     int
	shmHeld bool
	// Netlink is a NETLINK_USERSOCK socket of the harness: a host process
	// a server may message (its port id is the TCP sink's port).
	Netlink *NetlinkSink
}

// NewSandbox creates a sandbox in a new directory under parent.
func NewSandbox(parent, name string) (*Sandbox, error) {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("new sandbox: %w", err)
	}
	root, err := os.MkdirTemp(parent, safeName(name)+"-")
	if err != nil {
		return nil, fmt.Errorf("new sandbox: %w", err)
	}
	// Resolve symlinks (/tmp may be one) so paths the server sees and
	// paths the oracles compare are the same strings.
	if root, err = filepath.EvalSymlinks(root); err != nil {
		return nil, fmt.Errorf("new sandbox: %w", err)
	}
	sb := &Sandbox{
		Root:      root,
		Home:      filepath.Join(root, "home"),
		WS:        filepath.Join(root, "ws"),
		TMP:       filepath.Join(root, "tmp"),
		MarkerDir: filepath.Join(root, "markers"),
		Token:     randHex(12),
	}
	if err := sb.plant(); err != nil {
		sb.Close()
		return nil, err
	}
	if err := sb.listenTCPAndNetlink(); err != nil {
		sb.Close()
		return nil, err
	}
	if sb.UDP, err = NewUDPSink("127.0.0.1:0"); err != nil {
		sb.Close()
		return nil, err
	}
	if sb.Weather, err = NewWeatherAPI("127.0.0.2:0"); err != nil {
		sb.Close()
		return nil, err
	}
	// The TCP sink also takes the weather API's port on 127.0.0.1: a
	// server granted the API may send there (the port on another
	// address). Rarely the port is taken there; the sink then lacks it.
	sb.TCP.Also(fmt.Sprintf("127.0.0.1:%d", sb.Weather.ln.Addr().(*net.TCPAddr).Port))
	return sb, nil
}

// listenTCPAndNetlink opens the TCP sink and the netlink sink bound to the
// same number as its port id (the servers address both by the one port).
// A netlink port id may already be taken: a process's first netlink socket
// is auto-bound to its pid, and pids overlap the ephemeral port range. The
// pair is then tried again on a fresh port.
func (sb *Sandbox) listenTCPAndNetlink() error {
	var err error
	for range 16 {
		if sb.TCP, err = NewTCPSink("127.0.0.1:0"); err != nil {
			return err
		}
		if sb.Netlink, err = NewNetlinkSink(sb.TCP.ln.Addr().(*net.TCPAddr).Port); err == nil {
			return nil
		}
		sb.TCP.Close()
		sb.TCP = nil
	}
	return err
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == os.PathSeparator || r == ' ' {
			return '_'
		}
		return r
	}, s)
}

// randAlnum returns n random letters and digits.
func randAlnum(n int) string {
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	rand.Read(b)
	for i := range b {
		b[i] = alnum[int(b[i])%len(alnum)]
	}
	return string(b)
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// plant creates the directories and the canary files, each with a fresh
// random value, so a canary seen anywhere can only have come from this case.
func (sb *Sandbox) plant() error {
	sb.Canaries = map[string]string{
		CanarySSH:    "CANARY-SSH-" + randHex(16),
		CanaryAWS:    "CANARY-AWS-" + randHex(16),
		CanaryDotenv: "CANARY-DOTENV-" + randHex(16),
		CanaryEnv:    "CANARY-ENV-" + randHex(16),
		CanaryBashrc: "CANARY-BASHRC-" + randHex(16),
		// Shaped as what they stand for, so that a secret check can know
		// them: a GitHub token and an AWS access key id.
		CanaryGHToken:  "ghp_" + randAlnum(36),
		CanaryAWSKeyID: "AKIA" + strings.ToUpper(randHex(8)),
	}
	c := sb.Canaries
	files := map[string]string{
		".ssh/id_rsa":     "-----BEGIN OPENSSH PRIVATE KEY-----\n" + c[CanarySSH] + "\n-----END OPENSSH PRIVATE KEY-----\n",
		".ssh/id_rsa.pub": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHVzZXIta2V5LXB1YmxpYy1wYXJ0LW9ubHk user@sandbox\n",
		".aws/credentials": "[default]\naws_access_key_id = " + c[CanaryAWSKeyID] +
			"\naws_secret_access_key = " + c[CanaryAWS] + "\n",
		".env":    "DATABASE_URL=postgres://app:" + c[CanaryDotenv] + "@db/app\n",
		".bashrc": "# sandbox .bashrc " + c[CanaryBashrc] + "\nexport PATH=$PATH\n",
	}
	sb.CanaryFiles = map[string]string{
		CanarySSH:    filepath.Join(sb.Home, ".ssh/id_rsa"),
		CanaryAWS:    filepath.Join(sb.Home, ".aws/credentials"),
		CanaryDotenv: filepath.Join(sb.Home, ".env"),
		CanaryBashrc: filepath.Join(sb.Home, ".bashrc"),
	}
	for _, d := range []string{sb.Home, sb.WS, sb.TMP, sb.MarkerDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("plant sandbox: %w", err)
		}
	}
	for rel, content := range files {
		p := filepath.Join(sb.Home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fmt.Errorf("plant sandbox: %w", err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			return fmt.Errorf("plant sandbox: %w", err)
		}
	}
	// The same .env just outside the workspace: a server confined to WS
	// must not reach {{WS}}/../.env.
	if err := os.WriteFile(filepath.Join(sb.Root, ".env"), []byte(files[".env"]), 0o600); err != nil {
		return fmt.Errorf("plant sandbox: %w", err)
	}
	return nil
}

// Vars returns the template variables of this sandbox.
func (sb *Sandbox) Vars() map[string]string {
	v := map[string]string{
		"WS":            sb.WS,
		"HOME":          sb.Home,
		"TMP":           sb.TMP,
		"MARKER_DIR":    sb.MarkerDir,
		"CANARY_SSH":    sb.Canaries[CanarySSH],
		"CANARY_AWS":    sb.Canaries[CanaryAWS],
		"CANARY_DOTENV": sb.Canaries[CanaryDotenv],
		"CANARY_ENV":    sb.Canaries[CanaryEnv],
		"CANARY_BASHRC": sb.Canaries[CanaryBashrc],

		"CANARY_GH_TOKEN":   sb.Canaries[CanaryGHToken],
		"CANARY_AWS_KEY_ID": sb.Canaries[CanaryAWSKeyID],
	}
	if sb.TCP != nil {
		v["SINK_TCP"] = sb.TCP.Addr()
	}
	if sb.UDP != nil {
		v["SINK_UDP"] = sb.UDP.Addr()
	}
	if sb.Weather != nil {
		v["WEATHER_URL"] = sb.Weather.URL()
	}
	return v
}

// Expand replaces {{NAME}} in s; unknown names are an error (the loader
// already rejected them, this is the second line of defence).
func (sb *Sandbox) Expand(s string) (string, error) {
	vars := sb.Vars()
	var missing []string
	out := templateRE.ReplaceAllStringFunc(s, func(m string) string {
		k := m[2 : len(m)-2]
		v, ok := vars[k]
		if !ok {
			missing = append(missing, k)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("unknown template variable(s) %v", missing)
	}
	return out, nil
}

// ExpandJSON expands templates inside every string of a JSON value, so a
// path with a quote in it still yields valid JSON.
func (sb *Sandbox) ExpandJSON(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 {
		return map[string]any{}, nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var walk func(any) (any, error)
	walk = func(v any) (any, error) {
		switch t := v.(type) {
		case string:
			return sb.Expand(t)
		case []any:
			for i := range t {
				e, err := walk(t[i])
				if err != nil {
					return nil, err
				}
				t[i] = e
			}
		case map[string]any:
			for k := range t {
				e, err := walk(t[k])
				if err != nil {
					return nil, err
				}
				t[k] = e
			}
		}
		return v, nil
	}
	out, err := walk(v)
	if err != nil {
		return nil, err
	}
	m, ok := out.(map[string]any)
	if !ok {
		return nil, errors.New("arguments are not a JSON object")
	}
	return m, nil
}

// Apply creates the case's setup files, directories and symlinks.
func (sb *Sandbox) Apply(s Setup) error {
	for _, d := range s.Dirs {
		p, err := sb.Expand(d)
		if err != nil {
			return fmt.Errorf("setup dir: %w", err)
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("setup dir: %w", err)
		}
	}
	for k, v := range s.Files {
		p, err := sb.Expand(k)
		if err != nil {
			return fmt.Errorf("setup file: %w", err)
		}
		content, err := sb.Expand(v)
		if err != nil {
			return fmt.Errorf("setup file %s: %w", k, err)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("setup file: %w", err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return fmt.Errorf("setup file: %w", err)
		}
	}
	for k, v := range s.Symlinks {
		p, err := sb.Expand(k)
		if err != nil {
			return fmt.Errorf("setup symlink: %w", err)
		}
		target, err := sb.Expand(v)
		if err != nil {
			return fmt.Errorf("setup symlink %s: %w", k, err)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("setup symlink: %w", err)
		}
		if err := os.Symlink(target, p); err != nil {
			return fmt.Errorf("setup symlink: %w", err)
		}
	}
	if s.SharedMemory != "" && !sb.shmHeld {
		text, err := sb.Expand(s.SharedMemory)
		if err != nil {
			return fmt.Errorf("setup shared memory: %w", err)
		}
		if sb.shm, err = holdShm([]byte(text)); err != nil {
			return fmt.Errorf("setup shared memory: %w", err)
		}
		sb.shmHeld = true
	}
	return nil
}

// Env is the server's environment: a minimal, fixed base (never the
// harness's own, which could hold real secrets), the sandbox's HOME and
// TMPDIR, the API_TOKEN canary and the addresses.
func (sb *Sandbox) Env() []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	return []string{
		"PATH=" + path,
		"HOME=" + sb.Home,
		"USER=sandbox",
		"LANG=C.UTF-8",
		"TMPDIR=" + sb.TMP,
		"API_TOKEN=" + sb.Canaries[CanaryEnv],
		"MCPGUARD_CASE=" + sb.Token,
		"MCP_WS=" + sb.WS,
		"MCP_SINK_TCP=" + sb.TCP.Addr(),
		"MCP_SINK_UDP=" + sb.UDP.Addr(),
		"MCP_MARKER_DIR=" + sb.MarkerDir,
		"MCP_WEATHER_URL=" + sb.Weather.URL(),
	}
}

// LastActivity is when a sink last received anything (zero when never).
func (sb *Sandbox) LastActivity() time.Time {
	last := sb.TCP.LastActivity()
	for _, t := range []time.Time{sb.UDP.LastActivity(), sb.Netlink.LastActivity()} {
		if t.After(last) {
			last = t
		}
	}
	return last
}

// Close stops the listeners and removes the sandbox directory.
func (sb *Sandbox) Close() error {
	var errs []error
	if sb.TCP != nil {
		errs = append(errs, sb.TCP.Close())
	}
	if sb.UDP != nil {
		errs = append(errs, sb.UDP.Close())
	}
	if sb.Weather != nil {
		errs = append(errs, sb.Weather.Close())
	}
	if sb.Netlink != nil {
		errs = append(errs, sb.Netlink.Close())
	}
	if sb.shmHeld {
		errs = append(errs, removeShm(sb.shm))
		sb.shmHeld = false
	}
	if sb.Root != "" {
		errs = append(errs, os.RemoveAll(sb.Root))
	}
	return errors.Join(errs...)
}

// sinkLog records what a sink received.
type sinkLog struct {
	mu   sync.Mutex
	data []byte
	last time.Time
}

func (l *sinkLog) add(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.data = append(l.data, b...)
	l.last = time.Now()
}

func (l *sinkLog) snapshot() ([]byte, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.data), l.last
}

// TCPSink accepts connections and records every byte received. A
// connection that sent an HTTP request gets a 204, so an exfiltrating
// fetch completes instead of hanging.
type TCPSink struct {
	ln    net.Listener
	extra []net.Listener
	log   sinkLog
	wg    sync.WaitGroup
}

// NewTCPSink listens on addr.
func NewTCPSink(addr string) (*TCPSink, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcp sink: %w", err)
	}
	s := &TCPSink{ln: ln}
	s.wg.Add(1)
	go s.serve(ln)
	return s, nil
}

// Also makes the sink listen on addr too, recording into the same log
// (the weather API's port on 127.0.0.1: the granted port on another
// address).
func (s *TCPSink) Also(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("tcp sink: %w", err)
	}
	s.extra = append(s.extra, ln)
	s.wg.Add(1)
	go s.serve(ln)
	return nil
}

func (s *TCPSink) serve(ln net.Listener) {
	defer s.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			s.log.add(nil) // a connection alone is activity
			buf := make([]byte, 32<<10)
			var head []byte
			replied := false
			for {
				c.SetReadDeadline(time.Now().Add(2 * time.Second))
				n, err := c.Read(buf)
				if n > 0 {
					s.log.add(buf[:n])
					if len(head) < 4096 {
						head = append(head, buf[:n]...)
					}
					if !replied && httpRequestComplete(head) {
						c.Write([]byte("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"))
						replied = true
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// httpRequestComplete reports whether b starts with an HTTP request whose
// headers are complete (the body, if any, keeps arriving and is recorded).
func httpRequestComplete(b []byte) bool {
	for _, m := range []string{"GET ", "POST ", "PUT ", "HEAD "} {
		if bytes.HasPrefix(b, []byte(m)) {
			return bytes.Contains(b, []byte("\r\n\r\n"))
		}
	}
	return false
}

// Addr is host:port.
func (s *TCPSink) Addr() string { return s.ln.Addr().String() }

// Received returns everything received so far.
func (s *TCPSink) Received() []byte { b, _ := s.log.snapshot(); return b }

// LastActivity is when the sink last saw a connection or data.
func (s *TCPSink) LastActivity() time.Time { _, t := s.log.snapshot(); return t }

// Close stops the sink and waits for its connections.
func (s *TCPSink) Close() error {
	err := s.ln.Close()
	for _, ln := range s.extra {
		ln.Close()
	}
	s.wg.Wait()
	return err
}

// UDPSink records every datagram received.
type UDPSink struct {
	pc  net.PacketConn
	log sinkLog
	wg  sync.WaitGroup
}

// NewUDPSink listens on addr.
func NewUDPSink(addr string) (*UDPSink, error) {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("udp sink: %w", err)
	}
	s := &UDPSink{pc: pc}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		buf := make([]byte, 64<<10)
		for {
			n, _, err := pc.ReadFrom(buf)
			if n > 0 {
				s.log.add(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	return s, nil
}

// Addr is host:port.
func (s *UDPSink) Addr() string { return s.pc.LocalAddr().String() }

// Received returns everything received so far, datagrams concatenated.
func (s *UDPSink) Received() []byte { b, _ := s.log.snapshot(); return b }

// LastActivity is when the sink last received a datagram.
func (s *UDPSink) LastActivity() time.Time { _, t := s.log.snapshot(); return t }

// Close stops the sink.
func (s *UDPSink) Close() error {
	err := s.pc.Close()
	s.wg.Wait()
	return err
}

// WeatherAPI is the legitimate HTTP service benign servers call: GET
// /weather?city=NAME returns a deterministic JSON forecast.
type WeatherAPI struct {
	ln  net.Listener
	srv *http.Server
}

// NewWeatherAPI serves on addr (127.0.0.2:0 in the corpus).
func NewWeatherAPI(addr string) (*WeatherAPI, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("weather api: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /weather", func(w http.ResponseWriter, r *http.Request) {
		city := r.URL.Query().Get("city")
		if city == "" {
			http.Error(w, `{"error":"missing city"}`, http.StatusBadRequest)
			return
		}
		sum := 0
		for _, c := range city {
			sum += int(c)
		}
		conds := []string{"sunny", "cloudy", "rain", "snow", "fog"}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"city":       city,
			"temp_c":     sum%35 - 5,
			"conditions": conds[sum%len(conds)],
		})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return &WeatherAPI{ln: ln, srv: srv}, nil
}

// URL is the API's base URL, http://127.0.0.2:PORT.
func (w *WeatherAPI) URL() string { return "http://" + w.ln.Addr().String() }

// Close stops the API.
func (w *WeatherAPI) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return w.srv.Shutdown(ctx)
}
