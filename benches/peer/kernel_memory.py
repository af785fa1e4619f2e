"""Memory of one fresh fat kernel with the scientific stack imported, read
from the host while it idles (benches/peer/all.sh, figure "memory per
kernel").

Runs `retrace exec --image fat [EXTRA...] -` with a cell that imports numpy,
pandas and matplotlib and then sleeps. The in-kernel pid is of no use (the
kernel has its own PID namespace), so the kernel is found from the host: the
processes descending from the `retrace exec` process that live in another
PID namespace than it are the kernel's (its init and the kernel; an image
zygote, also a descendant, stays in the host's namespaces), and their memory
cgroup holds every process of the kernel. Once the kernel has mapped pandas and its
CPU time stopped moving (the import is over, the cell sleeps), it reads:

- for every process of the kernel's cgroup, /proc/<pid>/smaps_rollup:
  Rss, Pss, Private_Clean + Private_Dirty (unique), Pss_Anon;
- the cgroup's own memory usage (v1 memory.usage_in_bytes and memory.stat's
  rss/cache; v2 memory.current and memory.stat's anon/file).

Prints one JSON object (kB, summed over the kernel's processes, and per
process); exits 1 when the kernel was not found.
"""

import argparse
import json
import os
import subprocess
import sys
import time

CODE = "import numpy, pandas, matplotlib\n# %%\nimport time\ntime.sleep({sleep})\nprint(1)\n"


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def memory_cgroup(pid):
    """The process's memory cgroup: (hierarchy, path) with hierarchy "v1" or
    "v2"; v1's memory controller wins on hybrid hosts (it does the charging)."""
    text = read(f"/proc/{pid}/cgroup")
    if text is None:
        return None
    v2 = None
    for line in text.splitlines():
        hid, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return ("v1", path)
        if hid == "0":
            v2 = ("v2", path)
    return v2


def cgroup_dir(group):
    """Where the group is on this host's cgroup mounts."""
    kind, path = group
    for line in read("/proc/self/mountinfo").splitlines():
        left, right = line.split(" - ", 1)
        fields, rfields = left.split(), right.split()
        root, mount, fstype = fields[3], fields[4], rfields[0]
        if kind == "v1" and fstype == "cgroup" and "memory" in rfields[2].split(","):
            pass
        elif kind == "v2" and fstype == "cgroup2":
            pass
        else:
            continue
        rel = path
        if root != "/" and (rel == root or rel.startswith(root + "/")):
            rel = rel[len(root):]
        candidate = mount + rel
        if os.path.isdir(candidate):
            return candidate
    return None


def pid_ns(pid):
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def processes():
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        stat = read(f"/proc/{name}/stat")
        if stat is None:
            continue
        rest = stat[stat.rindex(")") + 2 :].split()
        table[int(name)] = {"ppid": int(rest[1]), "cpu": int(rest[11]) + int(rest[12])}
    return table


def descendants(table, root):
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        for pid, info in table.items():
            if info["ppid"] == p:
                out.append(pid)
                todo.append(pid)
    return out


def rollup(pid):
    text = read(f"/proc/{pid}/smaps_rollup")
    if text is None:
        return None
    kb = {}
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 2 and parts[0].endswith(":"):
            kb[parts[0][:-1]] = int(parts[1])
    cmd = (read(f"/proc/{pid}/cmdline") or "").replace("\0", " ").strip()
    return {
        "pid": pid,
        "cmdline": cmd[:120],
        "rss_kb": kb.get("Rss", 0),
        "pss_kb": kb.get("Pss", 0),
        "pss_anon_kb": kb.get("Pss_Anon", 0),
        "private_kb": kb.get("Private_Clean", 0) + kb.get("Private_Dirty", 0),
        "shared_kb": kb.get("Shared_Clean", 0) + kb.get("Shared_Dirty", 0),
    }


def cgroup_usage(kind, directory):
    def stat():
        out = {}
        for line in (read(os.path.join(directory, "memory.stat")) or "").splitlines():
            k, _, v = line.partition(" ")
            if v.strip().isdigit():
                out[k] = int(v)
        return out

    s = stat()
    if kind == "v1":
        usage = read(os.path.join(directory, "memory.usage_in_bytes"))
        return {
            "usage_kb": int(usage) // 1024 if usage else None,
            "anon_kb": s.get("rss", 0) // 1024,
            "file_kb": s.get("cache", 0) // 1024,
        }
    usage = read(os.path.join(directory, "memory.current"))
    return {
        "usage_kb": int(usage) // 1024 if usage else None,
        "anon_kb": s.get("anon", 0) // 1024,
        "file_kb": s.get("file", 0) // 1024,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--retrace", required=True, help="the retrace binary")
    ap.add_argument("--sleep", type=float, default=8.0, help="seconds the cell idles")
    ap.add_argument("--find-timeout", type=float, default=30.0)
    ap.add_argument("extra", nargs="*", help="more `retrace exec` flags (after --)")
    args = ap.parse_args()

    cmd = [args.retrace, "exec", "--image", "fat", "--timeout", f"{args.sleep + 20:.0f}s", *args.extra, "-"]
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    proc.stdin.write(CODE.format(sleep=args.sleep))
    proc.stdin.close()
    own_ns = pid_ns(proc.pid)
    result = {"command": " ".join(cmd[1:]), "found": False}
    deadline = time.monotonic() + args.find_timeout
    history = []  # (time, CPU ticks of the kernel's processes) since pandas was mapped
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
            table = processes()
            kernel = [p for p in descendants(table, proc.pid) if pid_ns(p) not in (None, own_ns)]
            if not kernel:
                continue
            group = memory_cgroup(kernel[0])
            directory = cgroup_dir(group)
            if directory is None:
                continue
            procs = [int(x) for x in (read(os.path.join(directory, "cgroup.procs")) or "").split()]
            # The scientific stack is in when some process of the kernel maps pandas.
            if not any("pandas" in (read(f"/proc/{p}/maps") or "") for p in procs):
                continue
            # Idle: at most one clock tick of CPU over the last half second
            # (ipykernel's own threads wake now and then).
            cpu = sum(table.get(p, {}).get("cpu", 0) for p in procs)
            now = time.monotonic()
            history.append((now, cpu))
            past = [c for t, c in history if now - t >= 0.5]
            if not past or cpu - past[-1] > 1:
                continue
            per = [r for r in (rollup(p) for p in procs) if r]
            result.update(
                found=True,
                cgroup=group[1],
                cgroup_hierarchy=group[0],
                processes=per,
                rss_kb=sum(r["rss_kb"] for r in per),
                pss_kb=sum(r["pss_kb"] for r in per),
                private_kb=sum(r["private_kb"] for r in per),
                pss_anon_kb=sum(r["pss_anon_kb"] for r in per),
                cgroup_usage=cgroup_usage(group[0], directory),
            )
            break
    finally:
        try:
            _, err = proc.communicate(timeout=args.sleep + 30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    result["exec_exit"] = proc.returncode
    if not result["found"]:
        result["stderr"] = (err or "")[-2000:]
    print(json.dumps(result))
    return 0 if result["found"] else 1


if __name__ == "__main__":
    sys.exit(main())
