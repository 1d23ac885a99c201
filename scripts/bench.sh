#!/usr/bin/env bash
# The main job: the benchmark suite on an embedded default, as the README's
# first command. Installs what it needs, then writes into results/bench-<time>/:
#   eval-host.json  the attack / false-positive table of every config that runs
#                   on this kernel (C0, C-AB, C-app, the Landlock configs;
#                   per-config reports in runs/host/);
#   eval-vm.json    the BPF LSM configs (C-ebpf, C-full, C-AB+ebpf) with C0,
#                   all in one boot of a VM whose kernel enforces BPF LSM
#                   (SKIP_VM=1 skips it);
#   guard.txt       BenchmarkGuard: latency of a benign call per config;
#   agent.txt       BenchmarkAgent on the embedded reference model;
#   firewall.txt    BenchmarkFirewall: guardrail overhead;
#   stages.txt      each stage's wall and CPU time;
#   report/         index.html (open it: the tables with their figures),
#                   summary.md and the figures, drawn from all of it.
#
# Two settings (docs/bench.md says what each measures and what it costs):
#   make bench          the default: every table, fewer samples (below);
#                       the VM eval takes most of the time (docs/bench.md);
#   make bench FULL=1   the paper-grade run (about an hour): the settings the
#                       study's numbers come from, every stage in turn.
#
#                     default           FULL=1
#   guard rounds      250x              2000x   (GUARD_BENCHTIME)
#   agent sizes       1KiB              1KiB,16KiB (AGENT_SIZES)
#   guardrail sizes   1KiB              1KiB,16KiB (FIREWALL_SIZES)
#   guardrail iters   1x                3x      (FIREWALL_BENCHTIME)
#   VM eval           beside host eval  alone, after it (VM_BESIDE=1|0)
#   runs (-count)     6                 6       (COUNT; 6 is the fewest for a 95% interval)
# Every variable in brackets overrides its row. Each long stage shows a
# progress line: the stage, what is done, and an estimate of what is left.
# DRY_RUN=1 prints the settings and each stage's command, and runs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
dry=${DRY_RUN:-0}
[ "$dry" = 1 ] || bash scripts/deps.sh bench

full=${FULL:-0}
if [ "$full" = 1 ]; then
	mode="FULL=1 (paper-grade)"
	: "${GUARD_BENCHTIME:=2000x}" "${AGENT_SIZES:=1KiB,16KiB}" "${FIREWALL_SIZES:=1KiB,16KiB}" "${FIREWALL_BENCHTIME:=3x}" "${VM_BESIDE:=0}"
else
	mode="default (make bench; FULL=1 for the paper-grade run)"
	: "${GUARD_BENCHTIME:=250x}" "${AGENT_SIZES:=1KiB}" "${FIREWALL_SIZES:=1KiB}" "${FIREWALL_BENCHTIME:=1x}" "${VM_BESIDE:=1}"
fi
: "${COUNT:=6}" "${AGENT_GUARDS:=none,C0,C-app,C-full-landlock}" "${BENCH_ENV:=host}"

out="$PWD/results/bench-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
# Load before and after: latency rows from a busy machine are upper bounds.
load_start=$(cut -d' ' -f1 /proc/loadavg)
start=$SECONDS
cpu_start=$(awk '{print $14+$15+$16+$17}' /proc/$$/stat)
if [ "$dry" = 1 ]; then
	echo "settings: $mode; COUNT=$COUNT GUARD_BENCHTIME=$GUARD_BENCHTIME AGENT_SIZES=$AGENT_SIZES AGENT_GUARDS=$AGENT_GUARDS FIREWALL_SIZES=$FIREWALL_SIZES FIREWALL_BENCHTIME=$FIREWALL_BENCHTIME VM_BESIDE=$VM_BESIDE"
else
	go build -o bin/mcpguard ./cmd/mcpguard
	go build -o bin/stage ./lab/stage/cmd/stage
	# The corpus's Go servers, built here once for both evals (compiling
	# under TCG is slow).
	go build -o bin/servers/ ./testdata/servers/...
fi
ncases=$(find testdata/cases -name '*.json' | wc -l)
nstages=5
[ "${SKIP_VM:-0}" = 1 ] && nstages=4
k=0
# run NAME TOTAL UNIT DONE-REGEXP STDOUT STDERR CMD...: one stage, with its
# progress, its output in files, its times in stages.txt.
run() {
	local name=$1 total=$2 unit=$3 done=$4 stdout=$5 stderr=$6
	shift 6
	k=$((k + 1))
	if [ "$dry" = 1 ]; then
		echo "bench $k/$nstages $name:$(printf ' %q' "$@")"
		return 0
	fi
	bin/stage --name "bench $k/$nstages $name" --total "$total" --unit "$unit" --done "$done" \
		--skip '^\[[^]]+\] skipped' --skip-units "$ncases" \
		--stdout "$stdout" --stderr "$stderr" --times "$out/stages.txt" -- "$@"
}
evalLine='^\[[^]]+\] [0-9]+/[0-9]+ '
benchLine='^Benchmark[^ 	]+[ 	]+[0-9]+[ 	]'

# killtree PID: PID and every process below it, the deepest first.
killtree() {
	local c
	for c in $(pgrep -P "$1" || true); do
		killtree "$c"
	done
	kill "$1" 2>/dev/null || true
}
vm_pid=
vm_eval() {
	# A checkout the VM cannot see as it is (under /tmp or $HOME) runs from a
	# mirror, as scripts/vmtest does.
	if [ "$dry" != 1 ]; then
		. scripts/vmmirror.sh
		vm_mirror bench
	fi
	# The VM's root is the host's, read-only: the JSON comes back on stdout,
	# the progress and the table on stderr. Time bounds stretched for TCG.
	run "VM eval (C0, C-ebpf, C-full, C-AB+ebpf in one boot)" $((4 * ncases)) cases "$evalLine" "$out/eval-vm.json" "$out/eval-vm.txt" \
		bin/mcpguard vm --timeout 60m -- sh -c 'bin/mcpguard eval --config C-ebpf,C-full,C-AB+ebpf \
			--server-bin "$PWD/bin/servers" --timeout-scale 5 --results /tmp/results \
			--run-id vm --json /tmp/eval-vm.json >&2 && cat /tmp/eval-vm.json'
}
if [ "${SKIP_VM:-0}" != 1 ] && [ "$VM_BESIDE" = 1 ]; then
	# Beside the host eval, at the same priority: under emulation the VM
	# is CPU-bound, while the host eval mostly waits (for its servers, for
	# each case's quiet window), so the VM takes what the host eval leaves.
	# The benchmarks, which time things, start only when both are done. On
	# a terminal, the VM's progress lines (every 30 s) clear the host
	# eval's redrawn line first.
	if [ "$dry" = 1 ]; then
		vm_eval
	else
		if [ -t 2 ]; then
			(vm_eval) </dev/null 2> >(sed -u $'s/^/\r\033[K/' >&2) &
		else
			(vm_eval) </dev/null &
		fi
		vm_pid=$!
		k=$((k + 1))
		# If a host stage fails, the VM goes with it.
		trap 'if [ -n "$vm_pid" ]; then killtree "$vm_pid"; fi' EXIT
	fi
fi

run "host eval, every config this kernel runs" $((8 * ncases)) cases "$evalLine" "$out/eval-host.txt" "$out/eval-host.log" \
	bin/mcpguard eval --config all --server-bin "$PWD/bin/servers" --results "$out/runs" --run-id host --json "$out/eval-host.json"
evals=(--eval "$out/eval-host.json")
if [ "${SKIP_VM:-0}" != 1 ] && [ "$VM_BESIDE" != 1 ]; then
	vm_eval
fi
# The benchmarks' test binary, built before any benchmark is timed (beside
# the VM when it runs beside).
[ "$dry" = 1 ] || go test -c -o bin/mcpguard.test .
if [ -n "$vm_pid" ]; then
	[ "$dry" = 1 ] || echo "[bench] waiting for the VM eval before the benchmarks" >&2
	wait "$vm_pid"
	vm_pid=
fi

# BenchmarkGuard's rows: direct, each config that ran on this host, noop-stage.
rows=$(($(grep -cE '^C[^ ]* +[0-9.]+% ' "$out/eval-host.txt" 2>/dev/null || true) + 2))
run "latency (BenchmarkGuard, $GUARD_BENCHTIME rounds)" $((rows * COUNT)) runs "$benchLine" "$out/guard.txt" "$out/guard.log" \
	bin/mcpguard.test -test.run '^$' -test.bench '^BenchmarkGuard$' -test.benchtime "$GUARD_BENCHTIME" -test.count "$COUNT"
# One iteration per run: the default (medium) reference model takes seconds
# an iteration on 2 cores, and the guards differ only in the tool phase.
nsizes=$(tr ',' '\n' <<<"$AGENT_SIZES" | wc -l)
nguards=$(tr ',' '\n' <<<"$AGENT_GUARDS" | wc -l)
run "agent (BenchmarkAgent, $AGENT_SIZES)" $((nsizes * nguards * COUNT)) runs "$benchLine" "$out/agent.txt" "$out/agent.log" \
	bin/mcpguard.test -test.run '^$' -test.bench '^BenchmarkAgent$' -test.benchtime 1x -test.count "$COUNT" \
	-agent.guards "$AGENT_GUARDS" -agent.sizes "$AGENT_SIZES" -env "$BENCH_ENV"
nsizes=$(tr ',' '\n' <<<"$FIREWALL_SIZES" | wc -l)
run "guardrails (BenchmarkFirewall, $FIREWALL_SIZES, $FIREWALL_BENCHTIME)" $((nsizes * 6 * COUNT)) runs "$benchLine" "$out/firewall.txt" "$out/firewall.log" \
	bin/mcpguard.test -test.run '^$' -test.bench '^BenchmarkFirewall$' -test.benchtime "$FIREWALL_BENCHTIME" -test.count "$COUNT" \
	-firewall.sizes "$FIREWALL_SIZES" -env "$BENCH_ENV"

if [ "$dry" = 1 ]; then
	rm -rf "$out"
	exit 0
fi
if [ "${SKIP_VM:-0}" != 1 ]; then
	evals+=(--eval "$out/eval-vm.json")
fi

cpu_end=$(awk '{print $14+$15+$16+$17}' /proc/$$/stat)
{
	echo "settings: $mode; -count $COUNT, guard $GUARD_BENCHTIME, agent $AGENT_SIZES ($AGENT_GUARDS), guardrails $FIREWALL_SIZES x $FIREWALL_BENCHTIME"
	echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%d", $2/1048576}' /proc/meminfo) GiB, kernel $(uname -r), $(. /etc/os-release && echo "$PRETTY_NAME"), $(go env GOVERSION)"
	echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%Y-%m-%d)"
	echo "load average: $load_start at the start, $(cut -d' ' -f1 /proc/loadavg) at the end"
	sed 's/^bench [0-9]*\/[0-9]* /stage /' "$out/stages.txt"
	echo "whole run before the report: $((SECONDS - start)) s wall, $(((cpu_end - cpu_start) / $(getconf CLK_TCK))) s CPU"
} >"$out/run.txt"
bin/mcpguard report --std "$out/agent.txt" --guard "$out/guard.txt" --firewall "$out/firewall.txt" "${evals[@]}" \
	--run "$out/run.txt" --out "$out/report" >/dev/null
echo "results in $out; open $out/report/index.html (summary: $out/report/summary.md)" >&2

# The README's results are this run's tables, not hand-written prose: the
# summary goes between the README's results markers, and the page with its
# figures to docs/results/ (README_RESULTS=0 leaves both alone).
if [ "${README_RESULTS:-1}" = 1 ] && grep -q '<!-- results:begin -->' README.md; then
	rm -rf docs/results && mkdir -p docs/results
	cp "$out/report/index.html" "$out/report/summary.md" "$out/report"/*.png docs/results/
	{
		printf '_Generated by `make bench` (scripts/bench.sh), %s, on %s at commit %s: %s cores, %s GiB, kernel %s, %s (%s); load average %s at the start, %s at the end. The page with the figures: [docs/results/index.html](docs/results/index.html)._\n\n' \
			"$mode" "$(date -u +%Y-%m-%d)" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" "$(nproc)" \
			"$(awk '/MemTotal/ {printf "%d", $2/1048576}' /proc/meminfo)" \
			"$(uname -r)" "$(. /etc/os-release && echo "$PRETTY_NAME")" "$(go env GOVERSION)" \
			"$load_start" "$(cut -d' ' -f1 /proc/loadavg)"
		# The summary's own title is the README section's.
		sed -e '1{/^# /d}' -e 's/^## /### /' "$out/report/summary.md"
	} >"$out/readme-results.md"
	awk -v f="$out/readme-results.md" '
		/<!-- results:begin -->/ { print; while ((getline l < f) > 0) print l; skip = 1; next }
		/<!-- results:end -->/ { skip = 0 }
		!skip { print }
	' README.md >"$out/README.md" && mv "$out/README.md" README.md
	echo "README.md and docs/results/: results rewritten; review with git diff" >&2
fi
