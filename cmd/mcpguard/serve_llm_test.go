package main

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/lab/llm/server"
)

// lockedBuffer is a bytes.Buffer safe to write from the command and read
// from the test at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestServeLLM(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, stdio{strings.NewReader(""), &bytes.Buffer{}, &stderr}, []string{"serve-llm", "--addr", "127.0.0.1:0", "--seed", "3"})
	}()
	addr := regexp.MustCompile(`http://(127\.0\.0\.1:\d+)/v1`)
	var base string
	require.Eventually(t, func() bool {
		m := addr.FindStringSubmatch(stderr.String())
		if m != nil {
			base = "http://" + m[1]
		}
		return m != nil
	}, 30*time.Second, 10*time.Millisecond, "server announces its address: %s", stderr.String())
	resp, err := http.Get(base + "/v1/models")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "true", resp.Header.Get(server.SyntheticHeader))
	cancel()
	select {
	case code := <-done:
		assert.Equal(t, 0, code, stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("serve-llm did not stop on cancel")
	}
}

func TestServeLLMBadShape(t *testing.T) {
	var stderr bytes.Buffer
	code := run(context.Background(), stdio{strings.NewReader(""), &bytes.Buffer{}, &stderr}, []string{"serve-llm", "--shape", "gpt-5"})
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr.String(), "unknown shape")
}
