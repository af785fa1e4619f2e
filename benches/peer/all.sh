#!/usr/bin/env bash
# Every performance figure of issue 14 in one run, each next to its peer,
# ending with one line per figure: `name: value (ratio vs <peer> = x.xx; goal ...)`.
#
#   benches/peer/all.sh [--quick] [--rounds N] [--starts N] [--json FILE] [--keep DIR]
#
# --quick       a short smoke run (1 round, few samples, part of the corpus and
#               of the math suite): proves the script works, not the figures
# --rounds N    interleaved rounds (default 3; --quick 1). Within a round the
#               contenders of a figure run back to back, in alternating order
#               from one round to the next (as compare.sh does), so drift on a
#               shared machine hits them alike
# --starts N    fresh-kernel starts per contender and round (default 4; --quick 2)
# --json FILE   also write every figure (values, ratios, goals, samples) there
# --keep DIR    keep the raw outputs (sandbox check JSON, run dirs) in DIR
#
# Figures (all on this machine, as root for the confined ones):
#  1. per-cell round trip and overhead vs jupyter_client: benches/peer/compare.sh
#  2. fresh fat kernel running `import numpy, pandas, matplotlib; print(1)`:
#     whole `retrace exec` process, confined, cold (and zygote when this build
#     has `retrace exec --kernel-start`), against jupyter_client's
#     start_new_kernel on the same image, unconfined (jupyter_client_start.py)
#  3. the same `retrace exec`, confined vs --unsafe-no-sandbox
#  4. pool acquire: the criterion bench kernel/pool_acquire_warm (median)
#  5. kill latency over the corpus's killed cases (`retrace sandbox check`),
#     quiet and beside two CPU-bound processes
#  6. memory of one idle fat kernel with the stack imported, from the host
#     (kernel_memory.py): smaps_rollup of its processes and its cgroup
#  7. oracle throughput: `retrace run --model oracle --suite math --rounds 2`
#     at concurrency 1, 2 and 4, tasks per minute of wall time
#
# The last lines repeat every figure as `key=value`. No figure is asserted:
# nothing fails because a goal is missed. Uses $RETRACE_HOME as is (images
# are shared with other runs); builds target/release/retrace first.
set -euo pipefail

quick=0
rounds=
starts=
json_out=
keep=
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1; shift ;;
        --rounds) rounds="$2"; shift 2 ;;
        --starts) starts="$2"; shift 2 ;;
        --json) json_out="$2"; shift 2 ;;
        --keep) keep="$2"; shift 2 ;;
        -h|--help) sed -n '2,34p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
if [ "$quick" -eq 1 ]; then
    rounds="${rounds:-1}"
    starts="${starts:-2}"
    rt_args=(--rounds 2 --n 100 --warmup 10)
    kill_filters=(memory processes)
    oracle_limit=(--limit-tasks 12)
else
    rounds="${rounds:-3}"
    starts="${starts:-4}"
    rt_args=(--rounds 4 --n 500 --warmup 50)
    kill_filters=(cpu_time memory processes signals jupyter_protocol)
    oracle_limit=()
fi
case "$rounds$starts" in *[!0-9]*|'') echo "--rounds and --starts take numbers" >&2; exit 2 ;; esac

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"
# shellcheck source=benches/peer/lib.sh
. "$here/lib.sh"

work="$(mktemp -d "${TMPDIR:-/tmp}/retrace-all.XXXXXX")"
burners=()
cleanup() {
    for pid in "${burners[@]}"; do kill "$pid" 2>/dev/null || true; done
    if [ -n "$keep" ]; then
        mkdir -p "$keep" && cp -r "$work"/. "$keep"/
    fi
    rm -rf "$work"
}
trap cleanup EXIT

samples="$work/samples.txt" # lines: figure contender value
: >"$samples"
log() { echo "== $*" >&2; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

log "building the release binary"
cargo build --quiet --release
target="${CARGO_TARGET_DIR:-$repo/target}"
retrace="$target/release/retrace"
[ -x "$retrace" ] || { echo "no binary at $retrace" >&2; exit 1; }

"$retrace" image build fat >&2
"$retrace" image list --json >"$work/images.json"
fat_dir="$(python3 -c 'import json,sys; print(next(i["path"] for i in json.load(open(sys.argv[1])) if i["name"] == "fat"))' "$work/images.json")"
fat_python="$fat_dir/venv/bin/python"
[ -x "$fat_python" ] || { echo "no python in the fat image: $fat_python" >&2; exit 1; }

log "installing jupyter_client into a throwaway venv"
venv_python="$(peer_venv "$work" "$fat_python")"

# (Read whole: grep -q would close the pipe early, and pipefail fail it.)
exec_help="$("$retrace" exec --help)"
if grep -q -- '--kernel-start' <<<"$exec_help"; then
    zygote=1
else
    zygote=0
fi
load_start="$(loadavg)"
load_samples="$work/load.txt"
: >"$load_samples"
sample_load() { cut -d' ' -f1 /proc/loadavg >>"$load_samples" 2>/dev/null || true; }

# --- figure 1: compare.sh does its own interleaving ------------------------
log "figure 1: round trip vs jupyter_client (compare.sh ${rt_args[*]})"
sample_load
"$here/compare.sh" "${rt_args[@]}" --json "$work/roundtrip.json" >"$work/compare.txt"
sample_load

# --- figures 2, 3: fresh kernels ---------------------------------------------
cell='import numpy, pandas, matplotlib; print(1)'
exec_once() { # contender, retrace exec flags...
    local name="$1" t0 t1
    shift
    t0="$(now_ms)"
    # Exit 0 only when the cell ended ok.
    if ! printf '%s\n' "$cell" | "$retrace" exec --image fat "$@" - >"$work/exec.out" 2>&1; then
        echo "retrace exec $* failed:" >&2
        cat "$work/exec.out" >&2
        exit 1
    fi
    t1="$(now_ms)"
    echo "start $name $((t1 - t0))" >>"$samples"
}
jc_once() {
    local out
    out="$("$venv_python" "$here/jupyter_client_start.py" --kernel-python "$fat_python" \
        --kernel-config "$fat_dir/kernel_config.py" --mpl-cache "$fat_dir/mplconfig")"
    python3 -c 'import json,sys; print("start jupyter_client", json.loads(sys.argv[1])["total_ms"])' "$out" >>"$samples"
}
contenders=(cold unconfined jupyter_client)
[ "$zygote" -eq 1 ] && contenders=(zygote "${contenders[@]}")
one_start() {
    case "$1" in
        cold) if [ "$zygote" -eq 1 ]; then exec_once cold --kernel-start cold; else exec_once cold; fi ;;
        zygote) exec_once zygote --kernel-start zygote ;;
        unconfined)
            if [ "$zygote" -eq 1 ]; then
                exec_once unconfined --unsafe-no-sandbox --kernel-start cold
            else
                exec_once unconfined --unsafe-no-sandbox
            fi
            ;;
        jupyter_client) jc_once ;;
    esac
}
# One untimed start of each first: page cache and compiled bytecode warm for all.
for c in "${contenders[@]}"; do one_start "$c"; done
: >"$samples"

order() { # round, items...: the items, reversed on even rounds
    local round="$1"
    shift
    if [ $((round % 2)) -eq 1 ]; then
        printf '%s\n' "$@"
    else
        printf '%s\n' "$@" | tac
    fi
}

# --- the rounds ---------------------------------------------------------------
kill_check() { # condition (quiet|load), round
    local cond="$1" round="$2" f rc
    for f in "${kill_filters[@]}"; do
        rc=0
        "$retrace" sandbox check --filter "$f" --json "$work/kill-$cond-$round-$f.json" \
            >"$work/kill-$cond-$round-$f.txt" 2>&1 || rc=$?
        # 1: some case failed its expectations (reported below); the kill
        # latencies of the others still count. Anything else: broken.
        if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
            echo "sandbox check --filter $f exited $rc:" >&2
            tail -20 "$work/kill-$cond-$round-$f.txt" >&2
            exit 1
        fi
    done
}
with_load() { # command...: runs it beside two CPU-bound processes
    sh -c 'while :; do :; done' &
    burners+=($!)
    sh -c 'while :; do :; done' &
    burners+=($!)
    "$@"
    for pid in "${burners[@]}"; do kill "$pid" 2>/dev/null || true; done
    burners=()
}
memory_once() { # contender
    local flags=()
    case "$1" in
        cold) [ "$zygote" -eq 1 ] && flags=(-- --kernel-start cold) ;;
        zygote) flags=(-- --kernel-start zygote) ;;
    esac
    python3 "$here/kernel_memory.py" --retrace "$retrace" --sleep 6 "${flags[@]}" \
        >"$work/memory-$1-$2.json" || {
        echo "kernel_memory.py ($1) found no kernel:" >&2
        cat "$work/memory-$1-$2.json" >&2
        exit 1
    }
}
oracle_once() { # concurrency, round
    local c="$1" round="$2" out="$work/oracle-c$1-r$2" t0 t1
    t0="$(now_ms)"
    "$retrace" run --model oracle --suite math --rounds 2 --concurrency "$c" "${oracle_limit[@]}" \
        --out "$out" >"$out.log" 2>&1 || {
        echo "retrace run --concurrency $c failed:" >&2
        tail -20 "$out.log" >&2
        exit 1
    }
    t1="$(now_ms)"
    python3 -c 'import json,sys; print("oracle", sys.argv[2], len(json.load(open(sys.argv[1]))["task_ids"]) / ((int(sys.argv[3]) / 60000.0)))' \
        "$out/run.json" "$c" "$((t1 - t0))" >>"$samples"
}
memory_kinds=(cold)
[ "$zygote" -eq 1 ] && memory_kinds=(zygote cold)

for round in $(seq 1 "$rounds"); do
    log "round $round/$rounds: fresh kernels ($starts starts each)"
    sample_load
    for s in $(seq 1 "$starts"); do
        for c in $(order $((round + s)) "${contenders[@]}"); do one_start "$c"; done
    done
    log "round $round/$rounds: kill latency quiet and under load"
    sample_load
    for cond in $(order "$round" quiet load); do
        case "$cond" in
            quiet) kill_check quiet "$round" ;;
            load) with_load kill_check load "$round" ;;
        esac
    done
    log "round $round/$rounds: memory per kernel"
    sample_load
    for m in $(order "$round" "${memory_kinds[@]}"); do memory_once "$m" "$round"; done
    log "round $round/$rounds: oracle throughput"
    sample_load
    for c in $(order "$round" 1 2 4); do oracle_once "$c" "$round"; done
    sample_load
done

# --- figure 4: criterion, once, outside the rounds ---------------------------
log "figure 4: cargo bench --bench kernel -- kernel/pool_acquire_warm\$"
sample_load
cargo bench --quiet --bench kernel -- 'kernel/pool_acquire_warm$' >"$work/pool.txt" 2>&1 || {
    tail -20 "$work/pool.txt" >&2
    exit 1
}
cp "$target/criterion/kernel/pool_acquire_warm/new/estimates.json" "$work/pool.json"
sample_load
load_end="$(loadavg)"

python3 - "$work" "$zygote" "$load_start" "$load_end" "$rounds" "$starts" "$quick" "$json_out" \
    "$("$fat_python" --version 2>&1)" <<'EOF'
import glob
import json
import math
import os
import platform
import sys

work, zygote, load_start, load_end, rounds, starts, quick, json_out, py = sys.argv[1:10]
zygote = zygote == "1"


def pct(values, p):
    s = sorted(values)
    if not s:
        return math.nan
    rank = math.ceil(p / 100.0 * len(s))
    return s[min(max(rank, 1), len(s)) - 1]


samples = {}
for line in open(os.path.join(work, "samples.txt")):
    fig, who, value = line.split()
    samples.setdefault((fig, who), []).append(float(value))

figures = []  # dicts: key, name, value text, ratio text, goal text, met, numbers


def figure(key, name, value, versus, goal, met, **numbers):
    figures.append(dict(key=key, name=name, value=value, versus=versus, goal=goal, met=met, **numbers))


def verdict(met):
    return {True: "met", False: "not met", None: "no goal"}[met]


# 1. round trip
rt = json.load(open(os.path.join(work, "roundtrip.json")))
r, p = rt["clients"]["retrace"], rt["clients"][rt["peer"]]
figure("roundtrip", "per-cell round trip (pass, p50)", f"{r['rt50']:.2f} ms",
       f"ratio vs jupyter_client {rt['peer']} {p['rt50']:.2f} ms = {rt['roundtrip_ratio']:.2f}",
       "<= 0.85", rt["roundtrip_ratio"] <= 0.85,
       retrace_ms=r["rt50"], peer_ms=p["rt50"], ratio=rt["roundtrip_ratio"])
figure("overhead", "per-cell overhead (round trip - kernel span, p50)", f"{r['ovh50']:.2f} ms",
       f"ratio vs jupyter_client {rt['peer']} {p['ovh50']:.2f} ms = {rt['overhead_ratio']:.2f}",
       "<= 0.5", rt["overhead_ratio"] <= 0.5,
       retrace_ms=r["ovh50"], peer_ms=p["ovh50"], ratio=rt["overhead_ratio"])

# 2, 3. fresh kernels
jc = samples[("start", "jupyter_client")]
jc50, jc95 = pct(jc, 50), pct(jc, 95)
for who in (["zygote"] if zygote else []) + ["cold"]:
    s = samples[("start", who)]
    p50, p95 = pct(s, 50), pct(s, 95)
    figure(f"fresh_{who}", f"fresh kernel, {who} (fat, imports, whole retrace exec, p50/p95)",
           f"{p50:.0f}/{p95:.0f} ms",
           f"ratio vs jupyter_client start_new_kernel {jc50:.0f}/{jc95:.0f} ms = {p50 / jc50:.2f}",
           "<= 100 ms p50" if who == "zygote" else "none for cold (zygote: <= 100 ms p50)",
           p50 <= 100 if who == "zygote" else None,
           p50_ms=p50, p95_ms=p95, peer_p50_ms=jc50, peer_p95_ms=jc95, ratio=p50 / jc50, n=len(s))
if not zygote:
    figure("fresh_zygote", "fresh kernel, zygote", "n/a (no zygote in this build)", "n/a",
           "<= 100 ms p50", None)
u = samples[("start", "unconfined")]
c = samples[("start", "cold")]
ratio = pct(c, 50) / pct(u, 50)
figure("confined_start", "confined vs unconfined start (retrace exec, cold, p50)",
       f"{pct(c, 50):.0f} ms",
       f"ratio vs --unsafe-no-sandbox {pct(u, 50):.0f} ms = {ratio:.2f}",
       "<= 1.20", ratio <= 1.20, confined_ms=pct(c, 50), unconfined_ms=pct(u, 50), ratio=ratio)

# 4. pool acquire
est = json.load(open(os.path.join(work, "pool.json")))
med_us = est["median"]["point_estimate"] / 1000.0
figure("pool_acquire", "pool acquire (criterion kernel/pool_acquire_warm, median)", f"{med_us:.1f} us",
       f"ratio vs a cold fresh kernel {pct(c, 50):.0f} ms = {med_us / 1000.0 / pct(c, 50):.5f}",
       "none in issue 14", None, median_us=med_us)

# 5. kill latency
def kills(cond):
    """Kill latencies of one condition; a case matched by two filters of the
    same round counts once."""
    by_case, failed = {}, []
    for path in glob.glob(os.path.join(work, f"kill-{cond}-*.json")):
        round_ = os.path.basename(path).split("-")[2]
        for res in json.load(open(path))["results"]:
            if res.get("kill_ms") is not None:
                by_case[(round_, res["id"])] = res["kill_ms"]
            if not res["pass"]:
                failed.append(res["id"])
    return list(by_case.values()), failed


quiet, quiet_failed = kills("quiet")
load, load_failed = kills("load")
q99, l99 = pct(quiet, 99), pct(load, 99)
figure("kill_quiet", "kill latency, quiet (p50/p99)", f"{pct(quiet, 50):.0f}/{q99:.0f} ms",
       f"{len(quiet)} kills", "p99 <= 100 ms", q99 <= 100,
       p50_ms=pct(quiet, 50), p99_ms=q99, n=len(quiet), failed=sorted(set(quiet_failed)))
figure("kill_load", "kill latency, 2 CPU burners beside (p50/p99)", f"{pct(load, 50):.0f}/{l99:.0f} ms",
       f"ratio vs quiet p99 = {l99 / q99:.2f}; {len(load)} kills", "p99 <= 100 ms", l99 <= 100,
       p50_ms=pct(load, 50), p99_ms=l99, n=len(load), ratio=l99 / q99, failed=sorted(set(load_failed)))

# 6. memory
mem = {}
for who in ("cold", "zygote"):
    runs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(work, f"memory-{who}-*.json")))]
    if runs:
        mem[who] = {k: pct([r[k] for r in runs], 50) / 1024.0 for k in ("private_kb", "pss_kb", "rss_kb")}
        mem[who]["cgroup_mb"] = pct([r["cgroup_usage"]["usage_kb"] for r in runs], 50) / 1024.0
        mem[who]["cgroup_anon_mb"] = pct([r["cgroup_usage"]["anon_kb"] for r in runs], 50) / 1024.0
        mem[who]["processes"] = len(runs[0]["processes"])
for who in ("zygote", "cold"):
    if who not in mem:
        figure(f"memory_{who}", f"memory per kernel, {who}", "n/a (no zygote in this build)", "n/a",
               "<= 30 MB private", None)
        continue
    m = mem[who]
    ratio = (f"ratio vs cold = {m['private_kb'] / mem['cold']['private_kb']:.2f}" if who == "zygote"
             else f"ratio vs goal 30 MB = {m['private_kb'] / 30:.2f}")
    figure(f"memory_{who}", f"memory per kernel, {who} (private; Pss, Rss, cgroup)",
           f"{m['private_kb']:.1f} MB (Pss {m['pss_kb']:.1f}, Rss {m['rss_kb']:.1f}, cgroup {m['cgroup_mb']:.1f} MB"
           f" of which anon {m['cgroup_anon_mb']:.1f}; {m['processes']} processes)",
           ratio, "<= 30 MB private", m["private_kb"] <= 30,
           private_mb=m["private_kb"], pss_mb=m["pss_kb"], rss_mb=m["rss_kb"], cgroup_mb=m["cgroup_mb"],
           cgroup_anon_mb=m["cgroup_anon_mb"])

# 7. oracle
BASELINE = 95 / 32 * 60  # benches/README.md: 95 math tasks x 2 rounds in ~32 s at concurrency 2
o1 = pct(samples[("oracle", "1")], 50)
for conc in ("1", "2", "4"):
    v = pct(samples[("oracle", conc)], 50)
    figure(f"oracle_c{conc}", f"oracle tasks/min, concurrency {conc} (median)", f"{v:.0f}",
           f"ratio vs concurrency 1 = {v / o1:.2f}; vs baseline {BASELINE:.0f}/min at concurrency 2 = {v / BASELINE:.2f}",
           ">= 3x baseline at the same concurrency" if conc == "2" else ">= 3x baseline (baseline only known at concurrency 2)",
           (v / BASELINE >= 3) if conc == "2" else None,
           tasks_per_min=v, ratio_c1=v / o1, ratio_baseline=v / BASELINE)

loads = [float(x) for x in open(os.path.join(work, "load.txt")).read().split()]
print()
print(f"machine: {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, kernels' {py}; shared machine:"
      f" load average (1 min) during the run {min(loads):.1f} to {max(loads):.1f}"
      f" (1/5/15 at start {load_start}, at end {load_end})")
print(f"rounds {rounds}, {starts} fresh starts per contender and round{'; QUICK (smoke run)' if quick == '1' else ''};"
      f" zygote: {'yes' if zygote else 'no'}")
print()
for f in figures:
    if f["value"].startswith("n/a"):
        print(f"{f['name']}: {f['value']} (goal {f['goal']}: not measured)")
    else:
        print(f"{f['name']}: {f['value']} ({f['versus']}; goal {f['goal']}: {verdict(f['met'])})")
print()
for f in figures:
    for k, v in f.items():
        if k in ("key", "name", "value", "versus", "goal"):
            continue
        if k == "met":
            v = verdict(v).replace(" ", "_")
        elif isinstance(v, float):
            v = f"{v:.4g}"
        elif isinstance(v, list):
            v = ",".join(v) or "-"
        print(f"{f['key']}.{k}={v}")
if json_out:
    with open(json_out, "w") as out:
        json.dump({"machine": {"cpus": os.cpu_count(), "kernel": platform.release(), "python": py,
                               "load_min": min(loads), "load_max": max(loads)},
                   "rounds": int(rounds), "starts": int(starts), "quick": quick == "1", "zygote": zygote,
                   "figures": figures,
                   "samples": {f"{a}/{b}": v for (a, b), v in samples.items()}}, out, indent=1)
EOF
