#!/usr/bin/env bash
# Every performance figure of issue 14 in one run, each next to its peer,
# ending with one line per figure: `name: value (ratio vs <peer> = x.xx; goal ...)`.
#
#   benches/peer/all.sh [--quick] [--rounds N] [--starts N] [--only kill] [--json FILE] [--keep DIR]
#
# --quick       a short smoke run (1 round, few samples, part of the corpus and
#               of the math suite): proves the script works, not the figures
# --rounds N    interleaved rounds (default 3; --quick 1). Within a round the
#               contenders of a figure run back to back, in alternating order
#               from one round to the next (as compare.sh does), so drift on a
#               shared machine hits them alike
# --starts N    fresh-kernel starts per contender and round (default 4; --quick 2)
# --only kill   measure the kill figures (5) alone; the others print
#               `n/a (not asked: --only kill)` and the exit status is 1
# --json FILE   also write every figure (values, ratios, goals, samples) there
# --keep DIR    keep the raw outputs (sandbox check JSON, run dirs) in DIR
#
# Figures (all on this machine, as root for the confined ones):
#  1. per-cell round trip and overhead vs jupyter_client: benches/peer/compare.sh
#  2. fresh fat kernel running `import numpy, pandas, matplotlib; print(1)`:
#     whole `retrace exec` process, confined, cold (and zygote when this build
#     has `retrace exec --kernel-start`), against jupyter_client's
#     start_new_kernel steps on the same image, unconfined, over ipc:// as
#     retrace's kernels (jupyter_client_start.py)
#  3. the same `retrace exec`, confined vs --unsafe-no-sandbox
#  4. (was the warm pool's acquire; the pool is gone, the zygote superseded it)
#  5. kill latency over the corpus's killed cases (`retrace sandbox check`),
#     quiet and beside two CPU-bound processes, next to its physical floor:
#     the host's exit work for 63 forks of the fat image's python, SIGKILLed
#     without retrace (exit_floor.py)
#  6. memory of one idle fat kernel with the stack imported, from the host
#     (kernel_memory.py): smaps_rollup of its processes and its cgroup
#  7. oracle throughput: `retrace run --model oracle --suite math --rounds 2`
#     at concurrency 1, 2 and 4, tasks per minute of wall time
#  8. optional: kernels on a Jupyter Kernel Gateway against local kernels
#     (benches/peer/gateway.sh: kernel start and per-cell round trip)
#
# The last lines repeat every figure as `key=value`. No figure is asserted:
# nothing fails because a goal is missed. A figure that could not be
# measured (a command failed, or this build lacks the zygote) prints
# `n/a (<reason>)` and the others are still measured and printed; the exit
# status is 0 only when every figure and every ratio was measured, 1
# otherwise (after printing). The optional figures (8) do not count there. Uses $RETRACE_HOME as is (images are shared
# with other runs); builds target/release/retrace first.
set -euo pipefail

quick=0
only=
rounds=
starts=
json_out=
keep=
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1; shift ;;
        --rounds) rounds="$2"; shift 2 ;;
        --starts) starts="$2"; shift 2 ;;
        --only) only="$2"; shift 2 ;;
        --json) json_out="$2"; shift 2 ;;
        --keep) keep="$2"; shift 2 ;;
        -h|--help) sed -n '2,43p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
if [ "$quick" -eq 1 ]; then
    rounds="${rounds:-1}"
    starts="${starts:-2}"
    rt_args=(--rounds 2 --n 100 --warmup 10)
    gw_args=(--rounds 1 --starts 2 --cells 100)
    kill_filters=(memory processes)
    oracle_limit=(--limit-tasks 12)
else
    rounds="${rounds:-3}"
    starts="${starts:-4}"
    rt_args=(--rounds 4 --n 500 --warmup 50)
    gw_args=(--rounds "$rounds" --starts "$starts" --cells 500)
    kill_filters=(cpu_time memory processes signals jupyter_protocol)
    oracle_limit=()
fi
case "$rounds$starts" in *[!0-9]*|'') echo "--rounds and --starts take numbers" >&2; exit 2 ;; esac
case "$only" in ''|kill) ;; *) echo "--only takes kill" >&2; exit 2 ;; esac

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
# Lines `what reason...`: what could not be measured and why (the first
# reason per `what` is the one printed). `what` is `all`, `roundtrip`,
# `start_<contender>`, `kill_<condition>`, `killfloor_<condition>`,
# `memory_<kind>`, `oracle_c<N>` or `gateway`.
failures="$work/failures.txt"
: >"$failures"
log() { echo "== $*" >&2; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
fail() { # what, reason...
    local what="$1"
    shift
    echo "$what $*" >>"$failures"
    echo "!! $what not measured: $*" >&2
}
# last_line FILE: the last non-empty line of FILE, for a reason.
last_line() { grep -v '^[[:space:]]*$' "$1" 2>/dev/null | tail -1 | cut -c1-200 || true; }

load_samples="$work/load.txt"
: >"$load_samples"
sample_load() { cut -d' ' -f1 /proc/loadavg >>"$load_samples" 2>/dev/null || true; }
load_start="$(loadavg)"
zygote=0
target="${CARGO_TARGET_DIR:-$repo/target}"
retrace="$target/release/retrace"
fat_python=
venv_python=

# setup: everything below needs the binary and the fat image; without them
# every figure is n/a and the summary still prints.
setup() {
    log "building the release binary"
    if ! cargo build --quiet --release 2>"$work/build.txt"; then
        cat "$work/build.txt" >&2
        fail all "cargo build --release failed: $(last_line "$work/build.txt")"
        return 1
    fi
    [ -x "$retrace" ] || { fail all "no binary at $retrace"; return 1; }
    if ! "$retrace" image build fat >&2 2>"$work/image.txt"; then
        cat "$work/image.txt" >&2
        fail all "retrace image build fat failed: $(last_line "$work/image.txt")"
        return 1
    fi
    "$retrace" image list --json >"$work/images.json" || { fail all "retrace image list failed"; return 1; }
    fat_dir="$(python3 -c 'import json,sys; print(next(i["path"] for i in json.load(open(sys.argv[1])) if i["name"] == "fat"))' "$work/images.json")" ||
        { fail all "no fat image in retrace image list"; return 1; }
    fat_python="$fat_dir/venv/bin/python"
    [ -x "$fat_python" ] || { fail all "no python in the fat image: $fat_python"; return 1; }

    log "installing jupyter_client into a throwaway venv"
    if ! venv_python="$(peer_venv "$work" "$fat_python" 2>"$work/venv.txt")"; then
        cat "$work/venv.txt" >&2
        fail start_jupyter_client "installing jupyter_client failed: $(last_line "$work/venv.txt")"
        venv_python=
    fi

    # (Read whole: grep -q would close the pipe early, and pipefail fail it.)
    local exec_help
    exec_help="$("$retrace" exec --help)" || { fail all "retrace exec --help failed"; return 1; }
    if grep -q -- '--kernel-start' <<<"$exec_help"; then
        zygote=1
    else
        fail start_zygote "no zygote in this build"
        fail memory_zygote "no zygote in this build"
    fi
}

# --- figure 1: compare.sh does its own interleaving ------------------------
roundtrip_figure() {
    log "figure 1: round trip vs jupyter_client (compare.sh ${rt_args[*]})"
    sample_load
    local rc=0
    "$here/compare.sh" "${rt_args[@]}" --json "$work/roundtrip.json" >"$work/compare.txt" 2>"$work/compare.err" || rc=$?
    cat "$work/compare.err" >&2
    [ "$rc" -eq 0 ] || fail roundtrip "compare.sh exited $rc: $(last_line "$work/compare.err")"
    sample_load
}

# --- figures 2, 3: fresh kernels ---------------------------------------------
cell='import numpy, pandas, matplotlib; print(1)'
exec_once() { # contender, retrace exec flags...
    local name="$1" t0 t1 rc=0
    shift
    t0="$(now_ms)"
    # Exit 0 only when the cell ended ok.
    printf '%s\n' "$cell" | "$retrace" exec --image fat "$@" - >"$work/exec.out" 2>&1 || rc=$?
    t1="$(now_ms)"
    if [ "$rc" -ne 0 ]; then
        echo "retrace exec $* exited $rc:" >&2
        cat "$work/exec.out" >&2
        fail "start_$name" "retrace exec $* exited $rc: $(last_line "$work/exec.out")"
        return 0
    fi
    echo "start $name $((t1 - t0))" >>"$samples"
}
jc_once() {
    local out rc=0
    [ -n "$venv_python" ] || return 0
    out="$("$venv_python" "$here/jupyter_client_start.py" --kernel-python "$fat_python" \
        --kernel-config "$fat_dir/kernel_config.py" --mpl-cache "$fat_dir/mplconfig" 2>"$work/jc.err")" || rc=$?
    if [ "$rc" -ne 0 ]; then
        cat "$work/jc.err" >&2
        fail start_jupyter_client "jupyter_client_start.py exited $rc: $(last_line "$work/jc.err") $out"
        return 0
    fi
    python3 -c 'import json,sys; print("start jupyter_client", json.loads(sys.argv[1])["total_ms"])' "$out" >>"$samples" ||
        fail start_jupyter_client "jupyter_client_start.py printed no total_ms: $out"
}
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
    local cond="$1" round="$2" f rc out
    for f in "${kill_filters[@]}"; do
        rc=0
        out="$work/kill-$cond-$round-$f"
        "$retrace" sandbox check --filter "$f" --json "$out.json" >"$out.txt" 2>&1 || rc=$?
        # 1: some case failed its expectations (reported below); the kill
        # latencies of the others still count. Anything else: broken.
        if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
            echo "sandbox check --filter $f exited $rc:" >&2
            tail -20 "$out.txt" >&2
            fail "kill_$cond" "sandbox check --filter $f exited $rc: $(last_line "$out.txt")"
            rm -f "$out.json"
        fi
    done
    # The physical floor beside it: the host's exit work for a fork bomb's
    # processes, without retrace (exit_floor.py).
    out="$work/killfloor-$cond-$round"
    if MPLCONFIGDIR="$work/mplconfig" "$fat_python" "$here/exit_floor.py" --reps 3 >"$out.txt" 2>"$out.err"; then
        sed "s/^/killfloor $cond /" "$out.txt" >>"$samples"
    else
        fail "killfloor_$cond" "exit_floor.py failed: $(last_line "$out.err")"
    fi
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
memory_once() { # contender, round
    local flags=() out="$work/memory-$1-$2.json" rc=0
    case "$1" in
        cold) [ "$zygote" -eq 1 ] && flags=(-- --kernel-start cold) ;;
        zygote) flags=(-- --kernel-start zygote) ;;
    esac
    python3 "$here/kernel_memory.py" --retrace "$retrace" --sleep 6 "${flags[@]}" >"$out" 2>"$out.err" || rc=$?
    if [ "$rc" -ne 0 ]; then
        cat "$out.err" "$out" >&2 || true
        fail "memory_$1" "kernel_memory.py exited $rc: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["error"])' "$out" 2>/dev/null ||
            last_line "$out.err")"
        mv "$out" "$out.failed" 2>/dev/null || true
    fi
}
oracle_once() { # concurrency, round
    local c="$1" round="$2" out="$work/oracle-c$1-r$2" t0 t1 rc=0
    t0="$(now_ms)"
    "$retrace" run --model oracle --suite math --rounds 2 --concurrency "$c" "${oracle_limit[@]}" \
        --out "$out" >"$out.log" 2>&1 || rc=$?
    t1="$(now_ms)"
    if [ "$rc" -ne 0 ]; then
        echo "retrace run --concurrency $c exited $rc:" >&2
        tail -20 "$out.log" >&2
        fail "oracle_c$c" "retrace run --concurrency $c exited $rc: $(last_line "$out.log")"
        return 0
    fi
    python3 -c 'import json,sys; print("oracle", sys.argv[2], len(json.load(open(sys.argv[1]))["task_ids"]) / ((int(sys.argv[3]) / 60000.0)))' \
        "$out/run.json" "$c" "$((t1 - t0))" >>"$samples" ||
        fail "oracle_c$c" "no task_ids in $out/run.json"
}

rounds_figures() {
    local contenders=(cold unconfined jupyter_client) memory_kinds=(cold) round s c cond m
    if [ "$zygote" -eq 1 ]; then
        contenders=(zygote "${contenders[@]}")
        memory_kinds=(zygote cold)
    fi
    # One untimed start of each first: page cache and compiled bytecode warm for all.
    for c in "${contenders[@]}"; do one_start "$c"; done
    : >"$samples"
    for round in $(seq 1 "$rounds"); do
        if [ -z "$only" ]; then
            log "round $round/$rounds: fresh kernels ($starts starts each)"
            sample_load
            for s in $(seq 1 "$starts"); do
                for c in $(order $((round + s)) "${contenders[@]}"); do one_start "$c"; done
            done
        fi
        log "round $round/$rounds: kill latency quiet and under load"
        sample_load
        for cond in $(order "$round" quiet load); do
            case "$cond" in
                quiet) kill_check quiet "$round" ;;
                load) with_load kill_check load "$round" ;;
            esac
        done
        [ -z "$only" ] || continue
        log "round $round/$rounds: memory per kernel"
        sample_load
        for m in $(order "$round" "${memory_kinds[@]}"); do memory_once "$m" "$round"; done
        log "round $round/$rounds: oracle throughput"
        sample_load
        for c in $(order "$round" 1 2 4); do oracle_once "$c" "$round"; done
        sample_load
    done
}

# --- figure 8 (optional): gateway.sh does its own interleaving -------------
gateway_figure() {
    log "figure 8 (optional): gateway vs local kernels (gateway.sh ${gw_args[*]})"
    sample_load
    local rc=0
    "$here/gateway.sh" "${gw_args[@]}" --json "$work/gateway.json" >"$work/gateway.txt" 2>"$work/gateway.err" || rc=$?
    if [ "$rc" -ne 0 ]; then
        tail -20 "$work/gateway.err" >&2
        fail gateway "gateway.sh exited $rc: $(last_line "$work/gateway.err")"
        rm -f "$work/gateway.json"
    fi
    sample_load
}

# not_asked: the figures --only leaves out, each n/a with that reason.
not_asked() {
    local what
    for what in roundtrip start_zygote start_cold start_unconfined start_jupyter_client \
        memory_zygote memory_cold oracle_c1 oracle_c2 oracle_c4 gateway; do
        echo "$what not asked: --only $only" >>"$failures"
    done
}

if setup; then
    if [ -n "$only" ]; then
        not_asked
        rounds_figures
    else
        roundtrip_figure
        rounds_figures
        gateway_figure
    fi
fi
load_end="$(loadavg)"
kernels_python="$( ([ -n "$fat_python" ] && "$fat_python" --version 2>&1) || echo 'python ?')"

python3 - "$work" "$zygote" "$load_start" "$load_end" "$rounds" "$starts" "$quick" "$json_out" \
    "$kernels_python" <<'EOF'
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


def load(name):
    path = os.path.join(work, name)
    return json.load(open(path)) if os.path.exists(path) else None


samples = {}
for line in open(os.path.join(work, "samples.txt")):
    fig, who, value = line.split()
    samples.setdefault((fig, who), []).append(float(value))

# what -> the first reason it could not be measured (all.sh's `fail`).
failed = {}
for line in open(os.path.join(work, "failures.txt")):
    what, _, reason = line.rstrip("\n").partition(" ")
    failed.setdefault(what, reason)


class NotMeasured(Exception):
    pass


def need(*whats):
    """Raises NotMeasured with the first recorded reason among `whats`."""
    for what in ("all",) + whats:
        if what in failed:
            raise NotMeasured(failed[what])


def start_samples(who):
    need(f"start_{who}")
    s = samples.get(("start", who))
    if not s:
        raise NotMeasured(f"no {who} start was timed")
    return s


figures = []  # dicts: key, name, value text, versus text, goal text, met, numbers


def figure(key, name, goal, measure, optional=False):
    """Adds one figure; `measure()` returns (value, versus, met, numbers)
    or raises NotMeasured. A ratio that cannot be had is `versus` text
    starting with `n/a`, and counts as not measured (unless `optional`)."""
    try:
        value, versus, met, numbers = measure()
    except NotMeasured as e:
        value, versus, met, numbers = f"n/a ({e})", "n/a", None, {}
    figures.append(dict(key=key, name=name, value=value, versus=versus, goal=goal, met=met, optional=optional,
                        **numbers))


def verdict(met):
    return {True: "met", False: "not met", None: "no goal"}[met]


# 1. round trip
def roundtrip(what):
    need("roundtrip")
    rt = load("roundtrip.json")
    if rt is None:
        raise NotMeasured("compare.sh wrote no roundtrip.json")
    r, p = rt["clients"]["retrace"], rt["clients"][rt["peer"]]
    ratio = rt[f"{what}_ratio"]
    key = {"roundtrip": "rt50", "overhead": "ovh50"}[what]
    goal = {"roundtrip": 0.85, "overhead": 0.5}[what]
    return (f"{r[key]:.2f} ms", f"ratio vs jupyter_client {rt['peer']} {p[key]:.2f} ms = {ratio:.2f}",
            ratio <= goal, dict(retrace_ms=r[key], peer_ms=p[key], ratio=ratio))


figure("roundtrip", "per-cell round trip (pass, p50)", "<= 0.85", lambda: roundtrip("roundtrip"))
figure("overhead", "per-cell overhead (round trip - kernel span, p50)", "<= 0.5", lambda: roundtrip("overhead"))


# 2, 3. fresh kernels
def fresh(who):
    s = start_samples(who)
    p50, p95 = pct(s, 50), pct(s, 95)
    numbers = dict(p50_ms=p50, p95_ms=p95, n=len(s))
    try:
        jc = start_samples("jupyter_client")
    except NotMeasured as e:
        versus = f"n/a: ratio vs jupyter_client start_new_kernel not measured ({e})"
    else:
        jc50, jc95 = pct(jc, 50), pct(jc, 95)
        versus = f"ratio vs jupyter_client start_new_kernel (ipc) {jc50:.0f}/{jc95:.0f} ms = {p50 / jc50:.2f}"
        numbers.update(peer_p50_ms=jc50, peer_p95_ms=jc95, ratio=p50 / jc50)
    return f"{p50:.0f}/{p95:.0f} ms", versus, (p50 <= 100 if who == "zygote" else None), numbers


for who in ("zygote", "cold"):
    figure(f"fresh_{who}", f"fresh kernel, {who} (fat, imports, whole retrace exec, p50/p95)",
           "<= 100 ms p50" if who == "zygote" else "none for cold (zygote: <= 100 ms p50)",
           lambda who=who: fresh(who))


def confined():
    c, u = pct(start_samples("cold"), 50), pct(start_samples("unconfined"), 50)
    return (f"{c:.0f} ms", f"ratio vs --unsafe-no-sandbox {u:.0f} ms = {c / u:.2f}", c / u <= 1.20,
            dict(confined_ms=c, unconfined_ms=u, ratio=c / u))


figure("confined_start", "confined vs unconfined start (retrace exec, cold, p50)", "<= 1.20", confined)


# 5. kill latency
def kills(cond):
    """Kill latencies of one condition; a case matched by two filters of the
    same round counts once."""
    need(f"kill_{cond}")
    by_case, failed_cases = {}, []
    for path in glob.glob(os.path.join(work, f"kill-{cond}-*.json")):
        round_ = os.path.basename(path).split("-")[2]
        for res in json.load(open(path))["results"]:
            if res.get("kill_ms") is not None:
                by_case[(round_, res["id"])] = res["kill_ms"]
            if not res["pass"]:
                failed_cases.append(res["id"])
    if not by_case:
        raise NotMeasured(f"no killed case in the {cond} runs")
    return list(by_case.values()), sorted(set(failed_cases))


def kill_floor(cond, p99, numbers):
    """`; host floor ...` text for a kill figure, its numbers added."""
    try:
        need(f"killfloor_{cond}")
        floor = samples.get(("killfloor", cond))
        if not floor:
            raise NotMeasured("exit_floor.py was not run")
    except NotMeasured as e:
        return f"; host floor n/a ({e})"
    f99 = pct(floor, 99)
    numbers.update(floor_p99_ms=f99, floor_ratio=p99 / f99)
    return f"; host floor (63 forks SIGKILLed, no sandbox) p99 {f99:.0f} ms, ratio {p99 / f99:.2f}"


# The goal is relative to the host's own exit work measured beside it (the
# floor moves with the machine and its load; an absolute bound does not).
KILL_FLOOR_GOAL = 1.5


def floor_met(numbers):
    ratio = numbers.get("floor_ratio")
    return None if ratio is None else ratio <= KILL_FLOOR_GOAL


def kill_quiet():
    quiet, bad = kills("quiet")
    q99 = pct(quiet, 99)
    numbers = dict(p50_ms=pct(quiet, 50), p99_ms=q99, n=len(quiet), failed=bad)
    versus = f"{len(quiet)} kills" + kill_floor("quiet", q99, numbers)
    return f"{pct(quiet, 50):.0f}/{q99:.0f} ms", versus, floor_met(numbers), numbers


def kill_load():
    load_, bad = kills("load")
    l99 = pct(load_, 99)
    numbers = dict(p50_ms=pct(load_, 50), p99_ms=l99, n=len(load_), failed=bad)
    try:
        q99 = pct(kills("quiet")[0], 99)
    except NotMeasured as e:
        versus = f"n/a: ratio vs quiet not measured ({e}); {len(load_)} kills"
    else:
        versus = f"ratio vs quiet p99 = {l99 / q99:.2f}; {len(load_)} kills"
        numbers["ratio"] = l99 / q99
    versus += kill_floor("load", l99, numbers)
    return f"{pct(load_, 50):.0f}/{l99:.0f} ms", versus, floor_met(numbers), numbers


figure("kill_quiet", "kill latency, quiet (p50/p99)", f"p99 <= {KILL_FLOOR_GOAL}x host floor", kill_quiet)
figure("kill_load", "kill latency, 2 CPU burners beside (p50/p99)", f"p99 <= {KILL_FLOOR_GOAL}x host floor",
       kill_load)


# 6. memory
def memory_of(who):
    need(f"memory_{who}")
    runs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(work, f"memory-{who}-*.json")))]
    if not runs:
        raise NotMeasured(f"no {who} kernel was measured")
    m = {k: pct([r[k] for r in runs], 50) / 1024.0 for k in ("private_kb", "pss_kb", "rss_kb")}
    m["cgroup_mb"] = pct([r["cgroup_usage"]["usage_kb"] for r in runs], 50) / 1024.0
    m["cgroup_anon_mb"] = pct([r["cgroup_usage"]["anon_kb"] for r in runs], 50) / 1024.0
    m["processes"] = len(runs[0]["processes"])
    return m


def memory(who):
    m = memory_of(who)
    if who == "zygote":
        try:
            cold = memory_of("cold")
        except NotMeasured as e:
            versus = f"n/a: ratio vs cold not measured ({e})"
        else:
            versus = f"ratio vs cold = {m['private_kb'] / cold['private_kb']:.2f}"
    else:
        versus = f"ratio vs goal 30 MB = {m['private_kb'] / 30:.2f}"
    return (f"{m['private_kb']:.1f} MB (Pss {m['pss_kb']:.1f}, Rss {m['rss_kb']:.1f}, cgroup {m['cgroup_mb']:.1f} MB"
            f" of which anon {m['cgroup_anon_mb']:.1f}; {m['processes']} processes)",
            versus, m["private_kb"] <= 30,
            dict(private_mb=m["private_kb"], pss_mb=m["pss_kb"], rss_mb=m["rss_kb"], cgroup_mb=m["cgroup_mb"],
                 cgroup_anon_mb=m["cgroup_anon_mb"]))


for who in ("zygote", "cold"):
    figure(f"memory_{who}", f"memory per kernel, {who} (private; Pss, Rss, cgroup)", "<= 30 MB private",
           lambda who=who: memory(who))

# 7. oracle
BASELINE = 95 / 32 * 60  # benches/README.md: 95 math tasks x 2 rounds in ~32 s at concurrency 2


def oracle_of(conc):
    need(f"oracle_c{conc}")
    s = samples.get(("oracle", conc))
    if not s:
        raise NotMeasured(f"no run at concurrency {conc} was timed")
    return pct(s, 50)


def oracle(conc):
    v = oracle_of(conc)
    try:
        o1 = oracle_of("1")
    except NotMeasured as e:
        vs_c1 = f"n/a: ratio vs concurrency 1 not measured ({e})"
        numbers = {}
    else:
        vs_c1 = f"ratio vs concurrency 1 = {v / o1:.2f}"
        numbers = dict(ratio_c1=v / o1)
    numbers.update(tasks_per_min=v, ratio_baseline=v / BASELINE)
    return (f"{v:.0f}", f"{vs_c1}; vs baseline {BASELINE:.0f}/min at concurrency 2 = {v / BASELINE:.2f}",
            (v / BASELINE >= 3) if conc == "2" else None, numbers)


for conc in ("1", "2", "4"):
    figure(f"oracle_c{conc}", f"oracle tasks/min, concurrency {conc} (median)",
           ">= 3x baseline at the same concurrency" if conc == "2" else ">= 3x baseline (baseline only known at concurrency 2)",
           lambda conc=conc: oracle(conc))

# 8. gateway executor (optional)
def gateway(key, against):
    need("gateway")
    g = load("gateway.json")
    if g is None:
        raise NotMeasured("gateway.sh wrote no gateway.json")
    f = next((f for f in g["figures"] if f["key"] == key), None)
    if f is None:
        raise NotMeasured(f"gateway.json has no figure {key}")
    gw, lo, ratio = f["gateway"], f["local"], f["ratio_p50"]
    d = 0 if key.startswith("start_") else 2
    note = "" if g["same_image"] else " (NOT the same image)"
    return (f"{gw['p50']:.{d}f}/{gw['p95']:.{d}f} ms",
            f"ratio vs {against} {lo['p50']:.{d}f}/{lo['p95']:.{d}f} ms = {ratio:.2f}{note}", None,
            dict(gateway_p50_ms=gw["p50"], gateway_p95_ms=gw["p95"], local_p50_ms=lo["p50"],
                 local_p95_ms=lo["p95"], ratio=ratio))


for key, name, against in (
        ("start_zygote", "gateway kernel start vs zygote (start + first pass, p50/p95)", "local confined zygote"),
        ("start_cold", "gateway kernel start vs cold (start + first pass, p50/p95)", "local confined cold"),
        ("roundtrip", "gateway per-cell round trip (pass, p50/p95)", "local zygote kernel"),
        ("overhead", "gateway per-cell overhead (round trip - kernel span, p50/p95)", "local zygote kernel")):
    figure(f"gateway_{key}", name, "none (optional figure)", lambda key=key, against=against: gateway(key, against),
           optional=True)

loads = [float(x) for x in open(os.path.join(work, "load.txt")).read().split()] or [math.nan]
print()
print(f"machine: {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, kernels' {py}; shared machine:"
      f" load average (1 min) during the run {min(loads):.1f} to {max(loads):.1f}"
      f" (1/5/15 at start {load_start}, at end {load_end})")
print(f"rounds {rounds}, {starts} fresh starts per contender and round{'; QUICK (smoke run)' if quick == '1' else ''};"
      f" zygote: {'yes' if zygote else 'no'}")
print()
missing = []
for f in figures:
    if f["value"].startswith("n/a"):
        if not f["optional"]:
            missing.append(f["key"])
        print(f"{f['name']}: {f['value']} (goal {f['goal']}: not measured)")
    else:
        # `n/a` anywhere in it: a ratio (or the floor beside it) is missing.
        if "n/a" in f["versus"] and not f["optional"]:
            missing.append(f["key"] + " (ratio)")
        print(f"{f['name']}: {f['value']} ({f['versus']}; goal {f['goal']}: {verdict(f['met'])})")
print()
for f in figures:
    if f["value"].startswith("n/a"):
        print(f"{f['key']}.measured=no")
        continue
    for k, v in f.items():
        if k in ("key", "name", "value", "versus", "goal", "optional"):
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
                   "figures": figures, "not_measured": missing,
                   "samples": {f"{a}/{b}": v for (a, b), v in samples.items()}}, out, indent=1)
if missing:
    print(f"not measured: {', '.join(missing)}", file=sys.stderr)
sys.exit(1 if missing else 0)
EOF
