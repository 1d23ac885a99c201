//go:build ignore

// SPDX-License-Identifier: GPL-2.0
/* A minimal BPF LSM program: it denies one process (target_tgid) opening
 * the files listed in the denied map, and counts each denial, so a test can
 * tell the kernel's refusal from any other EPERM. */
#include "types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

/* Set by the loader before the program is loaded. */
volatile const __u32 target_tgid = 0;

/* A file is its inode number on its device (the kernel's dev_t encoding). */
struct file_id {
	__u64 ino;
	__u32 dev;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct file_id);
	__type(value, __u8);
} denied SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} denials SEC(".maps");

SEC("lsm/file_open")
int BPF_PROG(deny_open, struct file *file, int ret)
{
	if (ret)
		return ret; /* an earlier program already denied it */
	if ((__u32)(bpf_get_current_pid_tgid() >> 32) != target_tgid)
		return 0;

	struct file_id id = {};
	id.ino = BPF_CORE_READ(file, f_inode, i_ino);
	id.dev = BPF_CORE_READ(file, f_inode, i_sb, s_dev);
	if (!bpf_map_lookup_elem(&denied, &id))
		return 0;

	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&denials, &zero);
	if (n)
		__sync_fetch_and_add(n, 1);
	return -1; /* -EPERM */
}
