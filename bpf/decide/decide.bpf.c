//go:build ignore

// SPDX-License-Identifier: GPL-2.0
// Test harness for bpf/decide.h: a socket filter that reads a request from
// the packet data BPF_PROG_TEST_RUN feeds it and returns the decision, so
// the decisions of the LSM programs are table-tested on the host.
#include "../vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "../decide.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 64);
	__type(key, struct net_key);
	__type(value, __u32);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} rules SEC(".maps");

// Requests, in the packet data (host byte order).
#define OP_SOCKET 1
#define OP_NET 2

struct decide_req {
	__u32 op;
	__u32 family;
	__u32 type;
	__u16 port;
	__u16 pad;
	__u64 policy;
	__u8 addr[16];
};

const struct decide_req *unused_request __attribute__((unused));

SEC("socket")
int decide(struct __sk_buff *skb)
{
	struct decide_req r = {};
	if (bpf_skb_load_bytes(skb, 0, &r, sizeof(r)) < 0)
		return 255;
	switch (r.op) {
	case OP_SOCKET:
		return socket_denied(r.family, r.type);
	case OP_NET: {
		struct net_key k = {};
		net_key_fill(&k, r.policy, r.family, r.addr, r.port);
		return net_lookup(&rules, &k);
	}
	}
	return 254;
}
