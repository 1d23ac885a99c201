/* The few kernel types the probe reads, instead of a multi-megabyte
 * vmlinux.h: preserve_access_index makes clang record CO-RE relocations, so
 * the loader finds each field's real offset in the running kernel's BTF. */
#ifndef MCPGUARD_PROBE_TYPES_H
#define MCPGUARD_PROBE_TYPES_H

typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef __u32 dev_t;

enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
};

struct super_block {
	dev_t s_dev;
} __attribute__((preserve_access_index));

struct inode {
	unsigned long i_ino;
	struct super_block *i_sb;
} __attribute__((preserve_access_index));

struct file {
	struct inode *f_inode;
} __attribute__((preserve_access_index));

#endif
