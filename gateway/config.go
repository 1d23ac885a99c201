// Package gateway serves guarded MCP servers over Streamable HTTP, the
// remote transport of the MCP specification (2025-03-26 and later): one
// endpoint per server at /servers/<name>/mcp and one aggregate endpoint at
// /mcp. Every client session gets its own guard.Proxy, and so its own server
// process and its own L3 domain; the gateway moves JSON-RPC messages between
// HTTP and the proxy's stdio without changing them.
package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
)

// ErrConfig marks a gateway.json that cannot be used.
var ErrConfig = errors.New("bad gateway config")

// Config is gateway.json.
type Config struct {
	// AllowedOrigins lists the browser origins (scheme://host[:port]) whose
	// requests are served. A request with any other Origin gets 403; a
	// request without one (a non-browser client) is served. Unset, only
	// pages on this machine (localhost, 127.0.0.1, [::1]) may call.
	AllowedOrigins []string `json:"allowed_origins,omitempty"`
	// AllowedHosts lists the Host header values served when the gateway
	// listens off loopback (DNS rebinding); on loopback, loopback names
	// are always served.
	AllowedHosts []string `json:"allowed_hosts,omitempty"`
	// Audit is the file the gateway's own events go to (one per request,
	// with the caller's identity); "-" for stderr.
	Audit string `json:"audit,omitempty"`
	// Tokens are the bearer tokens accepted. None configured: no
	// authentication, which the CLI allows on loopback only.
	Tokens []Token `json:"tokens,omitempty"`
	// OAuth, when set, also accepts JWT access tokens of an authorization
	// server (OAuth 2.1 resource-server mode); see OAuth.
	OAuth  *OAuth `json:"oauth,omitempty"`
	Limits Limits `json:"limits,omitzero"`
	// Servers by name; the name is the path segment and the tool prefix.
	Servers map[string]*ServerConfig `json:"servers"`

	dir string // of the config file, for relative paths
}

// Token is one bearer token: its SHA-256 (hex), never the token itself.
type Token struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	// Servers the token may reach; "*" for all.
	Servers []string `json:"servers"`
}

// Limits bound what clients can make the gateway hold.
type Limits struct {
	// MaxSessions over all endpoints (0: DefaultMaxSessions).
	MaxSessions int `json:"max_sessions,omitempty"`
	// MaxSessionsPerIdentity bounds one caller's sessions (0: max_sessions
	// without authentication, a quarter of it with).
	MaxSessionsPerIdentity int `json:"max_sessions_per_identity,omitempty"`
	// MaxRequestsPerSession bounds the HTTP requests (POSTs in flight and
	// streams) open on one session at once (0: DefaultMaxRequestsPerSession).
	MaxRequestsPerSession int `json:"max_requests_per_session,omitempty"`
	// MaxConnections bounds the open connections; one past it is closed
	// at once (0: DefaultMaxConnections). With authentication, one
	// caller's open requests are bounded to a quarter of it, and a
	// connection past it closes the oldest one that has not yet carried a
	// request with a valid token, if any, instead of being closed.
	MaxConnections int `json:"max_connections,omitempty"`
	// MaxMemory is the budget for the memory the sessions' server
	// processes use (their cgroup's, else the proportional set size of their
	// process trees), in bytes or as "8GiB" (0: half the machine's memory).
	// A new session that would pass it gets 503.
	MaxMemory ByteSize `json:"max_memory,omitzero"`
	// MaxMessage is the largest request body in bytes (0: DefaultMaxMessage).
	MaxMessage int64 `json:"max_message,omitempty"`
	// HeaderTimeout is the time a client has to send a request's headers
	// (0: DefaultHeaderTimeout).
	HeaderTimeout Duration `json:"header_timeout,omitzero"`
	// BodyTimeout is the time a client has to send a request's body once
	// its headers are in (0: DefaultBodyTimeout).
	BodyTimeout Duration `json:"body_timeout,omitzero"`
	// ConnIdleTimeout closes a kept-alive connection with no request for
	// this long (0: DefaultConnIdleTimeout). Open SSE streams are not idle.
	ConnIdleTimeout Duration `json:"conn_idle_timeout,omitzero"`
	// IdleTimeout ends a session that saw no request and held no stream
	// for this long (0: DefaultIdleTimeout).
	IdleTimeout Duration `json:"idle_timeout,omitzero"`
}

// Defaults for Limits.
const (
	DefaultMaxSessions           = 256
	DefaultMaxRequestsPerSession = 64
	DefaultMaxConnections        = 1024
	DefaultMaxMessage            = 4 << 20
	DefaultHeaderTimeout         = 10 * time.Second
	DefaultBodyTimeout           = 30 * time.Second
	DefaultConnIdleTimeout       = 60 * time.Second
	DefaultIdleTimeout           = 10 * time.Minute
)

// ServerConfig is one guarded server: the same choices as `mcpguard run`.
type ServerConfig struct {
	// Config is the defence config (C0, C-app, C-full-landlock, ...).
	Config   string `json:"config"`
	Policy   string `json:"policy,omitempty"`
	Manifest string `json:"manifest,omitempty"`
	// Audit is where the layers' events for this server go; "-" for stderr.
	Audit string `json:"audit,omitempty"`
	// L3 picks the kernel backend: auto, ebpf or landlock.
	L3   string            `json:"l3,omitempty"`
	Vars map[string]string `json:"vars,omitempty"`
	// Command is the server's argv (a stdio server) ...
	Command []string `json:"command,omitempty"`
	Dir     string   `json:"dir,omitempty"`
	Env     []string `json:"env,omitempty"`
	// ... or URL is a remote Streamable HTTP server, guarded by L1 and L2.
	URL string `json:"url,omitempty"`
	// Headers are sent to a remote server (e.g. its own Authorization).
	Headers map[string]string `json:"headers,omitempty"`
	// Warm is how many sessions of the server to keep started before a
	// client asks for one, so that a new session does not wait for its
	// server to start (0: none).
	Warm int `json:"warm,omitempty"`
}

// Duration is a time.Duration written as "30s" in JSON.
type Duration time.Duration

// UnmarshalJSON reads "1m30s" or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("duration: want \"30s\" or seconds, got %s", b)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// MarshalJSON writes the duration as "30s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// ByteSize is a number of bytes, written as a number or as "512MiB",
// "8GiB", "100MB" in JSON.
type ByteSize int64

// UnmarshalJSON reads a number of bytes or a string with a unit.
func (b *ByteSize) UnmarshalJSON(data []byte) error {
	var n int64
	if err := json.Unmarshal(data, &n); err == nil {
		*b = ByteSize(n)
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("size: want bytes or \"8GiB\", got %s", data)
	}
	v, err := humanize.ParseBytes(s)
	if err != nil || v > math.MaxInt64 {
		return fmt.Errorf("size %q: want bytes or a number with KiB, MiB, GiB, KB, MB or GB", s)
	}
	*b = ByteSize(v)
	return nil
}

// MarshalJSON writes the size in bytes.
func (b ByteSize) MarshalJSON() ([]byte, error) { return json.Marshal(int64(b)) }

var serverName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

// toolSep separates the server's name from the tool's on the aggregate
// endpoint (fs__read_file). Server names must not contain it.
const toolSep = "__"

// LoadConfig reads and checks gateway.json; relative paths in it are
// relative to the file.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read gateway config: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("gateway config dir: %w", err)
	}
	c.dir = abs
	return c, nil
}

// ParseConfig decodes and checks a gateway config; unknown fields are errors.
func ParseConfig(b []byte) (*Config, error) {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if err := c.Check(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Check reports what makes c unusable, wrapping ErrConfig.
func (c *Config) Check() error {
	if err := c.check(); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return nil
}

func (c *Config) check() error {
	if len(c.Servers) == 0 {
		return errors.New("no servers")
	}
	for name, s := range c.Servers {
		if !serverName.MatchString(name) || strings.Contains(name, toolSep) {
			return fmt.Errorf("server name %q: want letters, digits, - and single _", name)
		}
		if s == nil {
			return fmt.Errorf("server %s: empty", name)
		}
		if s.Warm < 0 {
			return fmt.Errorf("server %s: warm must not be negative", name)
		}
		if s.Config == "" {
			return fmt.Errorf("server %s: no config (C0, C-app, ...)", name)
		}
		switch {
		case len(s.Command) > 0 && s.URL != "":
			return fmt.Errorf("server %s: command and url are exclusive", name)
		case len(s.Command) == 0 && s.URL == "":
			return fmt.Errorf("server %s: needs a command or a url", name)
		case s.URL != "":
			u, err := url.Parse(s.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("server %s: url %q is not an http(s) URL", name, s.URL)
			}
		}
	}
	seen := map[string]bool{}
	for i, t := range c.Tokens {
		if t.Name == "" {
			return fmt.Errorf("token %d: no name", i)
		}
		if seen[t.Name] {
			return fmt.Errorf("token %s: named twice", t.Name)
		}
		seen[t.Name] = true
		h, err := hex.DecodeString(t.SHA256)
		if err != nil || len(h) != sha256.Size {
			return fmt.Errorf("token %s: sha256 must be 64 hex digits", t.Name)
		}
		for _, s := range t.Servers {
			if s != "*" && c.Servers[s] == nil {
				return fmt.Errorf("token %s: unknown server %q", t.Name, s)
			}
		}
	}
	if c.OAuth != nil {
		if err := c.OAuth.check(); err != nil {
			return err
		}
	}
	for _, o := range c.AllowedOrigins {
		if canonOrigin(o) == "" {
			return fmt.Errorf("allowed origin %q: want scheme://host[:port]", o)
		}
	}
	l := c.Limits
	if l.MaxSessions < 0 || l.MaxSessionsPerIdentity < 0 || l.MaxRequestsPerSession < 0 || l.MaxConnections < 0 ||
		l.MaxMemory < 0 || l.MaxMessage < 0 || l.HeaderTimeout < 0 || l.BodyTimeout < 0 || l.ConnIdleTimeout < 0 || l.IdleTimeout < 0 {
		return errors.New("limits must not be negative")
	}
	return nil
}

// Authenticated reports whether requests need a bearer token.
func (c *Config) Authenticated() bool { return len(c.Tokens) > 0 || c.OAuth != nil }

// path resolves a path from the config file against its directory.
func (c *Config) path(p string) string {
	if p == "" || p == "-" || filepath.IsAbs(p) || c.dir == "" {
		return p
	}
	return filepath.Join(c.dir, p)
}

// names lists the servers in a stable order.
func (c *Config) names() []string {
	var ns []string
	for n := range c.Servers {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns
}

func (l Limits) maxSessions() int { return orDefault(l.MaxSessions, DefaultMaxSessions) }

// maxPerIdentity is one caller's share of the sessions: all of them when
// there is only one caller (no authentication), a quarter with.
func (l Limits) maxPerIdentity(authenticated bool) int {
	if l.MaxSessionsPerIdentity > 0 {
		return l.MaxSessionsPerIdentity
	}
	if !authenticated {
		return l.maxSessions()
	}
	return max(1, l.maxSessions()/4)
}

func (l Limits) maxRequestsPerSession() int {
	return orDefault(l.MaxRequestsPerSession, DefaultMaxRequestsPerSession)
}

func (l Limits) maxConnections() int { return orDefault(l.MaxConnections, DefaultMaxConnections) }

func (l Limits) maxMessage() int64 { return orDefault(l.MaxMessage, DefaultMaxMessage) }

func (l Limits) headerTimeout() time.Duration {
	return orDefault(time.Duration(l.HeaderTimeout), DefaultHeaderTimeout)
}

func (l Limits) bodyTimeout() time.Duration {
	return orDefault(time.Duration(l.BodyTimeout), DefaultBodyTimeout)
}

func (l Limits) connIdleTimeout() time.Duration {
	return orDefault(time.Duration(l.ConnIdleTimeout), DefaultConnIdleTimeout)
}

func (l Limits) idleTimeout() time.Duration {
	return orDefault(time.Duration(l.IdleTimeout), DefaultIdleTimeout)
}

func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// HashToken is the SHA-256 (hex) to put in a Token for a secret.
func HashToken(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// isLoopbackHost reports whether host (a Host header or URL host, with or
// without a port) names this machine.
func isLoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// canonOrigin is an origin as browsers send it (scheme://host[:port],
// lowercased), or "" when o is not one.
func canonOrigin(o string) string {
	u, err := url.Parse(o)
	if err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return ""
	}
	return strings.ToLower(u.Scheme + "://" + u.Host)
}
