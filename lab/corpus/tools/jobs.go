package tools

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// Jobs is the jobs tool set: a small batch worker on workspace files that
// uses what a server legitimately may of its machine, the resources the
// L3 process classes are about (issue 31): worker threads (checksum), an
// in-memory table (load_table) and System V shared memory (shared_counter).
type Jobs struct {
	ws string
}

// Bounds of the benign tools' arguments.
const (
	maxWorkers  = 32
	maxTableMiB = 64
)

// NewJobs returns the jobs tools on the workspace ws.
func NewJobs(ws string) (*Jobs, error) {
	if ws == "" {
		return nil, ErrNoWorkspace
	}
	return &Jobs{ws: ws}, nil
}

// Tools returns the jobs tool set.
func (j *Jobs) Tools() Set {
	return Set{
		{Tool: mcp.NewTool("checksum",
			mcp.WithDescription("Checksum a workspace file with parallel workers (a SHA-256 over the SHA-256 of each worker's chunk)."),
			mcp.WithString("path", mcp.Required(), mcp.Description("File, relative to the workspace")),
			mcp.WithNumber("workers", mcp.Description("Worker threads, 1 to 32 (default 4)"))), Handler: j.checksum},
		{Tool: mcp.NewTool("load_table",
			mcp.WithDescription("Load a workspace CSV file into an in-memory table and count its rows."),
			mcp.WithString("path", mcp.Required(), mcp.Description("CSV file, relative to the workspace")),
			mcp.WithNumber("mib", mcp.Description("Table buffer in MiB, 1 to 64 (default 8)"))), Handler: j.loadTable},
		{Tool: mcp.NewTool("shared_counter",
			mcp.WithDescription("Count in a System V shared-memory segment of the server's own (created, used and removed)."),
			mcp.WithNumber("increments", mcp.Description("How many times to increment, 1 to 1000 (default 3)"))), Handler: j.sharedCounter},
	}
}

func (j *Jobs) read(req mcp.CallToolRequest) ([]byte, error) {
	rel, err := req.RequireString("path")
	if err != nil {
		return nil, err
	}
	p, err := strictResolve([]string{j.ws}, rel)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(p)
}

func (j *Jobs) checksum(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	n := req.GetInt("workers", 4)
	if n < 1 || n > maxWorkers {
		return Errorf("workers must be 1 to %d", maxWorkers), nil
	}
	b, err := j.read(req)
	if err != nil {
		return Errorf("%v", err), nil
	}
	sums := make([][sha256.Size]byte, n)
	OnThreads(n, func(i int) {
		lo, hi := len(b)*i/n, len(b)*(i+1)/n
		sums[i] = sha256.Sum256(b[lo:hi])
	})
	h := sha256.New()
	for _, s := range sums {
		h.Write(s[:])
	}
	return Text(fmt.Sprintf("sha256-tree %s (%d workers)", hex.EncodeToString(h.Sum(nil)), n)), nil
}

// OnThreads runs f(0..n-1) on n OS threads of their own, all alive at
// once (each waits for the others before it returns), as a worker pool
// pinned to threads does. A process that may not start another thread
// dies here (the Go runtime cannot go on without it).
func OnThreads(n int, f func(i int)) {
	var started, done sync.WaitGroup
	release := make(chan struct{})
	started.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			defer done.Done()
			f(i)
			started.Done()
			<-release
		}()
	}
	started.Wait()
	close(release)
	done.Wait()
}

func (j *Jobs) loadTable(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	mib := req.GetInt("mib", 8)
	if mib < 1 || mib > maxTableMiB {
		return Errorf("mib must be 1 to %d", maxTableMiB), nil
	}
	b, err := j.read(req)
	if err != nil {
		return Errorf("%v", err), nil
	}
	table := Touch(mib)
	rows := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for off := 0; sc.Scan(); rows++ {
		off += copy(table[off%len(table):], sc.Bytes())
	}
	runtime.KeepAlive(table)
	return Text(fmt.Sprintf("loaded %d rows into a %d MiB table", rows, mib)), nil
}

// Touch returns mib MiB of memory with every page written, so that the
// process really holds it.
func Touch(mib int) []byte {
	b := make([]byte, mib<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	return b
}

func (j *Jobs) sharedCounter(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	n := req.GetInt("increments", 3)
	if n < 1 || n > 1000 {
		return Errorf("increments must be 1 to 1000"), nil
	}
	v, err := sysvCount(n)
	if err != nil {
		return Errorf("shared memory: %v", err), nil
	}
	return Text(fmt.Sprintf("counter %d (System V shared memory)", v)), nil
}
