#!/usr/bin/env bash
# Long runs stay flat: one `retrace run` of a few thousand oracle tasks at
# --concurrency 8, sampled twice a second from /proc and the cgroup
# filesystem (read only): retrace's own RSS, open file descriptors and
# threads, its kernels' processes (its descendants and the members of its
# cgroups) and its kernel cgroups (`.../retrace/<harness pid>/<kernel id>`,
# counted once across hierarchies). After warm-up each must stay within
# the tolerance of its level at task 200, and kernels and cgroups must be
# gone when the run has ended.
#
#   benches/soak.sh [--tasks N] [--concurrency C] [--model M] [--rounds R]
#                   [--interval S] [--level-at T] [--tolerance PCT] [--no-build]
#
# The suite repeats the built-in math tasks (105) under distinct ids. The
# level at task T is the mean of the samples in a window of two passes
# over them (210 tasks) centred on T, compared with the largest mean of
# each later such window while tasks are still running: the counts swing
# with the kernels in flight and the task in hand, and one sample against
# the largest of hundreds would measure that swing rather than growth
# (hence many samples: a window's mean of the descriptors then moves by
# about 3 %). A row is printed every 5 s. RETRACE_BENCH_OUT keeps the
# run directory, retrace's output and every sample as samples.csv. The
# default model, oracle:faults, fails every task at round 0 and repairs it
# at round 1: two kernel executions per task.
# Needs root (confined kernels) and takes 4-10 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
tasks=2000
concurrency=8
model=oracle:faults
rounds=1
interval=0.5
level_at=200
tolerance=10
build=1
usage="usage: $0 [--tasks N] [--concurrency C] [--model M] [--rounds R] [--interval S] [--level-at T] [--tolerance PCT] [--no-build]"
while [ $# -gt 0 ]; do
    case "$1" in
    --tasks) tasks="$2"; shift 2 ;;
    --concurrency) concurrency="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --interval) interval="$2"; shift 2 ;;
    --level-at) level_at="$2"; shift 2 ;;
    --tolerance) tolerance="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "$usage" >&2; exit 2 ;;
    esac
done
if [ "$build" = 1 ]; then
    cargo build --release --quiet
fi
bin="${CARGO_TARGET_DIR:-$PWD/target}/release/retrace"
if [ -n "${RETRACE_BENCH_OUT:-}" ]; then
    out="$RETRACE_BENCH_OUT"
    mkdir -p "$out"
    rm -rf "$out/run"
else
    out=$(mktemp -d)
    trap 'rm -rf "$out"' EXIT
fi

# The suite: the math tasks again and again, each copy under its own id.
python3 - datasets/math/tasks.jsonl "$tasks" >"$out/suite.jsonl" <<'EOF'
import json, sys
src, n = sys.argv[1], int(sys.argv[2])
base = [json.loads(l) for l in open(src) if l.strip() and not l.lstrip().startswith(("//", "#"))]
for i in range(n):
    task = dict(base[i % len(base)])
    task["id"] = f"{task['id']}-soak{i // len(base):03d}"
    print(json.dumps(task))
EOF

suite_len=$(grep -cv '^\s*\(//\|#\|$\)' datasets/math/tasks.jsonl)
python3 - "$bin" "$out" "$tasks" "$interval" "$level_at" "$tolerance" "$((2 * suite_len))" "${RETRACE_BENCH_OUT:+1}" \
    run --suite "$out/suite.jsonl" --model "$model" --rounds "$rounds" \
    --concurrency "$concurrency" --out "$out/run" <<'EOF'
import csv, json, os, subprocess, sys, time

binary, out, total, interval, level_at, tolerance, window, keep = sys.argv[1:9]
total, interval, level_at = int(total), float(interval), int(level_at)
tolerance, WINDOW = float(tolerance), int(window)  # WINDOW: tasks whose samples make one level


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def status(pid, key):
    text = read(f"/proc/{pid}/status") or ""
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return None


def start_time(pid):
    # Field 22 of stat, after the parenthesised name (which may hold spaces).
    text = read(f"/proc/{pid}/stat")
    return text.rsplit(")", 1)[1].split()[19] if text else None


def descendants(root):
    children = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        text = read(f"/proc/{name}/stat")
        if text:
            ppid = int(text.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(name))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def cgroup_mounts():
    mounts = []
    for line in (read("/proc/self/mountinfo") or "").splitlines():
        fields, _, rest = line.partition(" - ")
        if rest.split()[0] in ("cgroup", "cgroup2"):
            mounts.append(fields.split()[4])
    return mounts


def harness_dirs(pid):
    """`<...>/retrace*/<pid>` in every cgroup hierarchy: retrace's own."""
    found = []
    for mount in cgroup_mounts():
        for root, dirs, _ in os.walk(mount):
            if os.path.basename(root).startswith("retrace") and str(pid) in dirs:
                found.append(os.path.join(root, str(pid)))
            if root.count(os.sep) - mount.count(os.sep) >= 6 or os.path.basename(root).startswith("retrace"):
                dirs[:] = []  # other harnesses' groups are not ours to read
    return found


def cgroups(pid):
    """Kernel groups (distinct paths below `<pid>`, across hierarchies), the
    harness directories, and the processes in any of them."""
    groups, members, tops = set(), set(), harness_dirs(pid)
    for top in tops:
        for root, _, _ in os.walk(top):
            rel = os.path.relpath(root, top)
            if rel != ".":
                groups.add(rel)
            for line in (read(os.path.join(root, "cgroup.procs")) or "").split():
                members.add(int(line))
    return groups, tops, members


class Journal:
    """Tasks finished so far: records with a `stop`, read as they are appended."""

    def __init__(self, path):
        self.path, self.offset, self.done, self.rest = path, 0, 0, b""

    def count(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:
            return self.done
        self.offset += len(chunk)
        *lines, self.rest = (self.rest + chunk).split(b"\n")
        self.done += sum(1 for l in lines if l.strip() and json.loads(l).get("stop") is not None)
        return self.done


log = open(os.path.join(out, "retrace.log"), "w")
run = subprocess.Popen([binary] + sys.argv[9:], stdout=log, stderr=subprocess.STDOUT)
journal = Journal(os.path.join(out, "run", "results.jsonl"))
seen = {}  # kernel process pid -> start time, to check at the end
samples = []
printed = -5.0
began = time.monotonic()
COLUMNS = ("elapsed_s", "tasks", "rss_mib", "fds", "threads", "kernel_procs", "cgroups")
print("%9s %6s %8s %5s %7s %12s %7s" % COLUMNS, flush=True)
while run.poll() is None:
    try:
        fds = len(os.listdir(f"/proc/{run.pid}/fd"))
    except OSError:
        break
    rss, threads = status(run.pid, "VmRSS"), status(run.pid, "Threads")
    groups, _, members = cgroups(run.pid)
    procs = (descendants(run.pid) | members) - {run.pid}
    for p in procs:
        seen.setdefault(p, start_time(p))
    if rss is None or threads is None:
        break
    row = (round(time.monotonic() - began, 1), journal.count(), round(rss / 1024, 1), fds, threads, len(procs), len(groups))
    samples.append(row)
    if row[0] >= printed + 5:
        printed = row[0]
        print("%9.1f %6d %8.1f %5d %7d %12d %7d" % row, flush=True)
    time.sleep(interval)
code = run.wait()
elapsed = time.monotonic() - began

# What outlived the run: kernel processes seen during it, its cgroups.
left_procs = [p for p, t in seen.items() if t is not None and start_time(p) == t]
groups, tops, members = cgroups(run.pid)
left_procs = sorted(set(left_procs) | members)
done = journal.count()
print(f"\nretrace exited {code} after {elapsed:.0f} s, {done} of {total} tasks finished "
      f"({done / elapsed:.2f} tasks/s); {len(seen)} kernel processes seen")
if keep:
    with open(os.path.join(out, "samples.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        w.writerows(samples)

ok = code == 0 and done == total
if not ok:
    print(f"the run itself failed: exit {code}, {done} of {total} tasks (see retrace.log)")
def mean(values):
    return round(sum(values) / len(values), 1)


# Windows of WINDOW tasks: the first centred on level_at, then one after
# the other while tasks are still running; a window needs a few samples.
windows = {}
for s in samples:
    if level_at - WINDOW // 2 <= s[1] < total:
        windows.setdefault((s[1] - (level_at - WINDOW // 2)) // WINDOW, []).append(s)
windows = [windows[k] for k in sorted(windows) if len(windows[k]) >= 3]
for i, name in ((2, "rss"), (3, "fds"), (4, "threads"), (5, "kernel procs"), (6, "cgroups")):
    if len(windows) < 2 or windows[0][0][1] >= level_at + WINDOW // 2:
        print(f"{name}: too few samples around and after {level_at} tasks — within {tolerance:g} %: no")
        ok = False
        continue
    level = mean([s[i] for s in windows[0]])
    peak = max(mean([s[i] for s in w]) for w in windows[1:])
    growth = 100.0 * (peak - level) / level if level else (0.0 if peak == 0 else float("inf"))
    within = growth <= tolerance
    ok &= within
    print(f"{name}: level at {level_at} tasks {level:g}, max after {peak:g}, {growth:+.1f} % "
          f"— within {tolerance:g} %: {'yes' if within else 'no'}")
for name, left in (("kernel procs", left_procs), ("cgroups", sorted(groups) + tops)):
    print(f"{name} after the run: {len(left)} — zero: {'yes' if not left else 'no'}"
          + (f" ({', '.join(map(str, left[:5]))})" if left else ""))
    ok &= not left
sys.exit(0 if ok else 1)
EOF
