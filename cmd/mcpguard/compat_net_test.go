package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The compatibility matrix's servers that need a network grant: a real
// npm server on a local Redis at 127.0.0.1 (policy init --net), and a
// weather API named by domain, over HTTPS with a test CA, reached by the
// mcp-go weather server (Go's net/http: through the egress filter's proxy,
// HTTPS_PROXY) and by the node workspace server (fetch(): the filter's
// DNS answer and its fake address, TLS server name checked).

// apiName is the test API's name: it exists only in the egress filter,
// which the policy pins to the API's loopback address (resolve).
const apiName = "api.mcpguard.test"

func netCompatServers() []compatServer {
	return []compatServer{
		{
			name:   "server-redis",
			launch: redisServer,
			calls: func(ws string) []compatCall {
				return []compatCall{
					{Tool: "set", Arguments: map[string]any{"key": "compat", "value": "green tea"}, Expect: "Successfully set"},
					{Tool: "get", Arguments: map[string]any{"key": "compat"}, Expect: "green tea"},
				}
			},
		},
		{
			name:        "weather over HTTPS by name",
			launch:      httpsWeather(false),
			env:         func(ws string) map[string]string { return map[string]string{"SSL_CERT_FILE": caFile(ws)} },
			setup:       writeCA,
			edit:        pinAPI,
			needsEgress: true,
			calls: func(ws string) []compatCall {
				return []compatCall{{Tool: "get_current_weather", Arguments: map[string]any{"city": "Lisbon"}, Expect: "Lisbon"}}
			},
		},
		{
			name:        "node fetch over HTTPS by name",
			launch:      httpsWeather(true),
			env:         func(ws string) map[string]string { return map[string]string{"NODE_EXTRA_CA_CERTS": caFile(ws)} },
			setup:       writeCA,
			edit:        pinAPI,
			needsEgress: true,
			calls: func(ws string) []compatCall {
				return []compatCall{{Tool: "get_weather", Arguments: map[string]any{"city": "Lisbon"}, Expect: "Lisbon"}}
			},
		},
	}
}

// redisServer starts a redis-server of its own on a free loopback port
// (Debian's redis-server, which scripts/deps.sh installs) and launches
// @modelcontextprotocol/server-redis on it; policy init learns the
// database with --net.
func redisServer(t *testing.T, e compatEnv) launchers {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	require.NoError(t, err, "redis-server not installed: run scripts/deps.sh")
	_, ps, _ := net.SplitHostPort(freePort(t))
	port, _ := strconv.Atoi(ps)
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; i < 50; i++ {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	l := npmPackage(t, e, "@modelcontextprotocol/server-redis", "mcp-server-redis", false, fmt.Sprintf("redis://127.0.0.1:%d", port))
	delete(l.argv, "node_modules/.bin")
	l.initFlags = []string{"--net", fmt.Sprintf("127.0.0.1:%d", port)}
	return l
}

// testAPI is the HTTPS weather API on loopback, with its CA.
type testAPI struct {
	port  int
	caPEM []byte
}

// api is the running test API (one per test process).
var api *testAPI

// startAPI serves GET /weather?city= over TLS on 127.0.0.1 with a
// certificate for apiName from a CA made here.
func startAPI(t *testing.T) *testAPI {
	t.Helper()
	if api != nil {
		return api
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mcpguard compat test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: apiName}, DNSNames: []string{apiName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	cert := tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /weather", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"city":%q,"temp_c":21,"conditions":"sunny"}`, r.URL.Query().Get("city"))
	})
	go http.Serve(ln, mux)
	api = &testAPI{port: ln.Addr().(*net.TCPAddr).Port, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}
	return api
}

// caFile is where a cell's workspace holds the test CA (its config/).
func caFile(ws string) string { return filepath.Join(ws, "config", "test-ca.pem") }

func writeCA(t *testing.T, ws string) {
	require.NoError(t, os.MkdirAll(filepath.Dir(caFile(ws)), 0o755))
	require.NoError(t, os.WriteFile(caFile(ws), api.caPEM, 0o644))
}

// httpsWeather launches the mcp-go weather server (or, node, the
// workspace server) with the test API's URL by name.
func httpsWeather(node bool) func(t *testing.T, e compatEnv) launchers {
	return func(t *testing.T, e compatEnv) launchers {
		t.Helper()
		a := startAPI(t)
		url := fmt.Sprintf("https://%s:%d", apiName, a.port)
		if node {
			script := filepath.Join(e.root, "testdata", "servers", "js", "workspace", "server.js")
			return launchers{argv: map[string][]string{"node": {e.node, script, "--ws", wsArg, "--weather-url", url}}}
		}
		return launchers{argv: map[string][]string{"binary": {corpusServer(t, e, "weather"), "--weather-url", url}}}
	}
}

// pinAPI is the documented edit for a name only this world knows: the
// API's name and port in network.allow, pinned to its loopback address
// (resolve), as an /etc/hosts entry would.
func pinAPI(t *testing.T, p map[string]any) {
	n, _ := p["network"].(map[string]any)
	if n == nil {
		n = map[string]any{}
	}
	allow, _ := n["allow"].([]any)
	n["allow"] = append(allow, map[string]any{"host": apiName, "ports": []any{api.port}, "resolve": []any{"127.0.0.1"}})
	p["network"] = n
}

// corpusServer is a testdata/servers Go server's binary: prebuilt by
// scripts/vmtest (MCPGUARD_SERVER_BIN), else built here.
func corpusServer(t *testing.T, e compatEnv, name string) string {
	t.Helper()
	if dir := os.Getenv("MCPGUARD_SERVER_BIN"); dir != "" {
		return filepath.Join(dir, name)
	}
	bin := filepath.Join(t.TempDir(), "mcp-go-"+name)
	out, err := exec.Command("go", "build", "-o", bin, filepath.Join(e.root, "testdata", "servers", name)).CombinedOutput()
	require.NoError(t, err, "build %s: %s", name, out)
	return bin
}
