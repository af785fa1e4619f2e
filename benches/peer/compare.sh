#!/usr/bin/env bash
# Trivial-cell round trip: retrace's kernel client against Python's
# jupyter_client, in one run on this machine, against the same ipykernel
# image (retrace's slim image, built under $RETRACE_HOME or the default on
# first use) over the same transport (ipc:// sockets). As root, retrace's
# kernel is confined as in a run (its cgroup, namespaces, seccomp and user,
# the lock watchdog, the jail readings and the forged-end check) and
# jupyter_client's is not: the ratio is what every protection costs.
# --unconfined runs retrace's kernel unconfined too (the client alone).
#
#   benches/peer/compare.sh [--n 500] [--warmup 50] [--rounds 4] [--peer poll|interactive] [--trace] [--unconfined] [--json FILE]
#
# Each round starts a fresh kernel per client and runs --warmup untimed and
# --n timed executions of `pass`; rounds alternate the order of the clients
# so slow drift on a shared machine hits both alike, and the statistics are
# over all rounds' samples. jupyter_client runs in two modes: `poll` (one
# zmq.Poller over its shell and IOPub channel sockets, the fastest use of
# its public API) and `interactive` (kc.execute_interactive). Both clients
# send the same execute_request and finish on execute_reply AND IOPub idle
# for it (retrace as Kernel::execute does, with anything more it waits
# for). overhead = round trip - the kernel's own busy->idle span (from the
# status messages' header dates).
#
# --trace adds one more run per client with hooks in the kernel
# (kernel_trace.py) and prints where the round trip goes: send leg (call ->
# the kernel's shell thread has the request), kernel in (-> status busy),
# span, kernel out (idle -> the IOPub thread writes it), receive leg (->
# the call returns). Those runs are not part of the ratios.
#
# jupyter_client is installed (same versions as in the image) into a
# throwaway venv under a temporary directory; the image is not touched.
# The last two lines compare retrace with the --peer mode (default poll):
#   roundtrip_ratio=<retrace p50 / jupyter_client p50>
#   overhead_ratio=<retrace overhead p50 / jupyter_client overhead p50>
# --json FILE also writes the per-client statistics and both ratios there.
set -euo pipefail

n=500
warmup=50
rounds=4
peer=poll
trace=0
confined=1
json_out=
while [ $# -gt 0 ]; do
    case "$1" in
        --n) n="$2"; shift 2 ;;
        --warmup) warmup="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --peer) peer="$2"; shift 2 ;;
        --trace) trace=1; shift ;;
        --unconfined) confined=0; shift ;;
        --json) json_out="$2"; shift 2 ;;
        -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
case "$peer" in poll|interactive) ;; *) echo "--peer must be poll or interactive" >&2; exit 2 ;; esac

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"
# shellcheck source=benches/peer/lib.sh
. "$here/lib.sh"

work="$(mktemp -d "${TMPDIR:-/tmp}/retrace-peer.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# As root, retrace's kernel is confined as in a run (every protection on);
# --unconfined measures the client alone.
sandbox=()
if [ "$confined" -eq 1 ] && [ "$(id -u)" -eq 0 ]; then
    sandbox=(--confined)
elif [ "$confined" -eq 1 ]; then
    echo "not root: retrace's kernel runs unconfined (pass --unconfined to say so)" >&2
    exit 2
fi

roundtrip() {
    cargo run --quiet --release --example roundtrip -- "${sandbox[@]}" "$@"
}

echo "== building the retrace side (cargo, release) and the slim image if needed" >&2
cargo build --quiet --release --example roundtrip --bin retrace
roundtrip --print-image >"$work/image.txt"
kernel_python="$(sed -n 's/^python=//p' "$work/image.txt")"
kernel_config="$(sed -n 's/^kernel_config=//p' "$work/image.txt")"
[ -x "$kernel_python" ] || { echo "no python in the slim image: $kernel_python" >&2; exit 1; }

echo "== installing jupyter_client into a throwaway venv" >&2
venv_python="$(peer_venv "$work" "$kernel_python")"

jc() {
    "$venv_python" "$here/jupyter_client_roundtrip.py" \
        --kernel-python "$kernel_python" --kernel-config "$kernel_config" \
        --n "$n" --warmup "$warmup" --raw "$@"
}

load_before="$(loadavg)"
for round in $(seq 1 "$rounds"); do
    echo "== round $round/$rounds" >&2
    if [ $((round % 2)) -eq 1 ]; then
        order="retrace poll interactive"
    else
        order="interactive poll retrace"
    fi
    for client in $order; do
        out="$work/$client-$round.json"
        case "$client" in
            retrace) roundtrip --n "$n" --warmup "$warmup" --raw >"$out" ;;
            *) jc --mode "$client" >"$out" ;;
        esac
    done
done

if [ "$trace" -eq 1 ]; then
    echo "== traced runs (not part of the ratios)" >&2
    roundtrip --n "$n" --warmup "$warmup" --kernel-trace >"$work/trace-retrace.json"
    jc --mode poll --kernel-trace >"$work/trace-poll.json"
    jc --mode interactive --kernel-trace >"$work/trace-interactive.json"
fi

load_after="$(loadavg)"

"$venv_python" - "$work" "$peer" "$load_before" "$load_after" "$json_out" <<'EOF'
import glob
import json
import math
import os
import platform
import sys

work, peer, load_before, load_after, json_out = sys.argv[1:6]


def pct(values, p):
    s = sorted(values)
    rank = math.ceil(p / 100.0 * len(s))
    return s[min(max(rank, 1), len(s)) - 1]


def load(client):
    rt, busy, rounds, meta = [], [], [], None
    for path in sorted(glob.glob(os.path.join(work, f"{client}-[0-9]*.json"))):
        with open(path) as f:
            d = json.load(f)
        meta = meta or d
        r, b = d["raw"]["roundtrip_ms"], d["raw"]["kernel_busy_ms"]
        rt += r
        busy += b
        rounds.append(pct(r, 50))
    over = [r - b for r, b in zip(rt, busy)]
    return {
        "n": len(rt),
        "rt50": pct(rt, 50),
        "rt99": pct(rt, 99),
        "busy50": pct(busy, 50),
        "ovh50": pct(over, 50),
        "ovh99": pct(over, 99),
        "rounds": rounds,
        "meta": meta,
    }


res = {c: load(c) for c in ("retrace", "poll", "interactive")}
jcm = res["poll"]["meta"]
print()
print(
    f"machine: {os.cpu_count()} CPUs, {platform.system()} {platform.release()}; "
    f"jupyter_client {jcm['jupyter_client_version']}, pyzmq {jcm['pyzmq_version']}, "
    f"Python {jcm['python']}; cell {jcm['code']!r}, "
    f"{jcm['warmup']} warm-up + {jcm['n']} timed per round"
)
print(f"load average (1/5/15 min) before: {load_before}; after: {load_after}")
print(
    f"{'client':<30} {'n':>5} {'rt_p50':>7} {'rt_p99':>7} {'busy_p50':>8} "
    f"{'ovh_p50':>7} {'ovh_p99':>7}  rt_p50 per round"
)
names = {
    "retrace": "retrace",
    "poll": "jupyter_client (poll)",
    "interactive": "jupyter_client (interactive)",
}
for key, name in names.items():
    r = res[key]
    per_round = " ".join(f"{x:.3f}" for x in r["rounds"])
    print(
        f"{name:<30} {r['n']:>5} {r['rt50']:>7.3f} {r['rt99']:>7.3f} "
        f"{r['busy50']:>8.3f} {r['ovh50']:>7.3f} {r['ovh99']:>7.3f}  {per_round}"
    )
print("(milliseconds; ovh = round trip - kernel busy->idle span, per execution)")
traced = {}
for key in names:
    path = os.path.join(work, f"trace-{key}.json")
    if os.path.exists(path):
        with open(path) as f:
            traced[key] = json.load(f)["trace"]
if traced:
    cols = ("send_leg", "kernel_in", "span", "kernel_out", "recv_leg")
    print()
    print("where the round trip goes (traced runs, p50 ms; kernel_in + kernel_out")
    print("happen inside the kernel, outside its busy->idle span):")
    print(f"{'client':<30} " + " ".join(f"{c:>10}" for c in cols))
    for key, t in traced.items():
        print(f"{names[key]:<30} " + " ".join(f"{t[c]['p50']:>10.3f}" for c in cols))
    print()
other = "interactive" if peer == "poll" else "poll"
print(
    f"vs jupyter_client ({other}): "
    f"roundtrip {res['retrace']['rt50'] / res[other]['rt50']:.3f}, "
    f"overhead {res['retrace']['ovh50'] / res[other]['ovh50']:.3f}"
)
print(f"ratios below: retrace vs jupyter_client ({peer})")
print(f"roundtrip_ratio={res['retrace']['rt50'] / res[peer]['rt50']:.3f}")
print(f"overhead_ratio={res['retrace']['ovh50'] / res[peer]['ovh50']:.3f}")
if json_out:
    with open(json_out, "w") as f:
        json.dump(
            {
                "peer": peer,
                "load_before": load_before,
                "load_after": load_after,
                "clients": {k: {x: v for x, v in r.items() if x != "meta"} for k, r in res.items()},
                "roundtrip_ratio": res["retrace"]["rt50"] / res[peer]["rt50"],
                "overhead_ratio": res["retrace"]["ovh50"] / res[peer]["ovh50"],
            },
            f,
            indent=1,
        )
EOF
