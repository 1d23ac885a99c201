//go:build ignore

// SPDX-License-Identifier: GPL-2.0
//
// mcpguard L3: BPF LSM programs that confine guarded MCP server process
// trees. The programs are loaded and attached once (links pinned under
// /sys/fs/bpf/mcpguard/<version>/) and shared by every session; a session is
// a policy id (its cgroup's id) plus its entries in the maps, which the Go
// controller in guard/sandbox writes before the server starts.
//
// Membership: a task belongs to a session when its cgroup is in `cgroups`
// (the session cgroup the server is cloned into, so it is guarded from its
// first instruction) or its tgid is in `tasks` (added on fork, so a child
// that leaves the cgroup stays guarded; removed when the whole thread group
// has exited). Tasks in no session are never restricted.
//
// Paths: an open is allowed when the opened inode or one of its ancestors,
// walking dentries up to the root and crossing mount points, is in
// `fs_rules` with the needed access. Rules are inode identities (dev, ino),
// never path strings, so "/ws" cannot admit "/ws-evil", symlinks are judged
// by their target and a bind or rename does not confuse string prefixes.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "GPL";

#define EPERM 1
#define S_IFMT 00170000
#define S_IFREG 0100000
#define RENAME_EXCHANGE (1 << 1)
#define FMODE_READ 0x1
#define FMODE_WRITE 0x2
#define PROC_SUPER_MAGIC 0x9fa0

// Access bits in fs_rules values.
#define ACC_READ 1
#define ACC_WRITE 2
#define ACC_LINKS_OK 4 // files with several hard links are fine below this root

// Event kinds; keep in sync with guard/sandbox/events.go.
enum event_kind {
	EV_FILE_OPEN = 1,
	EV_FILE_HARDLINK = 2,
	EV_FILE_CREATE = 3,
	EV_FILE_LINK = 4,
	EV_NET_CONNECT = 5,
	EV_NET_SEND = 6,
	EV_EXEC = 7,
	EV_FILE_PROC = 8,
	EV_FILE_PROTECTED = 9,
	EV_BPF = 10,
	EV_PTRACE = 11,
	EV_MOUNT = 12,
	EV_SOCKET = 13,
	EV_UNIX = 14,
	EV_KEY = 15,
	EV_FILE_EXEC = 16,
};

// EXEC_BITS: no regular file a guarded task makes, writes, or moves in a
// write root carries one. Nothing a guarded task writes is in its exec
// allow-list, so an execute bit there only serves the user's tools later,
// outside every sandbox (npm's node_modules/.bin, rustup's toolchain
// directory, a PATH entry in the project).
#define EXEC_BITS 0111

static __always_inline int is_program(struct inode *i)
{
	if (!i)
		return 0;
	__u16 m = BPF_CORE_READ(i, i_mode);
	return (m & S_IFMT) == S_IFREG && (m & EXEC_BITS);
}

#define MAX_DEPTH 64 // dentry levels walked (deeper paths are denied)
#define NAME_COMPS 8
#define NAME_LEN 64

struct inode_key {
	__u64 policy;
	__u64 ino;
	__u32 dev; // kernel dev_t: major << 20 | minor
	__u32 pad;
};

#include "decide.h"

struct event {
	__u64 policy;
	__u32 kind;
	__u32 pid;
	__u32 tgid;
	__u32 access;
	__u64 ino;
	__u32 dev;
	__u16 family;
	__u16 port;
	__u8 addr[16];
	__u32 ncomp;    // path components in path[i*NAME_LEN], leaf first
	__u32 complete; // the component walk reached the root
	char comm[16];
	char path[NAME_COMPS * NAME_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u64);   // cgroup id
	__type(value, __u64); // policy id
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cgroups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);   // tgid
	__type(value, __u64); // policy id
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} tasks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct inode_key);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} fs_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct inode_key);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} exec_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 1024);
	__type(key, struct net_key);
	__type(value, __u32);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} net_rules SEC(".maps");

// Where a session's net rules hold. They name what is reachable inside the
// server's own network namespace (its loopback, the egress filter's
// listeners); in the namespace the guard runs in, the same addresses are
// the host's services. outside is the guard's namespace (known before the
// server starts), inside the server's (once it has started; 0 before). A
// socket of a session in outside, or in any namespace but inside once that
// is known, reaches no IP destination. Inode numbers of the namespaces.
struct netns_val {
	__u32 outside;
	__u32 inside;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u64); // policy id
	__type(value, struct netns_val);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} session_netns SEC(".maps");

// Names no guarded process may write, create, rename or unlink, even
// inside its write roots, because the user's tools run or obey what they
// contain (persistence). Shared by all sessions, written by the
// controller from guard/launch's lists:
//   {name, ""}     PROT_NAME: the name anywhere (.envrc, .git, .mcp.json);
//   {dir, ""}      PROT_TREE: the name, and everything below a directory of
//                  that name at any depth (.vscode, .claude);
//   {name, ""}     PROT_OUTSIDE_GIT: the name anywhere but below a .git
//                  (HEAD: a directory with HEAD, objects and refs is a
//                  bare repository whose config git obeys);
//   {name, parent} GIT_RULE + kind: below a .git the model is the other
//                  way round: everything is protected but git's own data
//                  (launch.GitData: refs, objects, the index, HEAD, ...),
//                  looked up by an entry's name and its parent's name
//                  (".git" at the first level), at most GIT_DEPTH levels
//                  down; kind is launch.GitKind. Names ending in ".lock"
//                  are data anywhere below a .git.
#define PROT_NAME 1
#define PROT_TREE 3
#define PROT_OUTSIDE_GIT 5
#define GIT_RULE 16
#define GIT_DATA 1         // the entry and everything below it
#define GIT_FIXED_OPEN 2   // not the entry; everything below it not listed
#define GIT_FIXED_CLOSED 3 // not the entry; below it only what is listed
#define GIT_FAMILY 4       // first level: every name with this prefix up to its last dot
#define GIT_DEPTH 3
#define PROT_DEPTH 64 // ancestors looked at by name (deeper: refused)

struct name_key {
	char name[32];
	char dir[32];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct name_key);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} protected SEC(".maps");

// Files a session's policy says the server may not write although they
// lie in its write roots (filesystem.protect_exec_config): the files the
// user's tools execute or read as configuration (guard/changes). Keyed by
// policy, so one session's switch does not reach another's. Values:
#define EXEC_NAME 1   // the name anywhere (package.json, Makefile)
#define EXEC_SUFFIX 2 // a name ending in it (.pth)
#define EXEC_TREE 3   // everything below a directory of that name (.github)
#define EXEC_SKIP 4   // nothing below a directory of that name (node_modules)

struct exec_key {
	__u64 policy;
	char name[32];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct exec_key);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} exec_config SEC(".maps");

// Each session has its own ring buffer, so concurrent sessions (in one
// process or several) never read each other's denials.
struct session_events {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, 256);
	__type(key, __u64); // policy id
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__array(values, struct session_events);
} events SEC(".maps");

// Force BTF for the types the Go side encodes.
const struct event *unused_event __attribute__((unused));
const struct inode_key *unused_inode_key __attribute__((unused));
const struct net_key *unused_net_key __attribute__((unused));
const struct name_key *unused_name_key __attribute__((unused));

// guarded returns the current task's policy id, 0 when it is in no session.
// Every hooked call of every process on the machine pays for it. The tgid
// is looked up first: every process of a session is in tasks (the
// controller adds the server it started, fork_guard every child), so a
// guarded task pays one lookup; the cgroup, looked up second, covers the
// server from its first instruction until the controller has added it.
// Both are read through the BTF-typed current task (the tgid is what
// bpf_get_current_pid_tgid() >> 32 returns, the cgroup id what
// bpf_get_current_cgroup_id() does: the default hierarchy's cgroup of the
// task's css_set, its kernfs node id): one helper call instead of two.
// The two never disagree: a task cannot leave its session's cgroup for
// another's, and its children inherit both.
static __always_inline __u64 guarded(void)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u32 tgid = t->tgid;
	__u64 *p = bpf_map_lookup_elem(&tasks, &tgid);
	if (p)
		return *p;
	__u64 cg = t->cgroups->dfl_cgrp->kn->id;
	p = bpf_map_lookup_elem(&cgroups, &cg);
	return p ? *p : 0;
}

static __always_inline struct mount *real_mount(struct vfsmount *m)
{
	return (struct mount *)((void *)m - bpf_core_field_offset(struct mount, mnt));
}

static __always_inline int inode_key_of(__u64 policy, struct dentry *d, struct inode_key *k)
{
	k->policy = policy;
	struct inode *i = BPF_CORE_READ(d, d_inode);
	if (!i)
		return -1;
	k->ino = BPF_CORE_READ(i, i_ino);
	k->dev = BPF_CORE_READ(i, i_sb, s_dev);
	k->pad = 0;
	return 0;
}

// Verdicts of walk().
#define W_DENY 0
#define W_SELF 1      // the inode itself is allowed
#define W_ANCESTOR 2  // an ancestor directory is allowed
#define W_LINKS_OK 3  // an ancestor with ACC_LINKS_OK is allowed
#define W_INTERNAL 4  // a kernel-internal mount (pipe, socket, memfd reopened via /proc)

struct walk_ctx {
	__u64 policy;
	struct dentry *d;
	struct mount *mnt;
	struct dentry *mroot; // mnt's root dentry
	__u32 dev;            // mnt's superblock dev: the dev of every inode below it
	__u32 need;
	int verdict;
};

// cross moves c from the root of its mount to the mount point in the parent
// mount. It returns 1 at the top of a mount tree (the namespace root, or a
// kernel-internal mount: mnt_ns == ERR_PTR(-EINVAL), verdict W_INTERNAL),
// where the walk stops. struct mount is reached from a vfsmount by a
// negative offset, which the verifier refuses for direct loads, so its
// fields are probe-read; this runs once per mount crossed.
static __always_inline long cross(struct walk_ctx *c)
{
	struct mount *mnt = c->mnt;
	struct mount *parent = BPF_CORE_READ(mnt, mnt_parent);
	if (parent == mnt) {
		void *ns = BPF_CORE_READ(mnt, mnt_ns);
		if ((long)ns == -22)
			c->verdict = W_INTERNAL;
		return 1;
	}
	c->d = BPF_CORE_READ(mnt, mnt_mountpoint);
	c->mnt = parent;
	c->mroot = BPF_CORE_READ(parent, mnt.mnt_root);
	c->dev = BPF_CORE_READ(parent, mnt.mnt_sb, s_dev);
	return 0;
}

// walk_step is one level of walk()'s slow part, run by bpf_loop so that the
// verifier checks it once instead of once per level. It only ever sees
// ancestors (level 0, the file itself, is always done by the fast part), so
// a matching rule is an ancestor's. The 6.1 verifier checks the callback
// once with c as the caller left it and prunes branches on that basis: do
// not branch on a counter kept in c.
static long walk_step(__u64 idx, struct walk_ctx *c)
{
	struct dentry *d = c->d;
	struct inode *ino = BPF_CORE_READ(d, d_inode);

	if (ino) {
		struct inode_key k = {.policy = c->policy, .ino = BPF_CORE_READ(ino, i_ino), .dev = c->dev};
		__u32 *acc = bpf_map_lookup_elem(&fs_rules, &k);
		if (acc && (*acc & c->need) == c->need) {
			c->verdict = (*acc & ACC_LINKS_OK) ? W_LINKS_OK : W_ANCESTOR;
			return 1;
		}
	}
	if (d == c->mroot)
		return cross(c);
	struct dentry *up = BPF_CORE_READ(d, d_parent);
	if (up == d)
		return 1; // disconnected
	c->d = up;
	return 0;
}

// FAST_DEPTH levels are walked by a plain loop with direct loads through
// the BTF-typed dentry pointers (no helper call but the map lookup per
// level); the rest of MAX_DEPTH, and everything past the first mount
// crossing (struct mount is only probe-read, so the dentries found from it
// are untyped), by bpf_loop and walk_step with probe reads.
#define FAST_DEPTH 16

// walk looks for a rule granting need on d or one of its ancestors, crossing
// mount points up to the root of the mount tree, at most MAX_DEPTH levels.
static __always_inline int walk(__u64 policy, struct dentry *d, struct vfsmount *vm, __u32 need)
{
	struct dentry *mroot = vm->mnt_root;
	struct inode_key k = {.policy = policy, .dev = vm->mnt_sb->s_dev};
	int i;

	for (i = 0; i < FAST_DEPTH; i++) {
		struct inode *ino = d->d_inode;
		if (ino) {
			k.ino = ino->i_ino;
			__u32 *acc = bpf_map_lookup_elem(&fs_rules, &k);
			if (acc && (*acc & need) == need) {
				if (i == 0)
					return W_SELF;
				return (*acc & ACC_LINKS_OK) ? W_LINKS_OK : W_ANCESTOR;
			}
		}
		if (d == mroot)
			break;
		struct dentry *up = d->d_parent;
		if (up == d)
			return W_DENY; // disconnected
		d = up;
	}
	struct walk_ctx c = {
		.policy = policy,
		.d = d,
		.mnt = real_mount(vm),
		.mroot = mroot,
		.dev = k.dev,
		.need = need,
		.verdict = W_DENY,
	};
	if (i < FAST_DEPTH) {
		// Stopped at the root of vm after checking level i.
		if (cross(&c))
			return c.verdict;
		i++;
	}
	bpf_loop(MAX_DEPTH - i, walk_step, &c, 0);
	return c.verdict;
}

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct event);
} scratch SEC(".maps");

struct name_ctx {
	struct dentry *d;
	struct mount *mnt;
	struct dentry *root; // the task's root (chroot), where names stop
	struct mount *root_mnt;
};

static long name_step(__u64 idx, struct name_ctx *c)
{
	__u32 zero = 0;
	struct event *e = bpf_map_lookup_elem(&scratch, &zero);
	if (!e || e->ncomp >= NAME_COMPS)
		return 1;
	struct dentry *d = c->d;
	struct mount *mnt = c->mnt;
	if (d == c->root && mnt == c->root_mnt) {
		e->complete = 1;
		return 1;
	}
	struct dentry *root = BPF_CORE_READ(mnt, mnt.mnt_root);
	if (d == root) {
		struct mount *parent = BPF_CORE_READ(mnt, mnt_parent);
		if (parent == mnt) {
			e->complete = 1;
			return 1;
		}
		c->d = BPF_CORE_READ(mnt, mnt_mountpoint);
		c->mnt = parent;
		return 0;
	}
	const unsigned char *name = BPF_CORE_READ(d, d_name.name);
	bpf_probe_read_kernel_str(&e->path[(e->ncomp & (NAME_COMPS - 1)) * NAME_LEN], NAME_LEN, name);
	e->ncomp++;
	struct dentry *up = BPF_CORE_READ(d, d_parent);
	if (up == d)
		return 1;
	c->d = up;
	return 0;
}

// new_event returns the per-CPU scratch event, reset and stamped; it is
// sent with send_event. (Built outside the ring buffer so that the bpf_loop
// callbacks can fill it.)
static __always_inline struct event *new_event(__u64 policy, __u32 kind)
{
	__u32 zero = 0;
	struct event *e = bpf_map_lookup_elem(&scratch, &zero);
	if (!e)
		return NULL;
	__builtin_memset(e, 0, sizeof(*e));
	__u64 id = bpf_get_current_pid_tgid();
	e->policy = policy;
	e->kind = kind;
	e->pid = (__u32)id;
	e->tgid = id >> 32;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	return e;
}

static __always_inline void send_event(struct event *e)
{
	__u64 policy = e->policy;
	void *rb = bpf_map_lookup_elem(&events, &policy);
	if (rb)
		bpf_ringbuf_output(rb, e, sizeof(*e), 0);
}

// name_path fills e's path components from d upwards (leaf first).
static __always_inline void name_path(struct dentry *d, struct vfsmount *vm)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct name_ctx c = {
		.d = d,
		.mnt = real_mount(vm),
		.root = BPF_CORE_READ(t, fs, root.dentry),
		.root_mnt = real_mount(BPF_CORE_READ(t, fs, root.mnt)),
	};
	bpf_loop(MAX_DEPTH, name_step, &c, 0);
}

static __always_inline void report_path(__u64 policy, __u32 kind, __u32 need, struct dentry *d,
					struct vfsmount *vm)
{
	struct event *e = new_event(policy, kind);
	if (!e)
		return;
	struct inode_key k = {};
	inode_key_of(policy, d, &k);
	e->ino = k.ino;
	e->dev = k.dev;
	e->access = need;
	name_path(d, vm);
	send_event(e);
}

// The entry's path below its nearest .git as far as the git model looks,
// for is_protected: chain is [part 2, part 1, part 0, ".git"], part 0
// being the name just below the .git; each part followed by its parent's
// name is the {name, dir} key it is looked up by. Per CPU, not on the
// stack: the hooks' frames and is_protected's leave too little of it.
struct git_path {
	char chain[4][32];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct git_path);
} git_scratch SEC(".maps");

struct prot_ctx {
	__u64 policy;  // for exec_config (0: not looked at)
	int exec_tree; // an ancestor is an EXEC_TREE directory
	int exec_skip; // an ancestor is an EXEC_SKIP directory
	struct dentry *d;
	int in_git;    // an ancestor is named .git
	int below;     // names below the nearest .git, the entry's included
	int tree;      // an ancestor is a PROT_TREE directory
	int done;      // the walk reached the file system's root
	int gkind;     // git_step: the kind of the part before
	int gverdict;  // git_step: 0 none yet, 1 protected, 2 git data
};

// prot_step looks at one ancestor's name, walking up by d_parent (names
// are the file system's, whatever is mounted where).
static long prot_step(__u64 idx, struct prot_ctx *c)
{
	struct dentry *d = c->d;
	struct dentry *up = BPF_CORE_READ(d, d_parent);
	if (!up || up == d) {
		c->done = 1;
		return 1;
	}
	struct name_key k = {};
	bpf_probe_read_kernel_str(k.name, sizeof(k.name), BPF_CORE_READ(up, d_name.name));
	__u32 *v = bpf_map_lookup_elem(&protected, &k);
	if (v && *v == PROT_TREE) {
		c->tree = 1;
		return 1;
	}
	if (c->policy) {
		struct exec_key ek = {.policy = c->policy};
		__builtin_memcpy(ek.name, k.name, sizeof(ek.name));
		__u32 *x = bpf_map_lookup_elem(&exec_config, &ek);
		if (x && *x == EXEC_TREE)
			c->exec_tree = 1;
		if (x && *x == EXEC_SKIP)
			c->exec_skip = 1;
	}
	if (!c->in_git) {
		if (k.name[0] == '.' && k.name[1] == 'g' && k.name[2] == 'i' && k.name[3] == 't' && k.name[4] == 0) {
			c->in_git = 1;
		} else {
			__u32 zero = 0;
			struct git_path *gp = bpf_map_lookup_elem(&git_scratch, &zero);
			if (!gp) {
				c->tree = 1; // refused: cannot happen
				return 1;
			}
			// By helper, not inline copies: those take registers
			// the verifier's 512-byte stack pays for in spills.
			bpf_probe_read_kernel(gp->chain[0], 32, gp->chain[1]);
			bpf_probe_read_kernel(gp->chain[1], 32, gp->chain[2]);
			bpf_probe_read_kernel(gp->chain[2], 32, k.name);
			c->below++;
		}
	}
	c->d = up;
	return 0;
}

// git_family says whether name (a first-level name below a .git) belongs
// to a GIT_FAMILY entry: its part up to and including its last dot.
static __always_inline int git_family(const char *name)
{
	int dot = -1, end = 0;
	for (int i = 1; i < 31; i++) {
		if (name[i] == 0) {
			end = 1;
			break;
		}
		if (name[i] == '.')
			dot = i;
	}
	if (dot < 1 || !end)
		return 0; // 31 bytes or more: no family (launch.GitFamilyKey)
	struct name_key fk = {};
	__builtin_memcpy(fk.dir, ".git", 5);
	for (int i = 0; i < 31; i++)
		fk.name[i] = i <= dot ? name[i] : 0;
	__u32 *v = bpf_map_lookup_elem(&protected, &fk);
	return v && *v == GIT_RULE + GIT_FAMILY;
}

// git_step judges part idx of the entry's path below its .git (0: the
// name just below it) by the git model: launch's gitEntryProtected, step
// for step.
static long git_step(__u64 idx, struct prot_ctx *c)
{
	__u32 zero = 0;
	struct git_path *gp = bpf_map_lookup_elem(&git_scratch, &zero);
	if (!gp) {
		c->gverdict = 1;
		return 1;
	}
	// The part and its parent's name after it: a name_key.
	void *key = gp->chain[2];
	if (idx == 1)
		key = gp->chain[1];
	else if (idx >= 2)
		key = gp->chain[0];
	__u32 *v = bpf_map_lookup_elem(&protected, key);
	__u32 kind = v && *v > GIT_RULE ? *v - GIT_RULE : 0;
	if (!kind) {
		if (idx == 0 && git_family(gp->chain[2])) {
			c->gverdict = 2;
			return 1;
		}
		c->gverdict = (idx == 0 || c->gkind != GIT_FIXED_OPEN) ? 1 : 2;
		return 1;
	}
	if (kind == GIT_DATA || kind == GIT_FAMILY) {
		c->gverdict = 2;
		return 1;
	}
	c->gkind = kind;
	return 0;
}

// git_protected applies the git model to the entry whose path below its
// nearest .git prot_step recorded (git_scratch, c->below); leaf is the
// entry's own name, n its length with the NUL.
static __always_inline int git_protected(struct prot_ctx *c, const char *leaf, long n)
{
	// index.lock, refs/heads/main.lock, config.lock: data
	if (n > 6 && n <= 31) {
		long i = (n - 6) & 31;
		if (i <= 26 && leaf[i] == '.' && leaf[i + 1] == 'l' && leaf[i + 2] == 'o' &&
		    leaf[i + 3] == 'c' && leaf[i + 4] == 'k')
			return 0;
	}
	int steps = c->below < GIT_DEPTH ? c->below : GIT_DEPTH;
	bpf_loop(steps, git_step, c, 0);
	if (c->gverdict)
		return c->gverdict == 1;
	// The walk ended on a fixed directory: the entry is that directory
	// itself, or lies below the levels the model lists.
	return c->below <= GIT_DEPTH || c->gkind != GIT_FIXED_OPEN;
}

// exec_named says whether the session's exec_config names the entry
// itself: by name, or by the suffix from its last dot.
static __noinline int exec_named(__u64 policy, const char *name)
{
	struct exec_key ek = {.policy = policy};
	__builtin_memcpy(ek.name, name, sizeof(ek.name));
	__u32 *x = bpf_map_lookup_elem(&exec_config, &ek);
	if (x && *x == EXEC_NAME)
		return 1;
	int dot = -1;
	for (int i = 1; i < 31; i++) {
		if (name[i] == 0)
			break;
		if (name[i] == '.')
			dot = i;
	}
	if (dot < 1)
		return 0;
	struct exec_key sk = {.policy = policy};
	for (int i = 0; i < 31; i++) {
		int j = dot + i;
		if (j >= 31 || name[j & 31] == 0)
			break;
		sk.name[i] = name[j & 31];
	}
	x = bpf_map_lookup_elem(&exec_config, &sk);
	return x && *x == EXEC_SUFFIX;
}

// is_protected says whether writing, creating, renaming or unlinking the
// entry d is refused by the protected map (see its comment), or by the
// session's exec_config (policy 0: not looked at).
static __noinline int is_protected(__u64 policy, struct dentry *d)
{
	struct name_key k = {};
	const unsigned char *name = BPF_CORE_READ(d, d_name.name);
	long n = bpf_probe_read_kernel_str(k.name, sizeof(k.name), name);
	__u32 *v = bpf_map_lookup_elem(&protected, &k);
	if (v && (*v == PROT_NAME || *v == PROT_TREE))
		return 1; // a tree's own name too: a directory renamed into place
	int outside_git = v && *v == PROT_OUTSIDE_GIT;
	__u32 zero = 0;
	struct git_path *gp = bpf_map_lookup_elem(&git_scratch, &zero);
	if (!gp)
		return 1;
	__builtin_memset(gp, 0, sizeof(*gp));
	bpf_probe_read_kernel(gp->chain[2], 32, k.name);
	__builtin_memcpy(gp->chain[3], ".git", 5);
	struct prot_ctx c = {.d = d, .policy = policy, .below = 1};
	bpf_loop(PROT_DEPTH, prot_step, &c, 0);
	if (c.tree || !c.done)
		return 1; // deeper than PROT_DEPTH: refused, as file_guard does
	if (c.in_git)
		return git_protected(&c, k.name, n);
	if (outside_git)
		return 1;
	if (policy && !c.exec_skip && (c.exec_tree || exec_named(policy, k.name)))
		return 1;
	return 0;
}

SEC("lsm/file_open")
int BPF_PROG(file_guard, struct file *file)
{
	__u64 policy = guarded();
	if (!policy)
		return 0;
	struct dentry *d = file->f_path.dentry;
	struct vfsmount *vm = file->f_path.mnt;
	__u32 mode = file->f_mode;
	__u32 need = 0;
	if (mode & FMODE_READ)
		need |= ACC_READ;
	if (mode & FMODE_WRITE)
		need |= ACC_WRITE;
	if (need == 0)
		need = ACC_READ; // O_PATH-like opens still need the file to be visible

	// /proc/<pid>/... of another process (its environ, cmdline, fds, mem)
	// is denied even though /proc is readable: the proxy's environment
	// holds what the server's was stripped of.
	if (file->f_inode->i_sb->s_magic == PROC_SUPER_MAGIC) {
		struct inode *fi = BPF_CORE_READ(file, f_inode);
		struct proc_inode *pi = (struct proc_inode *)((void *)fi -
			bpf_core_field_offset(struct proc_inode, vfs_inode));
		struct pid *p = BPF_CORE_READ(pi, pid);
		if (p) {
			struct task_struct *t = bpf_get_current_task_btf();
			if (p != t->thread_pid && p != BPF_CORE_READ(t, signal, pids[PIDTYPE_TGID])) {
				report_path(policy, EV_FILE_PROC, need, d, vm);
				return -EPERM;
			}
		}
		// The launcher mounts a /proc of the server's own pid namespace,
		// a superblock no rule can name in advance: reading it is what
		// the baseline's /proc grant means. Writes still need a rule.
		if (need == ACC_READ)
			return 0;
	}

	int v = walk(policy, d, vm, need);
	if (v == W_DENY) {
		report_path(policy, EV_FILE_OPEN, need, d, vm);
		return -EPERM;
	}
	if ((need & ACC_WRITE) && v != W_SELF && is_protected(policy, d)) {
		report_path(policy, EV_FILE_PROTECTED, need, d, vm);
		return -EPERM;
	}
	if ((need & ACC_WRITE) && v != W_SELF && is_program(file->f_inode)) {
		report_path(policy, EV_FILE_EXEC, need, d, vm);
		return -EPERM;
	}
	if (v == W_ANCESTOR) {
		// A regular file with several names, reached through an allowed
		// directory: another of its names may be in a denied area (a hard
		// link planted in the workspace pointing at a secret). Allowed only
		// when the file itself or a links-ok root admits it.
		__u16 imode = file->f_inode->i_mode;
		__u32 nlink = file->f_inode->__i_nlink;
		if ((imode & S_IFMT) == S_IFREG && nlink > 1) {
			report_path(policy, EV_FILE_HARDLINK, need, d, vm);
			return -EPERM;
		}
	}
	return 0;
}

// Creating a name needs write access to the directory. path_mknod also runs
// for open(O_CREAT) before the file exists, so a denied staging file is not
// even created empty.
static __always_inline int dir_write(const struct path *dir, struct dentry *child)
{
	__u64 policy = guarded();
	if (!policy)
		return 0;
	struct dentry *d = dir->dentry;
	struct vfsmount *vm = dir->mnt;
	__u32 kind = EV_FILE_CREATE;
	int w = walk(policy, d, vm, ACC_WRITE);
	if (w != W_DENY) {
		if (!is_protected(policy, child))
			return 0;
		kind = EV_FILE_PROTECTED;
	}
	struct event *e = new_event(policy, kind);
	if (e) {
		e->access = ACC_WRITE;
		name_path(d, vm);
		if (e->ncomp > NAME_COMPS - 1) {
			e->ncomp = NAME_COMPS - 1;
			e->complete = 0;
		}
		// The new name goes in the last slot; userspace appends it.
		const unsigned char *name = BPF_CORE_READ(child, d_name.name);
		bpf_probe_read_kernel_str(&e->path[(NAME_COMPS - 1) * NAME_LEN], NAME_LEN, name);
		e->access |= 0x100; // marks "last slot holds the new name"
		send_event(e);
	}
	return -EPERM;
}

// exec_refused reports that the entry d (below dir's mount) would become,
// or move, a program.
static __always_inline int exec_refused(const struct path *dir, struct dentry *d)
{
	__u64 policy = guarded();
	if (!policy)
		return 0;
	report_path(policy, EV_FILE_EXEC, ACC_WRITE, d, BPF_CORE_READ(dir, mnt));
	return -EPERM;
}

SEC("lsm/path_mknod")
int BPF_PROG(create_guard, const struct path *dir, struct dentry *dentry, umode_t mode, unsigned int dev)
{
	int r = dir_write(dir, dentry);
	if (r)
		return r;
	// open(O_CREAT) passes S_IFREG; mknod(2) may pass no type at all.
	if (((mode & S_IFMT) == S_IFREG || (mode & S_IFMT) == 0) && (mode & EXEC_BITS))
		return exec_refused(dir, dentry);
	return 0;
}

// chmod(2), fchmod(2), fchmodat(2): execute bits of a regular file may be
// kept or dropped, never added.
SEC("lsm/path_chmod")
int BPF_PROG(chmod_guard, const struct path *path, umode_t mode)
{
	__u64 policy = guarded();
	if (!policy)
		return 0;
	struct dentry *d = BPF_CORE_READ(path, dentry);
	struct inode *i = BPF_CORE_READ(d, d_inode);
	if (!i)
		return 0;
	__u16 old = BPF_CORE_READ(i, i_mode);
	if ((old & S_IFMT) != S_IFREG || !(mode & EXEC_BITS & ~old))
		return 0;
	report_path(policy, EV_FILE_EXEC, ACC_WRITE, d, BPF_CORE_READ(path, mnt));
	return -EPERM;
}

SEC("lsm/path_mkdir")
int BPF_PROG(mkdir_guard, const struct path *dir, struct dentry *dentry, umode_t mode)
{
	return dir_write(dir, dentry);
}

SEC("lsm/path_symlink")
int BPF_PROG(symlink_guard, const struct path *dir, struct dentry *dentry, const char *old_name)
{
	return dir_write(dir, dentry);
}

SEC("lsm/path_unlink")
int BPF_PROG(unlink_guard, const struct path *dir, struct dentry *dentry)
{
	return dir_write(dir, dentry);
}

SEC("lsm/path_rename")
int BPF_PROG(rename_guard, const struct path *old_dir, struct dentry *old_dentry,
	     const struct path *new_dir, struct dentry *new_dentry, unsigned int flags)
{
	int r = dir_write(old_dir, old_dentry);
	if (r)
		return r;
	r = dir_write(new_dir, new_dentry);
	if (r)
		return r;
	// A program is not moved: renamed onto a shim's name it would run in
	// the user's next npm test (RENAME_EXCHANGE moves both).
	if (is_program(BPF_CORE_READ(old_dentry, d_inode)))
		return exec_refused(old_dir, old_dentry);
	if ((flags & RENAME_EXCHANGE) && is_program(BPF_CORE_READ(new_dentry, d_inode)))
		return exec_refused(new_dir, new_dentry);
	return 0;
}

// truncate(2) by path changes a file without opening it.
SEC("lsm/path_truncate")
int BPF_PROG(truncate_guard, const struct path *path)
{
	__u64 policy = guarded();
	if (!policy)
		return 0;
	struct dentry *d = path->dentry;
	struct vfsmount *vm = path->mnt;
	if (walk(policy, d, vm, ACC_WRITE) == W_SELF)
		return 0;
	if (is_protected(policy, d)) {
		report_path(policy, EV_FILE_PROTECTED, ACC_WRITE, d, vm);
		return -EPERM;
	}
	if (is_program(BPF_CORE_READ(d, d_inode))) {
		report_path(policy, EV_FILE_EXEC, ACC_WRITE, d, vm);
		return -EPERM;
	}
	return 0;
}

// Hard links are refused outright: a link to a secret placed in the
// workspace would otherwise carry the workspace's rules.
SEC("lsm/path_link")
int BPF_PROG(link_guard, struct dentry *old_dentry, const struct path *new_dir, struct dentry *new_dentry)
{
	__u64 policy = guarded();
	if (!policy)
		return 0;
	struct event *e = new_event(policy, EV_FILE_LINK);
	if (e) {
		struct vfsmount *vm = BPF_CORE_READ(new_dir, mnt);
		name_path(old_dentry, vm);
		e->complete = 0; // old_dentry may live on another mount than vm
		send_event(e);
	}
	return -EPERM;
}

static __always_inline int net_allowed(struct net_key *k)
{
	return net_lookup(&net_rules, k);
}

// in_session_netns: sock lives in the network namespace the session's net
// rules are about (session_netns). A session without an entry has none.
static __always_inline int in_session_netns(__u64 policy, struct socket *sock)
{
	struct netns_val *v = bpf_map_lookup_elem(&session_netns, &policy);
	if (!v)
		return 0;
	__u32 ns = BPF_CORE_READ(sock, sk, __sk_common.skc_net.net, ns.inum);
	if (ns == v->outside)
		return 0;
	return v->inside == 0 || ns == v->inside;
}

// check_addr returns 0 when the destination is allowed, -EPERM otherwise
// (and reports it). Families other than IPv4 and IPv6 are not policed here.
static __always_inline int check_addr(__u64 policy, __u32 kind, struct socket *sock, struct sockaddr *sa)
{
	struct net_key k = {};
	__builtin_memcpy(k.policy, &policy, 8);
	__u16 family = 0;
	__u16 port = 0;

	bpf_probe_read_kernel(&family, sizeof(family), &sa->sa_family);
	if (family == AF_INET) {
		struct sockaddr_in in = {};
		bpf_probe_read_kernel(&in, sizeof(in), sa);
		port = bpf_ntohs(in.sin_port);
		net_key_fill(&k, policy, family, (const __u8 *)&in.sin_addr.s_addr, port);
	} else if (family == AF_INET6) {
		struct sockaddr_in6 in6 = {};
		bpf_probe_read_kernel(&in6, sizeof(in6), sa);
		port = bpf_ntohs(in6.sin6_port);
		net_key_fill(&k, policy, family, (const __u8 *)&in6.sin6_addr, port);
	} else {
		return 0;
	}
	struct net_key full = k;
	if (in_session_netns(policy, sock) && net_allowed(&k))
		return 0;
	struct event *e = new_event(policy, kind);
	if (e) {
		e->family = family;
		e->port = port;
		__builtin_memcpy(e->addr, full.addr, 16);
		send_event(e);
	}
	return -EPERM;
}

// The family is checked before membership: connects of other families
// (unix sockets, netlink) are not policed here, and every process on the
// machine would otherwise pay guarded()'s lookups for them.
SEC("lsm/socket_connect")
int BPF_PROG(net_guard, struct socket *sock, struct sockaddr *address, int addrlen)
{
	__u16 family = address->sa_family;
	if (family != AF_INET && family != AF_INET6)
		return 0;
	__u64 policy = guarded();
	if (!policy)
		return 0;
	return check_addr(policy, EV_NET_CONNECT, sock, address);
}

// Unconnected sends (UDP sendto/sendmsg with a destination, TCP fast open)
// name their destination per message.
// A send without a destination (every write on a connected socket, the
// common case for every process on the machine) returns before the
// membership lookups.
SEC("lsm/socket_sendmsg")
int BPF_PROG(send_guard, struct socket *sock, struct msghdr *msg, int size)
{
	void *name = msg->msg_name;
	if (!name)
		return 0;
	__u64 policy = guarded();
	if (!policy)
		return 0;
	return check_addr(policy, EV_NET_SEND, sock, (struct sockaddr *)name);
}

// Exec is allowed only for allow-listed inodes. Fileless exec (a memfd run
// through execveat) has an inode on a kernel-internal mount that no rule can
// name, so it is denied. For a script, this runs for the script and again
// for its interpreter: both must be listed.
SEC("lsm/bprm_check_security")
int BPF_PROG(proc_guard, struct linux_binprm *bprm)
{
	__u64 policy = guarded();
	if (!policy)
		return 0;
	struct inode_key k = {};
	struct dentry *d = BPF_CORE_READ(bprm, file, f_path.dentry);
	if (inode_key_of(policy, d, &k) == 0 && bpf_map_lookup_elem(&exec_rules, &k))
		return 0;
	struct event *e = new_event(policy, EV_EXEC);
	if (e) {
		e->ino = k.ino;
		e->dev = k.dev;
		const char *fn = BPF_CORE_READ(bprm, filename);
		bpf_probe_read_kernel_str(e->path, sizeof(e->path), fn);
		send_event(e);
	}
	return -EPERM;
}

// fork_guard carries membership to every child, so a child that moves to
// another cgroup, or a daemon that double-forks away, stays guarded.
SEC("tp_btf/sched_process_fork")
int BPF_PROG(fork_guard, struct task_struct *parent, struct task_struct *child)
{
	__u64 policy = guarded();
	if (!policy)
		return 0;
	__u32 tgid = child->tgid;
	bpf_map_update_elem(&tasks, &tgid, &policy, BPF_ANY);
	return 0;
}

// exit_guard forgets a tgid once its whole thread group has exited.
SEC("tp_btf/sched_process_exit")
int BPF_PROG(exit_guard, struct task_struct *p)
{
	if (BPF_CORE_READ(p, signal, live.counter) != 0)
		return 0;
	__u32 tgid = p->tgid;
	bpf_map_delete_elem(&tasks, &tgid);
	return 0;
}

// ---- Containment hooks: what a guarded task may never do, whatever its
// policy. The launcher already leaves the server without capabilities and
// under a seccomp filter; these hold even if one of those is missing.

// pid_ns_init reports whether the current task is the init (pid 1) of a
// pid namespace other than the initial one: the launcher's first stage,
// which sets up the server's mounts. A guarded task cannot become one (it
// may not make namespaces).
static __always_inline int pid_ns_init(void)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct pid *p = t->thread_pid;
	unsigned int level = BPF_CORE_READ(p, level);
	if (level == 0 || level > 32)
		return 0;
	struct upid u = {};
	void *base = (void *)p + bpf_core_field_offset(struct pid, numbers);
	bpf_probe_read_kernel(&u, sizeof(u), base + (__u64)level * sizeof(struct upid));
	return u.nr == 1;
}

static __always_inline int deny_kind(__u64 policy, __u32 kind, __u32 detail)
{
	struct event *e = new_event(policy, kind);
	if (e) {
		e->access = detail;
		send_event(e);
	}
	return -EPERM;
}

// Guarded tasks get no map or program access: their session's membership
// (cgroups, tasks) and rules cannot be edited from inside.
SEC("lsm/bpf")
int BPF_PROG(bpf_guard, int cmd, union bpf_attr *attr, unsigned int size)
{
	__u64 policy = guarded();
	if (!policy)
		return 0;
	return deny_kind(policy, EV_BPF, cmd);
}

// policy_of is guarded() for another task.
static __always_inline __u64 policy_of(struct task_struct *t)
{
	__u32 tgid = BPF_CORE_READ(t, tgid);
	__u64 *p = bpf_map_lookup_elem(&tasks, &tgid);
	if (p)
		return *p;
	__u64 cg = BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
	p = bpf_map_lookup_elem(&cgroups, &cg);
	return p ? *p : 0;
}

// ptrace, process_vm_readv/writev, /proc/PID/mem and the like: only within
// the task's own session, never the proxy or anything outside.
SEC("lsm/ptrace_access_check")
int BPF_PROG(ptrace_guard, struct task_struct *child, unsigned int mode)
{
	__u64 policy = guarded();
	if (!policy)
		return 0;
	if (policy_of(child) == policy)
		return 0;
	return deny_kind(policy, EV_PTRACE, mode);
}

// No mounts: a bind mount would carry a protected directory's inodes under
// a write root's rule. Only the launcher's first stage (pid 1 of the
// server's pid namespace) mounts, before the server exists.
SEC("lsm/sb_mount")
int BPF_PROG(mount_guard, const char *dev_name, const struct path *path, const char *type,
	     unsigned long flags, void *data)
{
	__u64 policy = guarded();
	if (!policy || pid_ns_init())
		return 0;
	return deny_kind(policy, EV_MOUNT, 1);
}

SEC("lsm/move_mount")
int BPF_PROG(move_mount_guard, const struct path *from_path, const struct path *to_path)
{
	__u64 policy = guarded();
	if (!policy || pid_ns_init())
		return 0;
	return deny_kind(policy, EV_MOUNT, 2);
}

SEC("lsm/sb_umount")
int BPF_PROG(umount_guard, struct vfsmount *mnt, int flags)
{
	__u64 policy = guarded();
	if (!policy || pid_ns_init())
		return 0;
	return deny_kind(policy, EV_MOUNT, 3);
}

// No packet sockets and no raw IP sockets (any packet, past every connect
// hook). Runs for io_uring's IORING_OP_SOCKET too. Kernel-internal sockets
// are not the task's.
SEC("lsm/socket_create")
int BPF_PROG(socket_guard, int family, int type, int protocol, int kern)
{
	if (kern)
		return 0;
	__u64 policy = guarded();
	if (!policy)
		return 0;
	if (socket_denied(family, type)) {
		struct event *e = new_event(policy, EV_SOCKET);
		if (e) {
			e->family = family;
			e->access = type;
			e->port = protocol;
			send_event(e);
		}
		return -EPERM;
	}
	return 0;
}

// unix_allowed: a unix socket peer is reachable when it is bound to a path
// the policy grants write to (the server's own sockets in its workspace).
// Abstract names belong to nobody's policy: denied. An unbound peer (a
// socketpair's) is the task's own.
static __always_inline int unix_allowed(__u64 policy, struct sock *other)
{
	struct unix_sock *u = (struct unix_sock *)other;
	struct unix_address *addr = BPF_CORE_READ(u, addr);
	if (!addr)
		return 1;
	struct dentry *d = BPF_CORE_READ(u, path.dentry);
	if (!d)
		return 0; // abstract
	struct vfsmount *vm = BPF_CORE_READ(u, path.mnt);
	struct walk_ctx c = {
		.policy = policy,
		.d = d,
		.mnt = real_mount(vm),
		.mroot = BPF_CORE_READ(vm, mnt_root),
		.dev = BPF_CORE_READ(vm, mnt_sb, s_dev),
		.need = ACC_WRITE,
		.verdict = W_DENY,
	};
	bpf_loop(MAX_DEPTH, walk_step, &c, 0);
	return c.verdict != W_DENY && c.verdict != W_INTERNAL;
}

static __always_inline int unix_check(struct sock *other)
{
	__u64 policy = guarded();
	if (!policy)
		return 0;
	if (unix_allowed(policy, other))
		return 0;
	struct event *e = new_event(policy, EV_UNIX);
	if (e) {
		struct unix_sock *u = (struct unix_sock *)other;
		struct unix_address *addr = BPF_CORE_READ(u, addr);
		if (addr) {
			int len = BPF_CORE_READ(addr, len);
			void *name = (void *)addr + bpf_core_field_offset(struct unix_address, name);
			// sun_path, after the 2-byte family; abstract names start
			// with a NUL, kept as '@' for the log.
			bpf_probe_read_kernel(e->path, 108, name + 2);
			if (e->path[0] == 0)
				e->path[0] = '@';
			e->access = len;
		}
		e->family = AF_UNIX;
		send_event(e);
	}
	return -EPERM;
}

SEC("lsm/unix_stream_connect")
int BPF_PROG(unix_connect_guard, struct sock *sock, struct sock *other, struct sock *newsk)
{
	return unix_check(other);
}

SEC("lsm/unix_may_send")
int BPF_PROG(unix_send_guard, struct socket *sock, struct socket *other)
{
	return unix_check(BPF_CORE_READ(other, sk));
}

// Kernel keyrings hold other programs' secrets (aws-vault, Kerberos
// KEYRING: caches): guarded tasks use none, not even their own fresh
// session keyring.
SEC("lsm/key_permission")
int BPF_PROG(key_guard, key_ref_t key_ref, const struct cred *cred, __u32 need_perm)
{
	__u64 policy = guarded();
	if (!policy)
		return 0;
	return deny_kind(policy, EV_KEY, need_perm);
}
