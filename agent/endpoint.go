package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/mcpguard/mcpguard/lab/llm/server"
)

// Reference is the embedded reference model server (llm/server) running on
// a loopback HTTP listener, so the agent reaches it through the same client
// code, sockets and SSE parsing as a real endpoint.
type Reference struct {
	// BaseURL is the OpenAI base URL (http://127.0.0.1:PORT/v1).
	BaseURL string
	// URL is the server root, where /predict and /classify live.
	URL string

	srv  *server.Server
	http *http.Server
	done chan struct{}
}

// StartReference starts the reference server with cfg on 127.0.0.1.
func StartReference(cfg server.Config) (*Reference, error) {
	s, err := server.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("reference server: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("reference server: %w", err)
	}
	r := &Reference{URL: "http://" + ln.Addr().String(), srv: s, done: make(chan struct{}),
		http: &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}}
	r.BaseURL = r.URL + "/v1"
	go func() {
		defer close(r.done)
		r.http.Serve(ln)
	}()
	return r, nil
}

// Server returns the model server (for its Stats).
func (r *Reference) Server() *server.Server { return r.srv }

// Close stops the listener, waits for requests to end, and frees the model.
func (r *Reference) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := r.http.Shutdown(ctx)
	<-r.done
	return errors.Join(err, r.srv.Close())
}

// Synthetic asks an endpoint whether it serves a synthetic model: the
// reference server marks every response with server.SyntheticHeader.
func Synthetic(ctx context.Context, baseURL string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(baseURL, "/")+"/models", nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, fmt.Errorf("%w: %v", ErrEndpoint, err)
	}
	resp.Body.Close()
	return resp.Header.Get(server.SyntheticHeader) == "true", nil
}

// Endpoint is the model endpoint a Config resolves to.
type Endpoint struct {
	// BaseURL is the OpenAI base URL; Root the server root (classifier
	// endpoints) when known (the reference server), else "".
	BaseURL, Root string
	// Reference is the embedded server when one was started, else nil.
	Reference *Reference
	// Synthetic says whether the endpoint serves a synthetic model.
	Synthetic bool
}

// Close stops the reference server, if one was started.
func (e *Endpoint) Close() error {
	if e.Reference == nil {
		return nil
	}
	return e.Reference.Close()
}

// OpenEndpoint returns cfg's endpoint, starting the embedded reference
// server (of shape cfg.ModelShape) on loopback when cfg.BaseURL is empty, and asks it whether it is
// synthetic (which also checks that it answers).
func OpenEndpoint(ctx context.Context, cfg Config) (*Endpoint, error) {
	e := &Endpoint{BaseURL: cfg.BaseURL}
	if e.BaseURL == "" {
		sc := server.DefaultConfig()
		if cfg.ModelShape != "" {
			sc.Shape = cfg.ModelShape
		}
		ref, err := StartReference(sc)
		if err != nil {
			return nil, err
		}
		e.Reference, e.BaseURL, e.Root = ref, ref.BaseURL, ref.URL
	}
	syn, err := Synthetic(ctx, e.BaseURL)
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("model endpoint %s: %w", e.BaseURL, err)
	}
	e.Synthetic = syn
	return e, nil
}
