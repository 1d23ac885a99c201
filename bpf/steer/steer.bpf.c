//go:build ignore

// SPDX-License-Identifier: GPL-2.0
// The egress filter's steering program (package guard/egress): attached to
// a guarded server's own network namespace, where every address is local
// to lo, it hands a TCP connection bound for a destination the policy may
// admit (an address prefix on a port, or on any port) to the filter's
// catch-all listener, whatever the address and port. With steer_outside
// set, it also hands over every connection bound outside loopback, so
// that the filter sees (refuses and reports) a destination no rule admits
// instead of the namespace answering it unseen. Loopback (127/8, ::1)
// meets the namespace's ordinary socket lookup: the filter's exact
// listeners, the server's own sockets (its local workers), or nothing
// (connection refused). The filter decides again, from the connection's
// original destination.
#include "../vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6

// steer_key: an IPv6 prefix (IPv4 as ::ffff:a.b.c.d) on a port (0: any
// port), LPM-matched; prefixlen counts the port's 16 bits first.
struct steer_key {
	__u32 prefixlen;
	__u8 port[2]; // network order
	__u8 addr[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 4096);
	__type(key, struct steer_key);
	__type(value, __u32);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} steer_rules SEC(".maps");

// Catch-all listeners: 0 for IPv4, 1 for IPv6.
struct {
	__uint(type, BPF_MAP_TYPE_SOCKMAP);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} steer_socks SEC(".maps");

// steer_outside: steer every destination outside loopback (set at load).
volatile const __u32 steer_outside = 0;

// loopback: 127/8 (as ::ffff:127.x.y.z) or ::1.
static __always_inline int loopback(const struct steer_key *k)
{
	int i;
	for (i = 0; i < 10; i++)
		if (k->addr[i])
			return 0;
	if (k->addr[10] == 0xff && k->addr[11] == 0xff)
		return k->addr[12] == 127;
	if (k->addr[10] || k->addr[11] || k->addr[12] || k->addr[13] || k->addr[14])
		return 0;
	return k->addr[15] == 1;
}

static __always_inline int admitted(struct steer_key *k, __u16 port)
{
	k->prefixlen = 16 + 128;
	k->port[0] = port >> 8;
	k->port[1] = port & 0xff;
	if (bpf_map_lookup_elem(&steer_rules, k))
		return 1;
	k->port[0] = 0;
	k->port[1] = 0;
	return bpf_map_lookup_elem(&steer_rules, k) != 0;
}

SEC("sk_lookup")
int steer(struct bpf_sk_lookup *ctx)
{
	struct steer_key k = {};
	__u32 idx;

	if (ctx->protocol != IPPROTO_TCP)
		return SK_PASS;
	if (ctx->family == AF_INET) {
		__u32 a = ctx->local_ip4;
		k.addr[10] = 0xff;
		k.addr[11] = 0xff;
		__builtin_memcpy(&k.addr[12], &a, 4);
		idx = 0;
	} else if (ctx->family == AF_INET6) {
		__u32 a0 = ctx->local_ip6[0], a1 = ctx->local_ip6[1];
		__u32 a2 = ctx->local_ip6[2], a3 = ctx->local_ip6[3];
		__builtin_memcpy(&k.addr[0], &a0, 4);
		__builtin_memcpy(&k.addr[4], &a1, 4);
		__builtin_memcpy(&k.addr[8], &a2, 4);
		__builtin_memcpy(&k.addr[12], &a3, 4);
		idx = 1;
	} else {
		return SK_PASS;
	}
	if (!(steer_outside && !loopback(&k)) && !admitted(&k, (__u16)ctx->local_port))
		return SK_PASS;
	struct bpf_sock *sk = bpf_map_lookup_elem(&steer_socks, &idx);
	if (!sk)
		return SK_PASS;
	bpf_sk_assign(ctx, sk, 0);
	bpf_sk_release(sk);
	return SK_PASS;
}
