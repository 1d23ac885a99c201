package main

import (
	"context"
	"fmt"
	"io"

	"github.com/mcpguard/mcpguard/guard/policy"
	"github.com/mcpguard/mcpguard/guard/runtime"
)

// learnRuntime runs the server confined by box (as policy init does:
// no network, a scratch write directory, the working directory read-only)
// under a fanotify observer through initialize, tools/list and calls, and
// sorts what it opened beyond what the sandbox's runtime and baseline
// rules grant (the same resolver and baseline both L3 backends use) into
// runtime proposals and data reports.
func learnRuntime(ctx context.Context, box *initBox, argv []string, stderr io.Writer, calls []learnCall) ([]policy.ToolInfo, *runtime.Learned, error) {
	cmd, err := box.command(ctx, argv)
	if err != nil {
		return nil, nil, err
	}
	obs, err := runtime.Observe()
	if err != nil {
		return nil, nil, err
	}
	tools, err := session(ctx, cmd, stderr, obs, calls, box.sb.Started)
	seen := obs.Stop()
	if err != nil {
		return nil, nil, err
	}
	l := runtime.Learn(seen, box.runtimeGranted)
	fmt.Fprintf(stderr, "mcpguard policy init --learn: %d files observed (fanotify), %d outside the runtime mcpguard resolves\n",
		len(seen), len(l.Read)+len(l.Exec)+len(l.Data))
	return tools, &l, nil
}
