"""Memory of one fresh fat kernel with the scientific stack imported, read
from the host while it idles (benches/peer/all.sh, figure "memory per
kernel").

Runs `retrace exec --image fat [EXTRA...] -` with a cell that imports numpy,
pandas and matplotlib and then sleeps. The in-kernel pid is of no use (the
kernel has its own PID namespace), and the process tree differs between
start paths (a zygote kernel is forked by the image's zygote, re-parented to
the jail's PID 1, and its cmdline is the zygote's), so the kernel is found by
cgroup membership, the same for cold and zygote kernels: retrace puts each
kernel of a harness process in `<its subtree>/retrace/<harness pid>/<kernel
id>` (src/sandbox/cgroup/host.rs), the harness being the `retrace exec`
process itself. The image's zygote has a sibling group there too; the
kernel's group is told apart by holding processes in another PID namespace
than `retrace exec`'s (the jail's PID 1 and the kernel; the zygote lives in
the host's namespaces). Once the kernel has mapped pandas and its CPU time
stopped moving (the import is over, the cell sleeps), it reads:

- for every process of the kernel's cgroup, /proc/<pid>/smaps_rollup:
  Rss, Pss, Private_Clean + Private_Dirty (unique), Pss_Anon;
- the cgroup's own memory usage (v1 memory.usage_in_bytes and memory.stat's
  rss/cache; v2 memory.current and memory.stat's anon/file).

Prints one JSON object (kB, summed over the kernel's processes, and per
process); exits 1 when the kernel was not found, with `error` saying what
was looked for and what was seen.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
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
    """Every process's parent and CPU ticks (user + system)."""
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


def harness_groups(table, harness):
    """The memory cgroups retrace made for the harness process `harness`
    (`.../retrace/<harness>/<id>`, the path on v2 may start below a
    delegated group), found through their members: {group: [pids]}."""
    tail = ("retrace", str(harness))
    groups = {}
    for pid in table:
        group = memory_cgroup(pid)
        if group is None:
            continue
        parts = group[1].rstrip("/").split("/")
        if len(parts) >= 3 and tuple(parts[-3:-1]) == tail:
            groups.setdefault(group, []).append(pid)
    return groups


def find_kernel(table, harness, harness_ns):
    """(group, its directory, its processes) of the one kernel of `harness`,
    or (None, None, description of what was seen)."""
    seen = []
    kernels = []
    for group, members in sorted(harness_groups(table, harness).items()):
        directory = cgroup_dir(group)
        if directory is None:
            seen.append(f"{group[1]} (not under a mounted hierarchy)")
            continue
        procs = [int(x) for x in (read(os.path.join(directory, "cgroup.procs")) or "").split()] or members
        jailed = [p for p in procs if pid_ns(p) not in (None, harness_ns)]
        seen.append(f"{group[1]} ({len(procs)} processes, {len(jailed)} in another PID namespace)")
        if jailed:
            kernels.append((group, directory, procs))
    if len(kernels) == 1:
        return kernels[0]
    return None, None, "; ".join(seen) or "none"


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
    stderr = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=stderr, text=True)
    proc.stdin.write(CODE.format(sleep=args.sleep))
    proc.stdin.close()
    own_ns = pid_ns(proc.pid)
    result = {"command": " ".join(cmd[1:]), "found": False}
    deadline = time.monotonic() + args.find_timeout
    history = []  # (time, CPU ticks of the kernel's processes) since pandas was mapped
    seen = "none"
    waiting_for = "the kernel's cgroup"
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
            table = processes()
            group, directory, procs = find_kernel(table, proc.pid, own_ns)
            if group is None:
                seen, waiting_for = procs, "the kernel's cgroup"
                continue
            # The scientific stack is in when some process of the kernel maps pandas.
            if not any("pandas" in (read(f"/proc/{p}/maps") or "") for p in procs):
                waiting_for = f"a process of {group[1]} to map pandas"
                continue
            # Idle: at most one clock tick of CPU over the last half second
            # (ipykernel's own threads wake now and then).
            waiting_for = f"the CPU time of {group[1]} to stand still"
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
        exited_first = proc.poll() is not None
        try:
            proc.wait(timeout=args.sleep + 30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if not result["found"]:
        why = (
            f"retrace exec exited {proc.returncode} first"
            if exited_first
            else f"gave up after {args.find_timeout:.0f} s"
        )
        result["error"] = (
            f"no idle kernel found ({why}): looked for the memory cgroup .../retrace/{proc.pid}/<kernel id>"
            f" of `retrace exec` (pid {proc.pid}) holding a process in another PID namespace than"
            f" {own_ns}, waiting for {waiting_for}; its groups seen last: {seen}"
        )
        stderr.seek(0)
        result["stderr"] = stderr.read()[-2000:]
    result["exec_exit"] = proc.returncode
    print(json.dumps(result))
    return 0 if result["found"] else 1


if __name__ == "__main__":
    sys.exit(main())
