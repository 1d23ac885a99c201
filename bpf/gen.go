// Package bpf holds mcpguard's BPF LSM programs (guard.bpf.c) compiled by
// bpf2go, and a loader for them. The compiled object is committed, so users
// need no clang; `make generate` (go generate ./bpf) rebuilds it with
// Debian's clang-19 against vmlinux.h (CO-RE: one object for every kernel
// with BTF and BPF LSM, tested on Debian's 6.1).
package bpf

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-19 -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -type event -type inode_key -type net_key -type netns_val guard guard.bpf.c
