package runtime

import "github.com/mcpguard/mcpguard/guard/baseline"

// System lists what every server may read, under both L3 backends alike,
// besides what Resolve finds for its command (package baseline, which says
// what it holds and what it leaves out).
func System() []string { return baseline.System() }
