package gateway_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/gateway"
)

// issuer is a stand-in authorization server: its JWKS, and tokens it signs.
type issuer struct {
	url string
	rsa *rsa.PrivateKey
	ec  *ecdsa.PrivateKey
}

func newIssuer(t *testing.T) *issuer {
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	iss := &issuer{rsa: rk, ec: ek}
	b64 := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{
			{"kid": "r1", "kty": "RSA", "use": "sig", "n": b64(rk.N.Bytes()), "e": b64(big.NewInt(int64(rk.E)).Bytes())},
			{"kid": "e1", "kty": "EC", "crv": "P-256", "x": b64(ek.X.FillBytes(make([]byte, 32))), "y": b64(ek.Y.FillBytes(make([]byte, 32)))},
		}})
	}))
	t.Cleanup(srv.Close)
	iss.url = srv.URL
	return iss
}

func (i *issuer) sign(t *testing.T, method jwt.SigningMethod, kid string, claims jwt.MapClaims) string {
	tok := jwt.NewWithClaims(method, claims)
	tok.Header["kid"] = kid
	var key any = i.rsa
	if kid == "e1" {
		key = i.ec
	}
	s, err := tok.SignedString(key)
	require.NoError(t, err)
	return s
}

// OAuth 2.1 resource-server mode: JWTs signed by the issuer's keys, for
// this gateway, unexpired, reach the servers their scopes name.
func TestOAuthResourceServer(t *testing.T) {
	iss := newIssuer(t)
	const resource = "http://gateway.test/"
	cfg := twoServers(t)
	cfg.OAuth = &gateway.OAuth{Issuer: iss.url, JWKSURL: iss.url + "/jwks", Resource: resource}
	g, srv := startGateway(t, cfg)
	alpha := srv.URL + "/servers/alpha/mcp"
	now := time.Now()
	claims := func(aud, scope string, exp time.Time) jwt.MapClaims {
		return jwt.MapClaims{"iss": iss.url, "sub": "agent-7", "aud": aud, "scope": scope, "exp": exp.Unix(), "iat": now.Unix()}
	}
	good := claims(resource, "mcp:alpha", now.Add(time.Hour))
	for name, c := range map[string]struct {
		token  string
		status int
	}{
		"wrong audience":      {iss.sign(t, jwt.SigningMethodRS256, "r1", claims("http://other/", "mcp:alpha", now.Add(time.Hour))), http.StatusUnauthorized},
		"expired":             {iss.sign(t, jwt.SigningMethodRS256, "r1", claims(resource, "mcp:alpha", now.Add(-time.Hour))), http.StatusUnauthorized},
		"unknown key":         {iss.sign(t, jwt.SigningMethodRS256, "r9", good), http.StatusUnauthorized},
		"alg none":            {noneToken(t, good), http.StatusUnauthorized},
		"HS256 with the n":    {hmacToken(t, good, iss.rsa.N.Bytes()), http.StatusUnauthorized},
		"scope for beta only": {iss.sign(t, jwt.SigningMethodRS256, "r1", claims(resource, "mcp:beta", now.Add(time.Hour))), http.StatusForbidden},
	} {
		resp := post(t, alpha, "", initBody, bearer(c.token))
		resp.Body.Close()
		assert.Equal(t, c.status, resp.StatusCode, name)
		if c.status == http.StatusUnauthorized {
			assert.Contains(t, resp.Header.Get("WWW-Authenticate"), `resource_metadata="http://gateway.test/.well-known/oauth-protected-resource"`, name)
		}
	}
	assert.Zero(t, g.Started(), "no refused token started a server")

	for _, tok := range []string{iss.sign(t, jwt.SigningMethodRS256, "r1", good), iss.sign(t, jwt.SigningMethodES256, "e1", good)} {
		c := connect(t, alpha, bearer(tok))
		assert.Equal(t, "alpha:jwt", callText(t, c, "echo", map[string]any{"text": "jwt"}))
		c.Close()
	}

	resp, err := http.Get(srv.URL + "/.well-known/oauth-protected-resource")
	require.NoError(t, err)
	defer resp.Body.Close()
	var meta struct {
		Resource string   `json:"resource"`
		Servers  []string `json:"authorization_servers"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&meta))
	assert.Equal(t, resource, meta.Resource)
	assert.Equal(t, []string{iss.url}, meta.Servers)
}

func noneToken(t *testing.T, c jwt.MapClaims) string {
	s, err := jwt.NewWithClaims(jwt.SigningMethodNone, c).SignedString(jwt.UnsafeAllowNoneSignatureType)
	require.NoError(t, err)
	return s
}

func hmacToken(t *testing.T, c jwt.MapClaims, key []byte) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, c)
	tok.Header["kid"] = "r1"
	s, err := tok.SignedString(key)
	require.NoError(t, err)
	return s
}
