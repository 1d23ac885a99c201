package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpguard/mcpguard/guard/landlock/ruleset"
	"github.com/mcpguard/mcpguard/guard/policy"
	"github.com/mcpguard/mcpguard/guard/runtime"
	"github.com/mcpguard/mcpguard/guard/sandbox"
)

// learnRuntime runs the server (its command resolved as L3 would start
// it) unconfined under a fanotify observer through initialize, tools/list
// and calls, and sorts what it opened beyond what every L3 backend grants
// anyway (their baselines and the resolved runtime) into runtime
// proposals and data reports.
func learnRuntime(ctx context.Context, argv, env []string, stderr io.Writer, calls []learnCall) ([]policy.ToolInfo, *runtime.Learned, error) {
	rt, err := runtime.New(runtime.Options{}).Resolve(ctx, runtime.Command{Argv: argv, Env: env})
	if err != nil {
		return nil, nil, err
	}
	obs, err := runtime.Observe()
	if err != nil {
		return nil, nil, err
	}
	tools, err := session(ctx, rt.Argv, env, stderr, obs, calls)
	seen := obs.Stop()
	if err != nil {
		return nil, nil, err
	}
	var trees []string
	for _, r := range ruleset.Runtime() {
		// Granted by Landlock's baseline and by the BPF backend's alike.
		if slices.ContainsFunc(sandbox.Baseline(), func(b sandbox.FileRule) bool { return under(r.Path, b.Path) }) {
			trees = append(trees, r.Path)
		}
	}
	trees = append(append(trees, rt.Read...), rt.Exec...)
	granted := func(p string) bool {
		return slices.ContainsFunc(trees, func(t string) bool { return under(p, t) })
	}
	l := runtime.Learn(seen, granted)
	fmt.Fprintf(stderr, "mcpguard policy init --learn: %d files observed (fanotify), %d outside the runtime mcpguard resolves\n",
		len(seen), len(l.Read)+len(l.Exec)+len(l.Data))
	return tools, &l, nil
}

// under reports whether path is dir or below it.
func under(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
