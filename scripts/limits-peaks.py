#!/usr/bin/env python3
"""limits-peaks: the peak memory and task counts of mcpguard's session cgroups.

Usage: scripts/limits-peaks.py ANCESTOR_PID [INTERVAL_S]

Watches the Landlock backend's session cgroups (mcpguard-limits/l-*, cgroup v1
or v2, launch.NewLimiter) of processes descended from ANCESTOR_PID (e.g. the
`go test -run TestCompat` that starts the sessions) and, when stopped, prints
one line per cgroup: its peak memory (memory.peak, v1 memory.max_usage_in_bytes:
the kernel's own high-water mark, RSS and page cache), its peak task count
(pids.peak) and the programs seen in it. It stops when ANCESTOR_PID exits
(or on Ctrl-C / SIGTERM). The kernel keeps the maxima, so polling
only has to read them before the cgroup is removed: what a session adds in its
last INTERVAL_S (default 0.05) is missed. Used to size launch.DefaultTasks and
DefaultMemoryMiB (docs/l3.md, "Limits").
"""
import glob
import os
import signal
import sys
import time


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def ancestors(pid):
    seen = []
    while pid > 1 and len(seen) < 64:
        seen.append(pid)
        st = read(f"/proc/{pid}/stat")
        if st is None:
            break
        pid = int(st.rsplit(")", 1)[1].split()[1])
    return seen


def cmdline(pid):
    raw = read(f"/proc/{pid}/cmdline")
    if not raw:
        return None
    argv = raw.split("\0")
    return " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(argv[:4]))[:120]


def roots():
    v2 = "/sys/fs/cgroup/mcpguard-limits"
    if os.path.isdir(v2):
        return v2, v2, "memory.peak"
    return "/sys/fs/cgroup/memory/mcpguard-limits", "/sys/fs/cgroup/pids/mcpguard-limits", "memory.max_usage_in_bytes"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    top = int(sys.argv[1])
    interval = float(sys.argv[2]) if len(sys.argv) > 2 else 0.05
    mem_root, pids_root, mem_file = roots()
    found = {}  # name -> {"mem": bytes, "tasks": n, "progs": set, "ours": bool}
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    while not stop and os.path.exists(f"/proc/{top}"):
        for d in glob.glob(os.path.join(mem_root, "l-*")):
            name = os.path.basename(d)
            e = found.setdefault(name, {"mem": 0, "tasks": 0, "progs": set(), "ours": None})
            procs = (read(os.path.join(d, "cgroup.procs")) or "").split()
            if e["ours"] is None and procs:
                e["ours"] = top in ancestors(int(procs[0]))
            for p in procs:
                c = cmdline(p)
                if c:
                    e["progs"].add(c)
            m = read(os.path.join(d, mem_file))
            t = read(os.path.join(pids_root, name, "pids.peak"))
            if m and m.isdigit():
                e["mem"] = max(e["mem"], int(m))
            if t and t.isdigit():
                e["tasks"] = max(e["tasks"], int(t))
        time.sleep(interval)
    for name, e in sorted(found.items(), key=lambda kv: -kv[1]["mem"]):
        if not e["ours"]:
            continue
        progs = "; ".join(sorted(p for p in e["progs"] if "__mcpguard-" not in p)) or "-"
        print(f"{e['mem'] / 2**20:8.1f} MiB {e['tasks']:5d} tasks  {name}  {progs}")


if __name__ == "__main__":
    main()
