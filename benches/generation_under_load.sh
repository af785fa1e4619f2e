#!/usr/bin/env bash
# Generation speed of the prepared default model's llama-server, idle and
# beside a busy loop started after the server, for several ways of starting
# it (benches/README.md, "Generation beside later load"). Needs the model
# prepared (`retrace model prepare`), curl and python3; run as root (a
# negative nice value) on a quiet machine.
#
#   benches/generation_under_load.sh ["PREFIX|THREADS|LLAMA ARGS" ...]
#
# e.g. "nice -n -5|2|" (the default when no configuration is given) or
# "|2|--prio 2".
set -euo pipefail
home=${RETRACE_HOME:-$HOME/.cache/retrace}
server=$home/models/llama-cpp-server/bin/llama-server
model=$(ls "$home"/models/weights/qwen2.5-coder-1.5b-instruct/*.gguf | head -1)
port=${PORT:-18555}
[ $# -gt 0 ] || set -- "|2|" "nice -n -5|2|" "nice -n -10|2|" "|1|"

# Three single requests of 64 tokens at temperature 0: tokens per second
# of generation, from the server's own timings.
gen() {
    for i in 1 2 3; do
        curl -s "http://127.0.0.1:$port/v1/chat/completions" \
            -H 'Content-Type: application/json' \
            -d "{\"messages\":[{\"role\":\"user\",\"content\":\"Write Python that computes the sum of primes below $((10000 + i)) and stores it in answer.\"}],\"max_tokens\":64,\"temperature\":0,\"cache_prompt\":false}" |
            python3 -c 'import json,sys; print("%.1f" % json.load(sys.stdin)["timings"]["predicted_per_second"])'
    done | tr '\n' ' '
}

for conf in "$@"; do
    IFS='|' read -r prefix threads args <<<"$conf"
    # shellcheck disable=SC2086 # the prefix and args are words
    $prefix "$server" --model "$model" --host 127.0.0.1 --port "$port" \
        --threads "$threads" --threads-batch 2 --ctx-size 4096 --no-webui $args \
        >/dev/null 2>&1 &
    pid=$!
    until curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null; do sleep 0.2; done
    gen >/dev/null
    idle=$(gen)
    (while :; do :; done) &
    burner=$!
    sleep 1
    busy=$(gen)
    kill "$burner"
    wait "$burner" 2>/dev/null || true
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    echo "${prefix:-nice 0}, $threads threads ${args}: idle $idle| beside a later busy loop $busy"
done
