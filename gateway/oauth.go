package gateway

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// OAuth configures the gateway as an OAuth 2.1 resource server, as the MCP
// authorization specification describes: a bearer token that is a JWT is
// accepted when it is signed by a key of the issuer's JWKS, names the
// issuer, is meant for this gateway (aud), and has not expired.
type OAuth struct {
	// Issuer is the authorization server (the iss claim required).
	Issuer string `json:"issuer"`
	// JWKSURL is where the issuer's signing keys are.
	JWKSURL string `json:"jwks_url"`
	// Resource is the gateway's own URL: tokens must name it in aud, and
	// the protected-resource metadata names it.
	Resource string `json:"resource"`
}

// Scopes: "mcp:<server>" grants one server, "mcp:*" all of them.
const scopePrefix = "mcp:"

func (o *OAuth) check() error {
	for name, u := range map[string]string{"issuer": o.Issuer, "jwks_url": o.JWKSURL, "resource": o.Resource} {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
			return fmt.Errorf("oauth %s %q is not an http(s) URL", name, u)
		}
	}
	return nil
}

// metadataPath is RFC 9728's protected-resource metadata document.
const metadataPath = "/.well-known/oauth-protected-resource"

// errToken is any reason a JWT is not accepted; the client gets 401.
var errToken = errors.New("invalid access token")

// jwks holds the issuer's keys, fetched on first use and again when a
// token names a key it does not have (at most every minRefresh).
type jwks struct {
	o      *OAuth
	client *http.Client

	mu      sync.Mutex
	keys    map[string]any
	fetched time.Time
}

const minRefresh = 30 * time.Second

func newJWKS(o *OAuth) *jwks {
	return &jwks{o: o, client: &http.Client{Timeout: 10 * time.Second}}
}

func (k *jwks) key(ctx context.Context, kid string) (any, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if key, ok := k.keys[kid]; ok {
		return key, nil
	}
	if time.Since(k.fetched) < minRefresh && k.keys != nil {
		return nil, fmt.Errorf("%w: unknown key %q", errToken, kid)
	}
	keys, err := k.fetch(ctx)
	k.fetched = time.Now()
	if err != nil {
		return nil, err
	}
	k.keys = keys
	if key, ok := keys[kid]; ok {
		return key, nil
	}
	return nil, fmt.Errorf("%w: unknown key %q", errToken, kid)
}

func (k *jwks) fetch(ctx context.Context) (map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.o.JWKSURL, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch jwks: %w", err)
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch jwks: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch jwks: %s", resp.Status)
	}
	var set struct {
		Keys []struct {
			Kid string `json:"kid"`
			Kty string `json:"kty"`
			Use string `json:"use"`
			Crv string `json:"crv"`
			N   string `json:"n"`
			E   string `json:"e"`
			X   string `json:"x"`
			Y   string `json:"y"`
		} `json:"keys"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&set); err != nil {
		return nil, fmt.Errorf("decode jwks: %w", err)
	}
	keys := map[string]any{}
	b64 := base64.RawURLEncoding.DecodeString
	for _, jk := range set.Keys {
		if jk.Use != "" && jk.Use != "sig" {
			continue
		}
		switch jk.Kty {
		case "RSA":
			n, err1 := b64(jk.N)
			e, err2 := b64(jk.E)
			if err1 != nil || err2 != nil || len(e) > 4 {
				continue
			}
			keys[jk.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		case "EC":
			var curve elliptic.Curve
			switch jk.Crv {
			case "P-256":
				curve = elliptic.P256()
			case "P-384":
				curve = elliptic.P384()
			default:
				continue
			}
			x, err1 := b64(jk.X)
			y, err2 := b64(jk.Y)
			if err1 != nil || err2 != nil {
				continue
			}
			pub := &ecdsa.PublicKey{Curve: curve, X: new(big.Int).SetBytes(x), Y: new(big.Int).SetBytes(y)}
			if !curve.IsOnCurve(pub.X, pub.Y) {
				continue
			}
			keys[jk.Kid] = pub
		}
	}
	return keys, nil
}

// verify checks a JWT access token and returns its subject and the
// servers its scopes grant.
func (k *jwks) verify(ctx context.Context, raw string) (subject string, servers []string, err error) {
	tok, err := jwt.Parse(raw, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		return k.key(ctx, kid)
	},
		jwt.WithValidMethods([]string{"RS256", "RS384", "RS512", "PS256", "ES256", "ES384"}),
		jwt.WithIssuer(k.o.Issuer),
		jwt.WithAudience(k.o.Resource),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(30*time.Second),
	)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %v", errToken, err)
	}
	claims, _ := tok.Claims.(jwt.MapClaims)
	subject, _ = claims["sub"].(string)
	if subject == "" {
		return "", nil, fmt.Errorf("%w: no sub", errToken)
	}
	scope, _ := claims["scope"].(string)
	for _, s := range strings.Fields(scope) {
		if name, ok := strings.CutPrefix(s, scopePrefix); ok && !slices.Contains(servers, name) {
			servers = append(servers, name)
		}
	}
	return subject, servers, nil
}

// looksLikeJWT tells a JWT from an opaque static token.
func looksLikeJWT(s string) bool { return strings.Count(s, ".") == 2 && strings.HasPrefix(s, "eyJ") }

// metadata serves RFC 9728's protected-resource metadata, which points
// clients to the authorization server.
func (g *Gateway) metadata(w http.ResponseWriter, r *http.Request) {
	o := g.cfg.OAuth
	var scopes []string
	for _, n := range g.cfg.names() {
		scopes = append(scopes, scopePrefix+n)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"resource":                 o.Resource,
		"authorization_servers":    []string{o.Issuer},
		"bearer_methods_supported": []string{"header"},
		"scopes_supported":         append(scopes, scopePrefix+"*"),
	})
}

// challenge is the WWW-Authenticate of a 401.
func (g *Gateway) challenge() string {
	if g.cfg.OAuth == nil {
		return `Bearer realm="mcpguard"`
	}
	u, _ := url.Parse(g.cfg.OAuth.Resource)
	return fmt.Sprintf(`Bearer realm="mcpguard", resource_metadata="%s://%s%s"`, u.Scheme, u.Host, metadataPath)
}
