// Package decide runs the pure decisions of the BPF LSM programs
// (bpf/decide.h) through BPF_PROG_TEST_RUN in a socket filter, so that they
// are table-tested on any kernel that loads socket filters, without BPF
// LSM or a VM. Tests only: nothing imports it.
package decide

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-19 -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -type decide_req decide decide.bpf.c
