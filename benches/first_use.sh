#!/usr/bin/env bash
# First use, step by step: what a new user waits for between a checkout and
# the report of the README's run command, on this machine. Everything
# retrace builds or fetches starts empty: a temporary $RETRACE_HOME, cargo
# target directory and pip cache (cargo's own registry cache is left as it
# is: crates downloads are not counted). Run as root on a quiet machine;
# it takes about as long as a new user waits (benches/README.md, "First
# use").
#
#   benches/first_use.sh            # prints each step's wall time at the end
#   KEEP=1 benches/first_use.sh     # and keeps the temporary directories
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d -t retrace-first-use.XXXXXX)
export RETRACE_HOME=$work/home PIP_CACHE_DIR=$work/pip-cache
target=$work/target
steps=$work/steps.txt
: >"$steps"
cleanup() {
    if [ -z "${KEEP:-}" ]; then rm -rf "$work"; else echo "kept: $work"; fi
}
trap cleanup EXIT

# step NAME COMMAND...: runs COMMAND, then records NAME and its wall time;
# a step that fails is recorded as failed and makes the script fail at the
# end (the split is still printed).
failed=0
step() {
    local name=$1 t0=$SECONDS rc=0
    shift
    "$@" || rc=$?
    if [ "$rc" -ne 0 ]; then
        name="$name: FAILED (exit $rc)"
        failed=1
    fi
    echo "$((SECONDS - t0)) s  $name" >>"$steps"
}

start=$SECONDS
step "compile retrace (cargo build --release --locked)" \
    env CARGO_TARGET_DIR="$target" cargo build --release --locked --timings
# stderr through a pipe: the run prints one line per phase ("... done in
# 12.3s"), which give the run's own split below.
step "retrace run (images, local model, evaluation)" \
    bash -c 'set -o pipefail; "$1" run --out "$2" 2>&1 | tee "$3"' _ \
    "$target/release/retrace" "$work/run" "$work/run.log"

echo
echo "First use on $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ):"
cat "$steps"
echo "  inside the run (its phases; image builds and the model's preparation overlap):"
grep -E " done in [0-9.]+s$" "$work/run.log" | sed 's/^/    /' || true
grep -E "^time: " "$work/run.log" | sed 's/^/    /' || true
echo "$((SECONDS - start)) s  in all"
echo "cargo's per-crate compile times: $target/cargo-timings/cargo-timing.html (KEEP=1 keeps it)"
exit "$failed"
