#!/usr/bin/env bash
# Cold installs of one allowed closure (default scipy: numpy + scipy, pinned
# with their hashes in images/dynamic.lock), no store and no cache, by:
#   retrace  retrace's confined installer into a temporary store
#            (the `install_cold` example: jail, pip per wheel, audit, publish)
#   pip      the slim image's pip, unconfined, one process
#   uv       uv from a throwaway venv, unconfined, --no-cache
#   uv+pyc   the same with --compile-bytecode (pip compiles .pyc by default)
# and uv from a warm cache (--cache-dir filled once before the rounds, a new
# target each run). Rounds alternate the order of the tools; prints each
# run and the medians. Needs root (retrace's installer is confined).
#
#   benches/install_tools.sh [--n 3] [--dist scipy]
#
# Index: pip uses its own configuration. uv gets the same through its own
# variables, mapped from `pip config list` (index-url, extra-index-url,
# find-links, cert, trusted-host); no host is printed.
set -euo pipefail

n=3
dist=scipy
while [[ $# -gt 0 ]]; do
    case $1 in
        --n) n=$2; shift 2 ;;
        --dist) dist=$2; shift 2 ;;
        *) echo "usage: $0 [--n N] [--dist NAME]" >&2; exit 2 ;;
    esac
done
[[ $(id -u) -eq 0 ]] || { echo "$0: retrace's installer is confined and needs root" >&2; exit 1; }

cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
# The profile `cargo bench` builds (after `cargo bench --bench dynamic` only
# the example is left to build); the time is pip's and the network's anyway.
cargo build --quiet --profile bench --bin retrace --example install_cold
retrace=$target/release/retrace
install_cold=$target/release/examples/install_cold
slim=$("$retrace" image build slim | sed -n 's/^slim: //p')
py=$slim/venv/bin/python
[[ -x $py ]] || { echo "$0: no slim image interpreter" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

closure=$(sed -n "s/^# allow $dist: //p" images/dynamic.lock)
[[ -n $closure ]] || { echo "$0: $dist is not on the allowlist" >&2; exit 1; }
for name in $closure; do
    grep "^$name==" images/dynamic.lock | sed 's/ *#.*//'
done >"$work/req.txt"
echo "closure: $closure"

# uv in a throwaway venv, installed by pip from the configured index.
"$py" -m venv "$work/uv-venv"
"$work/uv-venv/bin/python" -m pip install --quiet --disable-pip-version-check uv
uv=$work/uv-venv/bin/uv
echo "$("$uv" --version), $("$py" -m pip --version | cut -d' ' -f1-2), python $("$py" -c 'import platform; print(platform.python_version())')"

# pip's index settings, for uv (values never printed).
eval "$("$py" - <<'EOF'
import shlex, subprocess, sys
out = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                     capture_output=True, text=True).stdout
names = {"index-url": "UV_DEFAULT_INDEX", "extra-index-url": "UV_INDEX",
         "find-links": "UV_FIND_LINKS", "cert": "SSL_CERT_FILE",
         "trusted-host": "UV_INSECURE_HOST"}
seen = {}
for line in out.splitlines():
    key, _, value = line.partition("=")
    var = names.get(key.rsplit(".", 1)[-1])
    # Later lines (environment) override earlier ones (files), as for pip.
    if var and value:
        seen[var] = shlex.split(value)[0] if value[0] in "'\"" else value
for var, value in seen.items():
    print(f"export {var}={shlex.quote(value)}")
print("echo " + shlex.quote("uv gets from pip: " + (" ".join(sorted(seen)) or "nothing")))
EOF
)"

common=(--no-deps --only-binary :all: --require-hashes -r "$work/req.txt")
run=0
# Runs a tool into a fresh target; prints its wall time in ms.
timed() {
    run=$((run + 1))
    local dest=$work/t$run log=$work/log$run t0
    t0=$(date +%s%N)
    if ! "$@" "$dest" >"$log" 2>&1; then
        echo "$0: failed: $*" >&2
        tail -n 15 "$log" >&2
        exit 1
    fi
    echo $((($(date +%s%N) - t0) / 1000000))
    rm -rf "$dest"
}
tool_pip() {
    "$py" -m pip install --no-cache-dir --disable-pip-version-check --no-input "${common[@]}" --target "$1"
}
tool_uv() {
    "$uv" pip install --python "$py" --no-cache "${common[@]}" --target "$1"
}
tool_uv_pyc() {
    "$uv" pip install --python "$py" --no-cache --compile-bytecode "${common[@]}" --target "$1"
}
tool_uv_warm() {
    "$uv" pip install --python "$py" --cache-dir "$work/uv-cache" "${common[@]}" --target "$1"
}
tool_retrace() {
    # The example makes its own temporary store; its installer_ms is
    # the installer alone (the wall time here adds the process start).
    "$install_cold" --runs 1 --dist "$dist" --init "$retrace" >"$work/retrace.out"
}

# Fill uv's cache (not measured).
timed tool_uv_warm >/dev/null

declare -A times
tools=(retrace pip uv uv_pyc uv_warm)
for ((r = 0; r < n; r++)); do
    order=("${tools[@]}")
    if ((r % 2)); then
        order=()
        for ((i = ${#tools[@]} - 1; i >= 0; i--)); do order+=("${tools[i]}"); done
    fi
    for tool in "${order[@]}"; do
        if [[ $tool == retrace ]]; then
            timed tool_retrace >/dev/null
            ms=$(sed -n 's/^installer_ms=\([0-9]*\).*/\1/p' "$work/retrace.out")
        else
            ms=$(timed "tool_$tool")
        fi
        echo "round $((r + 1)) $tool ${ms} ms"
        times[$tool]+="$ms "
    done
done

median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "medians over $n runs (ms):"
for tool in "${tools[@]}"; do
    echo "  $tool: $(echo "${times[$tool]}" | median)"
done
