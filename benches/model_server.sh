#!/usr/bin/env bash
# The local model servers against each other on one GGUF and the same
# threads, interleaved in one session: `retrace model bench` (idle speeds,
# aggregate prompt and generation tokens/s at 1, 2, 4 and 8 requests at
# once, a repair round with its prefix cached and not), then the default
# `retrace run` with each server and the default run as it was before
# llama-server, and the goals with their ratios.
#
#   benches/model_server.sh [--model NAME] [--skip-bench] [--skip-runs] [--skip-threads]
#
# Needs the model prepared (`retrace model prepare`, done on first use).
# Takes about 40 minutes on 2 cores (the bench, then three runs); run it on
# a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
model=""
bench=1
runs=1
threads=1
while [ $# -gt 0 ]; do
    case "$1" in
    --model) model="$2"; shift 2 ;;
    --skip-bench) bench=0; shift ;;
    --skip-runs) runs=0; shift ;;
    --skip-threads) threads=0; shift ;;
    *) echo "usage: $0 [--model NAME] [--skip-bench] [--skip-runs] [--skip-threads]" >&2; exit 2 ;;
    esac
done
cargo build --release --quiet
bin=target/release/retrace
# RETRACE_BENCH_OUT keeps the runs and the JSON figures; else a temp dir.
if [ -n "${RETRACE_BENCH_OUT:-}" ]; then
    out="$RETRACE_BENCH_OUT"
    mkdir -p "$out"
else
    out=$(mktemp -d)
    trap 'rm -rf "$out"' EXIT
fi

if [ "$bench" = 1 ]; then
    $bin model bench ${model:+"$model"} --concurrent 1,2,4,8 --json "$out/bench.json"
fi

# Threads against the kernels' CPU quota: llama-server at 4 requests at
# once with 1 and 2 threads, idle and beside one busy loop (a kernel using
# its whole default quota of 1 CPU, as a CPU-bound cell does until its
# 10 s CPU limit).
if [ "$threads" = 1 ]; then
    for beside in idle busy; do
        for n in 1 2; do
            busy=""
            if [ "$beside" = busy ]; then
                (while :; do :; done) &
                busy=$!
            fi
            RETRACE_MODEL_THREADS=$n $bin model bench ${model:+"$model"} --server llama-server \
                --concurrent 4 --json "$out/threads-$n-$beside.json" >/dev/null
            [ -n "$busy" ] && kill "$busy"
        done
    done
fi

# The default run with each server, and the default run as it was before
# llama-server (llama-cpp-python, 20 sampled math tasks, 2 at once).
run() {
    local name="$1" server="$2"
    shift 2
    local start end
    start=$(date +%s.%N)
    RETRACE_MODEL_SERVER=$server $bin run ${model:+--model "local:$model"} "$@" \
        --out "$out/run-$name" >"$out/run-$name.log" 2>&1
    end=$(date +%s.%N)
    echo "$name $(echo "$end - $start" | bc)" >>"$out/walls"
    grep -E "^time:|tasks|repair" "$out/run-$name.log" | sed "s/^/$name: /"
}
if [ "$runs" = 1 ]; then
    run llama-server llama-server
    run llama-cpp-python llama-cpp-python
    run before llama-cpp-python --sample 20 --concurrency 2
fi

python3 - "$out" "$runs" "$threads" <<'EOF'
import json, sys, pathlib
out, runs, threads = pathlib.Path(sys.argv[1]), sys.argv[2] == "1", sys.argv[3] == "1"
bench_file = out / "bench.json"
bench = {m["server"]: m for m in json.loads(bench_file.read_text())} if bench_file.exists() else {}
new, old = bench.get("llama-server"), bench.get("llama-cpp-python")
def goal(label, value, target, better):
    ok = value >= target if better == ">=" else value <= target
    print(f"{label}: {value:.2f} (goal {better} {target}) {'met' if ok else 'NOT met'}")
if new and old:
    at4 = lambda m: next(a for a in m["aggregate"] if a["concurrent"] == 4)
    goal("aggregate generation at 4 at once, llama-server / llama-cpp-python",
         at4(new)["generation_tps"] / at4(old)["generation_tps"], 2.5, ">=")
if threads:
    for beside in ("idle", "busy"):
        for n in (1, 2):
            m = json.loads((out / f"threads-{n}-{beside}.json").read_text())[0]
            a = m["aggregate"][0]
            print(f"llama-server, {n} thread(s), {beside}: idle generation {m['idle']['generation_tps']:.1f} tok/s, "
                  f"generation at 4 at once {a['generation_tps']:.1f} tok/s, prompt {a['prompt_tps']:.1f} tok/s")
if runs:
    walls = {k: float(v) for k, v in (l.split() for l in (out / "walls").read_text().splitlines())}
    for name, wall in walls.items():
        recs = [json.loads(l) for l in (out / f"run-{name}" / "results.jsonl").read_text().splitlines()]
        tasks = {r["task_id"] for r in recs}
        repaired = {r["task_id"] for r in recs if r["round"] > 0}
        print(f"{name}: wall {wall / 60:.1f} min, {len(tasks)} tasks, "
              f"{len(repaired)} with a repair round ({len(repaired) / max(len(tasks), 1):.0%})")
    goal("default run wall, llama-server / llama-cpp-python (same tasks)",
         walls["llama-server"] / walls["llama-cpp-python"], 1.0, "<=")
    goal("default run wall, llama-server / the default before it (llama-cpp-python, 20 tasks)",
         walls["llama-server"] / walls["before"], 0.6, "<=")
    goal("default run wall in minutes (llama-server)", walls["llama-server"] / 60, 6.0, "<=")
    summary = json.loads((out / "run-llama-server" / "summary.json").read_text())
    t = summary.get("time") or {}
    if t.get("wall_ms") and t.get("model_floor_ms"):
        goal("default run wall / its model floor (llama-server)",
             t["wall_ms"] / t["model_floor_ms"], 1.3, "<=")
EOF
