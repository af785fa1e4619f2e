#!/usr/bin/env bash
# retrace's local model server (llama.cpp's `llama-server`) against the
# server it replaced, llama-cpp-python's (`python -m llama_cpp.server`, one
# request at a time), on one GGUF and the same threads, interleaved in one
# session: `retrace model bench --against` (idle speeds, aggregate prompt
# and generation tokens/s at 1, 2, 4 and 8 requests at once, a repair round
# with its prefix cached and not), the default `retrace run` with each
# server and the default run as it was before llama-server, then the goals
# with their ratios.
#
#   benches/model_server.sh [--model NAME] [--skip-bench] [--skip-runs] [--skip-threads]
#
# The baseline is not part of retrace: this script installs it from
# benches/llama-cpp-python.lock into a venv of its own under
# $RETRACE_HOME/bench/ (the first time compiles llama.cpp, 10-20 min on 2
# cores) and reaches it through its OpenAI-compatible endpoint, as any
# remote model. retrace's own model is prepared on first use.
# Takes about 60 minutes on 2 cores once prepared; run it on a quiet
# machine.
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
bin=$PWD/target/release/retrace
# RETRACE_BENCH_OUT keeps the runs and the JSON figures; else a temp dir.
if [ -n "${RETRACE_BENCH_OUT:-}" ]; then
    out="$RETRACE_BENCH_OUT"
    mkdir -p "$out"
else
    out=$(mktemp -d)
    trap 'rm -rf "$out"' EXIT
fi
# Both servers get the same threads.
export RETRACE_MODEL_THREADS="${RETRACE_MODEL_THREADS:-$(nproc)}"

# retrace's model, prepared, and where its GGUF is.
$bin model prepare ${model:+"$model"}
gguf=$($bin model status --json | python3 -c '
import json, sys
want = sys.argv[1]
for m in json.load(sys.stdin)["models"]:
    if (m["model"] == "local:" + want) if want else m["default"]:
        print(m["gguf_path"])
' "$model")

# The baseline's venv: built once, kept while the lock is unchanged.
home="${RETRACE_HOME:-$HOME/.cache/retrace}"
venv="$home/bench/llama-cpp-python"
lock_sum=$(sha256sum benches/llama-cpp-python.lock | cut -d' ' -f1)
if [ "$(cat "$venv/.lock-sha256" 2>/dev/null)" != "$lock_sum" ]; then
    rm -rf "$venv"
    "${RETRACE_PYTHON:-/usr/bin/python3}" -m venv "$venv"
    echo "installing llama-cpp-python's server (compiles llama.cpp once: 10-20 min on 2 cores)" >&2
    # The same flags as retrace's build of llama-server (no AMX).
    CFLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" \
    CXXFLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" \
        "$venv/bin/pip" install --quiet --no-deps --only-binary :all: \
        --no-binary llama-cpp-python -r benches/llama-cpp-python.lock
    echo "$lock_sum" >"$venv/.lock-sha256"
fi
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$venv/bin/python" -I -m llama_cpp.server --model "$gguf" --model_alias retrace-local \
    --host 127.0.0.1 --port "$port" --n_ctx 8192 \
    --n_threads "$RETRACE_MODEL_THREADS" --n_threads_batch "$(nproc)" \
    --logits_all false --cache true --cache_type ram --cache_size $((1 << 30)) \
    --use_mlock false --seed 0 --interrupt_requests false >"$out/llama-cpp-python.log" 2>&1 &
baseline=$!
trap 'kill $baseline 2>/dev/null; [ -z "${RETRACE_BENCH_OUT:-}" ] && rm -rf "$out"' EXIT
url="http://127.0.0.1:$port/v1"
for _ in $(seq 600); do
    curl -sf "$url/models" >/dev/null && break
    kill -0 $baseline 2>/dev/null || { tail "$out/llama-cpp-python.log" >&2; exit 3; }
    sleep 0.2
done

if [ "$bench" = 1 ]; then
    $bin model bench ${model:+"$model"} --against "llama-cpp-python=$url" \
        --concurrent 1,2,4,8 --json "$out/bench.json"
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
            RETRACE_MODEL_THREADS=$n $bin model bench ${model:+"$model"} \
                --concurrent 4 --json "$out/threads-$n-$beside.json" >/dev/null
            [ -n "$busy" ] && kill "$busy"
        done
    done
fi

# The default run with each server (the baseline through its endpoint,
# with the local model's defaults spelled out and its one slot's
# concurrency, 2), and the default run as it was before llama-server
# (llama-cpp-python, 20 sampled math tasks, 2 at once).
run() {
    local name="$1"
    shift
    local start end
    start=$(date +%s.%N)
    $bin run "$@" --out "$out/run-$name" >"$out/run-$name.log" 2>&1
    end=$(date +%s.%N)
    echo "$name $(echo "$end - $start" | bc)" >>"$out/walls"
    grep -E "^time:|tasks|repair" "$out/run-$name.log" | sed "s/^/$name: /"
}
if [ "$runs" = 1 ]; then
    baseline_run=(--model openai:retrace-local --base-url "$url" --api-key none
        --repair-temperature 0.7 --request-timeout 600s --concurrency 2)
    run llama-server ${model:+--model "local:$model"}
    run llama-cpp-python "${baseline_run[@]}" --sample 15 --sample-tagged organic-error=13
    run before "${baseline_run[@]}" --sample 20
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
