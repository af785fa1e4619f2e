#!/usr/bin/env bash
# The local model servers against each other on one GGUF and the same
# threads, interleaved in one session: `retrace model bench` (idle speeds,
# aggregate prompt and generation tokens/s at 1, 2, 4 and 8 requests at
# once, a repair round with its prefix cached and not), then the default
# `retrace run` with each server, and the goals of issue 29 with their
# ratios.
#
#   benches/model_server.sh [--model NAME] [--skip-runs]
#
# Needs the model prepared (`retrace model prepare`, done on first use).
# Takes about 10 minutes for the bench and one default run per server on 2
# cores; run it on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
model=""
runs=1
while [ $# -gt 0 ]; do
    case "$1" in
    --model) model="$2"; shift 2 ;;
    --skip-runs) runs=0; shift ;;
    *) echo "usage: $0 [--model NAME] [--skip-runs]" >&2; exit 2 ;;
    esac
done
cargo build --release --quiet
bin=target/release/retrace
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

$bin model bench ${model:+"$model"} --concurrent 1,2,4,8 --json "$out/bench.json"

if [ "$runs" = 1 ]; then
    for server in llama-server llama-cpp-python; do
        start=$(date +%s.%N)
        RETRACE_MODEL_SERVER=$server $bin run ${model:+--model "local:$model"} \
            --out "$out/run-$server" >"$out/run-$server.log" 2>&1
        end=$(date +%s.%N)
        echo "$server $(echo "$end - $start" | bc)" >>"$out/walls"
        grep -E "^time:|tasks:" "$out/run-$server.log" | sed "s/^/$server: /"
    done
fi

python3 - "$out" "$runs" <<'EOF'
import json, sys, pathlib
out, runs = pathlib.Path(sys.argv[1]), sys.argv[2] == "1"
bench = {m["server"]: m for m in json.loads((out / "bench.json").read_text())}
new, old = bench.get("llama-server"), bench.get("llama-cpp-python")
def goal(label, value, target, better):
    ok = value >= target if better == ">=" else value <= target
    print(f"{label}: {value:.2f} (goal {better} {target}) {'met' if ok else 'NOT met'}")
if new and old:
    at4 = lambda m: next(a for a in m["aggregate"] if a["concurrent"] == 4)
    goal("aggregate generation at 4 at once, llama-server / llama-cpp-python",
         at4(new)["generation_tps"] / at4(old)["generation_tps"], 2.5, ">=")
if runs:
    walls = dict(l.split() for l in (out / "walls").read_text().splitlines())
    goal("default run wall, llama-server / llama-cpp-python",
         float(walls["llama-server"]) / float(walls["llama-cpp-python"]), 0.6, "<=")
    summary = json.loads((out / "run-llama-server" / "summary.json").read_text())
    t = summary.get("time") or {}
    if t.get("wall_ms") and t.get("model_floor_ms"):
        goal("default run wall / its model floor (llama-server)",
             t["wall_ms"] / t["model_floor_ms"], 1.3, "<=")
EOF
