#!/usr/bin/env bash
# The main job: the benchmark suite on an embedded default, as the README's
# first command. Installs what it needs, then writes into results/bench-<time>/:
#   eval-host.json  the attack / false-positive table of every config that runs
#                   on this kernel (C0, C-AB, C-app, the Landlock configs;
#                   per-config reports in runs/host/);
#   eval-vm.json    the BPF LSM configs (C-ebpf, C-full, C-AB+ebpf), run in a
#                   VM whose kernel enforces BPF LSM (SKIP_VM=1 skips it);
#   guard.txt       BenchmarkGuard: latency of a benign call per config;
#   agent.txt       BenchmarkAgent on the embedded reference model;
#   firewall.txt    BenchmarkFirewall: guardrail overhead;
#   report/         figures and summary.md drawn from all of it.
# COUNT (default 6, the fewest for which benchstat gives a 95% interval) is
# -count for the benchmarks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh

out="results/bench-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
go build -o bin/mcpguard ./cmd/mcpguard
step() { printf '\n=== %s\n' "$*" >&2; }

step "corpus eval, every config this kernel runs"
bin/mcpguard eval --config all --results "$out/runs" --run-id host --json "$out/eval-host.json" | tee "$out/eval-host.txt"
evals=(--eval "$out/eval-host.json")
if [ "${SKIP_VM:-0}" != 1 ]; then
	step "corpus eval of the BPF LSM configs in the VM"
	# Servers built here (compiling under TCG is slow); time bounds stretched for TCG.
	go build -o bin/servers/ ./testdata/servers/...
	# The VM's root is the host's, read-only: the JSON comes back on stdout,
	# the table on stderr.
	bin/mcpguard vm --timeout 60m -- sh -c 'bin/mcpguard eval --config C-ebpf,C-full,C-AB+ebpf \
		--server-bin "$PWD/bin/servers" --timeout-scale 5 --results /tmp/results \
		--run-id vm --json /tmp/eval-vm.json >&2 && cat /tmp/eval-vm.json' >"$out/eval-vm.json" 2> >(tee "$out/eval-vm.txt" >&2)
	evals+=(--eval "$out/eval-vm.json")
fi

step "benchmarks (-count ${COUNT:-6})"
go test -run '^$' -bench 'Guard' -benchtime 2000x -count "${COUNT:-6}" . | tee "$out/guard.txt"
go test -run '^$' -bench 'Agent' -benchtime 3x -count "${COUNT:-6}" -env "${BENCH_ENV:-host}" . | tee "$out/agent.txt"
go test -run '^$' -bench 'Firewall' -benchtime 3x -count "${COUNT:-6}" -env "${BENCH_ENV:-host}" . | tee "$out/firewall.txt"

step "figures and tables"
bin/mcpguard report --guard "$out/guard.txt" --firewall "$out/firewall.txt" "${evals[@]}" --out "$out/report"
echo "results in $out (summary: $out/report/summary.md)" >&2
