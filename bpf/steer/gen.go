// Package steer holds the egress filter's sk_lookup program (steer.bpf.c,
// compiled by bpf2go and committed): attached to a guarded server's
// network namespace, it steers TCP connections to destinations a network
// rule may admit, on any address and port, and (Attach's outside) every
// connection bound outside loopback, to the filter's catch-all listener,
// which refuses and reports what no rule admits. Loading it needs CAP_BPF and CAP_NET_ADMIN (a root proxy),
// not BPF LSM: it runs wherever the kernel has sk_lookup (5.9+).
package steer

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-19 -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -type steer_key steer steer.bpf.c
