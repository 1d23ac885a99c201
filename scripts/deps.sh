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
if [ ! -x testdata/npm/node_modules/.bin/mcp-server-filesystem ]; then
	echo "deps: npm ci in testdata/npm" >&2
	(cd testdata/npm && npm ci --no-audit --no-fund --loglevel=error)
fi
# The gateway's tests: the official TypeScript SDK, the MCP Inspector, server-everything and the
# MCP conformance suite, with the node 22 it needs (from npm's node package).
if [ ! -x gateway/testdata/node/node_modules/.bin/conformance ] || [ ! -x gateway/testdata/node/node_modules/.bin/mcp-inspector ]; then
	echo "deps: npm ci in gateway/testdata/node" >&2
	(cd gateway/testdata/node && npm ci --no-audit --no-fund --loglevel=error)
fi

# The compatibility suite (cmd/mcpguard/compat_test.go, docs/compat.md):
# the official TypeScript SDK client and real servers from npm, and npx's
# cache filled with the same servers, so that its `npx -y` cells resolve
# without a download at test time.
# Again when package-lock.json changed since (servers added to the suite).
if [ ! -d testdata/compat/node_modules/@modelcontextprotocol/sdk ] ||
	[ testdata/compat/package-lock.json -nt testdata/compat/node_modules/.package-lock.json ]; then
	echo "deps: npm ci in testdata/compat" >&2
	(cd testdata/compat && npm ci --no-audit --no-fund --loglevel=error)
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
