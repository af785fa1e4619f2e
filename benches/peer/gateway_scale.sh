#!/usr/bin/env bash
# A whole run through Jupyter Enterprise Gateway at scale: the math suite,
# oracle model, fat image, every kernel launched and confined by
# `retrace launch` on one of the hosts of the test fixture (network
# namespaces of this machine reached over SSH: `cargo bench --bench
# enterprise_gateway`), many kernels alive at once.
#
#   benches/peer/gateway_scale.sh [--concurrency 32] [--hosts 2] [--suite math] [--model oracle] [--out DIR]
#
# --concurrency N  kernels alive on the gateway at once, and tasks at once (default 32)
# --hosts N        hosts behind the gateway (default 2)
# --suite S        the suite to run (default math: 105 tasks)
# --model M        the model (default oracle)
# --out DIR        keep the run's directory there (default: a temporary one)
#
# Needs root. Builds target/release/retrace (under $CARGO_TARGET_DIR when
# set) and the fixture's venv on first use. Prints the run's wall time,
# tasks, infrastructure errors, accuracy, the kernels each host started
# (run.json's executor.hosts), and kernel start p50/p95/max and per-task
# wall p50/p95 from the records. Exit status: the run's.
set -euo pipefail

concurrency=32
hosts=2
suite=math
model=oracle
out=
while [ $# -gt 0 ]; do
    case "$1" in
        --concurrency) concurrency="$2"; shift 2 ;;
        --hosts) hosts="$2"; shift 2 ;;
        --suite) suite="$2"; shift 2 ;;
        --model) model="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
case "$concurrency$hosts" in *[!0-9]*|'') echo "--concurrency and --hosts take numbers" >&2; exit 2 ;; esac
if [ "$(id -u)" -ne 0 ]; then
    echo "needs root: the fixture makes network namespaces and each host confines its kernels" >&2
    exit 2
fi
cd "$(dirname "$0")/../.."
log() { printf '== %s\n' "$*" >&2; }

log "building retrace (cargo, release)"
cargo build --quiet --release --bin retrace
retrace="${CARGO_TARGET_DIR:-$PWD/target}/release/retrace"
if [ -z "$out" ]; then
    scratch="$(mktemp -d)"
    trap 'rm -rf "$scratch"' EXIT
    out="$scratch/run"
fi

log "run: $suite, $model, $concurrency kernels at once on $hosts hosts -> $out"
rc=0
started=$(date +%s.%N)
# The fixture passes the gateway's URL, token and kernelspec through the
# environment (JUPYTER_GATEWAY_URL, JUPYTER_GATEWAY_AUTH_TOKEN, RETRACE_GATEWAY_KERNEL).
cargo bench --quiet --bench enterprise_gateway -- --hosts "$hosts" \
    "$retrace" run --suite "$suite" --model "$model" --executor gateway \
    --concurrency "$concurrency" --gateway-concurrency "$concurrency" \
    --out "$out" || rc=$?
ended=$(date +%s.%N)

python3 - "$out" "$started" "$ended" <<'EOF'
import json, sys
out, started, ended = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
config = json.load(open(f"{out}/run.json"))
summary = json.load(open(f"{out}/summary.json"))
records = [json.loads(l) for l in open(f"{out}/results.jsonl") if l.strip()]

def pct(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]

starts = [r["timings_ms"]["kernel_start"] for r in records
          if r.get("timings_ms", {}).get("kernel_start") is not None]
walls = [r["cumulative"]["model_ms"] + r["cumulative"]["exec_ms"] for r in records
         if r.get("stop") is not None]
infra = summary["infra_error_rate"]
acc = summary["accuracy_by_round"][-1]
hosts = config["provenance"]["executor"].get("hosts", {})
print(f"wall_s={ended - started:.1f} (including the gateway's and hosts' setup)")
print(f"run_wall_s={config['provenance'].get('wall_ms', 0) / 1e3:.1f}")
print(f"tasks={summary['tasks']} infra_errors={infra['successes']} "
      f"correct={acc['successes']}/{acc['n']}")
print("kernels_by_host=" + ", ".join(f"{h}: {n}" for h, n in sorted(hosts.items())))
print(f"kernel_start_ms p50={pct(starts, 0.5):.0f} p95={pct(starts, 0.95):.0f} "
      f"max={max(starts, default=float('nan')):.0f} (n={len(starts)})")
print(f"task_model_plus_exec_ms p50={pct(walls, 0.5):.0f} p95={pct(walls, 0.95):.0f}")
EOF
exit "$rc"
