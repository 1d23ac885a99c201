// Package corpus is the home of the benchmark's Go MCP servers' shared code:
// corpus/tools holds the tool sets (filesystem, notes, weather, shell,
// sqlite, git, env) and corpus/payload the harmful primitives of the
// malicious variants. The servers themselves are the small mains under
// testdata/servers/<name>, registered in package servers; their behaviour is
// documented in testdata/servers/README.md.
package corpus
