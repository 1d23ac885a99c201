# mcpguard. The two commands of the README are `make bench` and `make test`;
# each installs what it needs (scripts/deps.sh) on a fresh Debian 12 machine.
.PHONY: all build deps test test-short bench vmtest generate report fmt vet clean

all: build

build:
	go build -o bin/mcpguard ./cmd/mcpguard

deps:
	bash scripts/deps.sh

# The whole suite, as CI runs it (race detector, fuzzing, BPF tests in the VM).
test:
	bash scripts/test.sh

# Quick feedback while developing: no race detector, no VM, smoke eval.
test-short: deps
	go test -short ./...

# The main job: eval table for every config, latency, agent and firewall benchmarks, figures,
# one page to open (results/bench-<time>/report/index.html). `make bench FULL=1` is the
# paper-grade run; docs/bench.md says where the time goes.
bench:
	bash scripts/bench.sh

# Only the kernel-enforcement tests, in a VM whose kernel enforces BPF LSM.
vmtest:
	sh scripts/vmtest -- -test.run 'TestVMProbe|TestEdges|TestAttach|TestLayout|TestLSM' -test.v

# Rebuild the BPF objects (bpf2go) with Debian's clang.
generate:
	(command -v clang-19 && test -f /usr/include/bpf/bpf_helpers.h) >/dev/null || (apt-get update && apt-get install -y clang-19 llvm-19 bpftool libbpf-dev)
	go generate ./bpf/... ./lab/vm/...

# Figures and tables from the sample benchmark inputs committed in testdata/report (the
# report says they are samples), with Table 1 from an eval of today's corpus on this host
# (configs the kernel refuses are listed as skipped).
report: build
	mkdir -p results/report
	bin/mcpguard eval --config all --results results --run-id report-sample --json results/report/eval.json
	bin/mcpguard report --sample "benchmark inputs from testdata/report (a build machine, 2 vs 1 CPUs, no CVM: see its README); Table 1 from today's corpus on this host" \
		--std testdata/report/agent-2cpu.txt --cvm testdata/report/agent-1cpu.txt \
		--firewall testdata/report/firewall.txt --guard testdata/report/guard.txt \
		--eval results/report/eval.json --out results/report

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	go vet ./...

clean:
	rm -rf bin results
