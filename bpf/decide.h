// Pure decisions of guard.bpf.c, shared with decide/decide.bpf.c, which
// runs them through BPF_PROG_TEST_RUN on any kernel that loads socket
// filters (no BPF LSM, no VM): `go test ./bpf/decide`.
#pragma once

// LPM key: the policy id (64 bits, host order), 16 bits of port (big endian,
// 0 = any port), then the IPv6 address (IPv4 as ::ffff:a.b.c.d). prefixlen
// counts from the policy id, so it is 64 + 16 + the address prefix length.
struct net_key {
	__u32 prefixlen;
	__u8 policy[8];
	__u8 port[2];
	__u8 addr[16];
	__u8 pad[2];
};


#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10
#define AF_PACKET 17
#define SOCK_RAW 3
#define SOCK_PACKET 10
#define SOCK_TYPE_MASK 0xf

// socket_denied: packet sockets, SOCK_PACKET and raw IPv4/IPv6 sockets are
// refused to guarded tasks (socket_guard).
static __always_inline int socket_denied(int family, int type)
{
	int t = type & SOCK_TYPE_MASK;
	return family == AF_PACKET || t == SOCK_PACKET ||
	       ((family == AF_INET || family == AF_INET6) && t == SOCK_RAW);
}

// net_key_fill builds the net_rules LPM key for a destination: the policy
// id, the port (big endian), the address as IPv6 (IPv4 as ::ffff:a.b.c.d,
// from its first 4 bytes), full length.
static __always_inline void net_key_fill(struct net_key *k, __u64 policy, __u16 family,
					 const __u8 *addr, __u16 port)
{
	__builtin_memcpy(k->policy, &policy, 8);
	if (family == AF_INET) {
		k->addr[10] = 0xff;
		k->addr[11] = 0xff;
		__builtin_memcpy(&k->addr[12], addr, 4);
	} else {
		__builtin_memcpy(k->addr, addr, 16);
	}
	k->prefixlen = 64 + 16 + 128;
	k->port[0] = port >> 8;
	k->port[1] = port & 0xff;
}

// net_lookup: the exact port first, then the any-port (0) entries. It
// changes k's port.
static __always_inline int net_lookup(void *rules, struct net_key *k)
{
	if (bpf_map_lookup_elem(rules, k))
		return 1;
	k->port[0] = 0;
	k->port[1] = 0;
	return bpf_map_lookup_elem(rules, k) != NULL;
}
