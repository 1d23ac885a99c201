#!/usr/bin/env bash
# Installs what mcpguard's tests and benchmarks need on a fresh Debian 12
# machine with Go 1.26: Debian packages, Go modules, and the npm packages of
# the third-party MCP servers the tests run against. Idempotent and quick
# when everything is there. `mcpguard vm` installs qemu and the guest kernel
# itself, on first use.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v git >/dev/null || need+=(git)
command -v python3 >/dev/null || need+=(python3)
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
# `deps.sh bench` (make bench) stops after the Go modules: the benchmarks
# need no npm package and no browser.
bench_only=0
[ "${1:-}" = bench ] && bench_only=1
# The report's browser test (lab/report: TestReportInBrowser) opens the HTML
# report in Debian's headless Chromium; about 100 MB, a minute or two to
# install, once per machine.
[ "$bench_only" = 1 ] || command -v chromium >/dev/null || need+=(chromium)
# The compatibility suite's database server (server-redis, on a redis-server
# of its own): about 2 MB, seconds to install; it is started by the test,
# not as a service.
[ "$bench_only" = 1 ] || command -v redis-server >/dev/null || need+=(redis-server)
# apt-get needs root: as another user it goes through sudo.
sudo=()
if [ "$(id -u)" != 0 ]; then
	sudo=(sudo)
fi
if ((${#need[@]})); then
	echo "deps: apt-get install ${need[*]}" >&2
	"${sudo[@]}" apt-get update -qq
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi

go mod download
if [ "$bench_only" = 1 ]; then
	exit 0
fi
if [ ! -x testdata/npm/node_modules/.bin/mcp-server-filesystem ]; then
	echo "deps: npm ci in testdata/npm" >&2
	(cd testdata/npm && npm ci --no-audit --no-fund --loglevel=error)
fi
# The gateway's tests: the official TypeScript SDK, the MCP Inspector, server-everything, the
# MCP conformance suite and its reference server's imports, with the node 22 the suite needs
# (from npm's node package). Again when package-lock.json changed since.
if [ ! -x gateway/testdata/node/node_modules/.bin/conformance ] || [ ! -x gateway/testdata/node/node_modules/.bin/mcp-inspector ] ||
	[ gateway/testdata/node/package-lock.json -nt gateway/testdata/node/node_modules/.package-lock.json ]; then
	echo "deps: npm ci in gateway/testdata/node" >&2
	(cd gateway/testdata/node && npm ci --no-audit --no-fund --loglevel=error)
fi
# BenchmarkGateway's peers: the stdio-to-HTTP bridges users pick instead of the gateway
# (supergateway, mcp-proxy), measured beside it when installed.
if [ ! -x testdata/peers/node_modules/.bin/supergateway ] || [ ! -x testdata/peers/node_modules/.bin/mcp-proxy ] ||
	[ testdata/peers/package-lock.json -nt testdata/peers/node_modules/.package-lock.json ]; then
	echo "deps: npm ci in testdata/peers" >&2
	(cd testdata/peers && npm ci --no-audit --no-fund --loglevel=error) ||
		echo "deps: the bridge peers did not install; BenchmarkGateway measures without them" >&2
fi

# The compatibility suite (cmd/mcpguard/compat_test.go, docs/compat.md):
# the official TypeScript SDK client and real servers from npm, and npx's
# cache filled with the same servers, so that its `npx -y` cells resolve
# without a download at test time.
# Again when package-lock.json changed since (servers added to the suite).
if [ ! -d testdata/compat/node_modules/@modelcontextprotocol/sdk ] ||
	[ testdata/compat/package-lock.json -nt testdata/compat/node_modules/.package-lock.json ]; then
	echo "deps: npm ci in testdata/compat" >&2
	# desktop-commander depends on puppeteer, whose install script would
	# download a browser (no network for that here, and no test needs it).
	(cd testdata/compat && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
fi
# The real MCP clients the end-to-end test of `mcpguard wrap` runs (claude,
# gemini, codex; cmd/mcpguard/clients_e2e_test.go): about 900 MB on disk (the
# native binaries of Claude Code and Codex) and about 90 s from the registry.
if [ ! -x testdata/clients/node_modules/.bin/codex ] ||
	[ testdata/clients/package-lock.json -nt testdata/clients/node_modules/.package-lock.json ]; then
	echo "deps: npm ci in testdata/clients" >&2
	(cd testdata/clients && npm ci --no-audit --no-fund --loglevel=error)
fi
for p in server-filesystem server-memory server-everything server-sequential-thinking; do
	v=$(node -p "require('./testdata/compat/package.json').dependencies['@modelcontextprotocol/$p']")
	(cd /tmp && npm exec --yes --loglevel=error --package="@modelcontextprotocol/$p@$v" -- true) ||
		echo "deps: could not fill npx's cache with @modelcontextprotocol/$p@$v" >&2
done
# A venv outside the servers' directories for the compat suite's Python cells.
python3 -c 'import ensurepip' 2>/dev/null || /usr/bin/python3 -c 'import ensurepip' 2>/dev/null || {
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv
}
