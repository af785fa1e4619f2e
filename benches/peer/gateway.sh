#!/usr/bin/env bash
# Kernels on a Jupyter Kernel Gateway against retrace's own local kernels,
# same image (fat), on this machine: kernel start and per-cell round trip
# (benches/peer/gateway.rs), through a real jupyter-kernel-gateway.
#
#   benches/peer/gateway.sh [--enterprise] [--starts 5] [--cells 500] [--rounds 3] [--warmup 1] [--json FILE] [--keep DIR]
#
# --enterprise  the gateway is a real Jupyter Enterprise Gateway instead,
#               serving retrace's own kernelspec (`image kernelspec
#               --enterprise-gateway`) on two hosts reached over SSH
#               (network namespaces of this machine, as in the tests:
#               `cargo bench --bench enterprise_gateway`): every gateway
#               kernel is launched and confined by `retrace launch` there
# --starts N    timed kernel starts per contender and round (default 5)
# --cells N     timed `pass` cells per round-trip kernel and round (default 500)
# --rounds N    interleaved rounds (default 3); the contenders' order reverses
#               from one round (and one start) to the next
# --warmup N    untimed cells on each round-trip kernel first (default 1)
# --json FILE   also write every figure and sample there
# --keep DIR    keep the gateway's log and kernelspec in DIR
#
# Needs root (the local kernels are confined). Builds target/release/retrace
# and the example (under $CARGO_TARGET_DIR when set), reuses the gateway venv
# of the test fixture, $RETRACE_HOME/test-gateway/kg-3.0.1 (creating it the
# same way when missing: python3 -m venv + pip install
# jupyter-kernel-gateway==3.0.1), writes the fat image's kernelspec with
# `retrace image kernelspec fat` into a temporary JUPYTER_PATH, starts the
# gateway on a free 127.0.0.1 port with a random token and its own Jupyter
# directories, runs the example against it, and stops the gateway and its
# kernels on exit.
#
# Figures: kernel start (asked for → first `pass` done) of a gateway kernel,
# a local confined zygote kernel and a local confined cold kernel; per-cell
# round trip of `pass` and overhead (round trip − the kernel's busy span),
# gateway against local zygote, p50/p95. One line per figure with the ratio
# gateway/local, then `key=value` lines. Exit status: the example's.
set -euo pipefail

enterprise=0
starts=5
cells=500
rounds=3
warmup=1
json_out=
keep=
while [ $# -gt 0 ]; do
    case "$1" in
        --enterprise) enterprise=1; shift ;;
        --starts) starts="$2"; shift 2 ;;
        --cells) cells="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --warmup) warmup="$2"; shift 2 ;;
        --json) json_out="$2"; shift 2 ;;
        --keep) keep="$2"; shift 2 ;;
        -h|--help) sed -n '2,37p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
case "$starts$cells$rounds$warmup" in *[!0-9]*|'') echo "--starts, --cells, --rounds and --warmup take numbers" >&2; exit 2 ;; esac
if [ "$(id -u)" -ne 0 ]; then
    echo "gateway.sh needs root: the local kernels it compares with are confined" >&2
    exit 2
fi
# The example's output file is written from the repository's directory.
if [ -n "$json_out" ]; then
    json_out="$(cd "$(dirname "$json_out")" && pwd)/$(basename "$json_out")"
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"

kg_version=3.0.1
kernel_name=retrace-fat
target="${CARGO_TARGET_DIR:-$repo/target}"
retrace="$target/release/retrace"
example="$target/release/examples/gateway"
# Where tests/common/gateway.rs installs the gateway (retrace's home, as the
# library resolves it).
retrace_home="${RETRACE_HOME:-${HOME:?}/.cache/retrace}"
kg_root="$retrace_home/test-gateway"
kg_venv="$kg_root/kg-$kg_version"

log() { echo "== $*" >&2; }
work="$(mktemp -d "${TMPDIR:-/tmp}/retrace-gateway.XXXXXX")"
kg_pid=

# Live processes whose command line names the gateway's runtime directory:
# its kernels (their connection files are there).
kernels_left() {
    local p
    for p in /proc/[0-9]*; do
        # Not grep -q: closing the pipe early would fail it under pipefail.
        if tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -F -- "$work/runtime/" >/dev/null; then
            echo "${p#/proc/}"
        fi
    done
}

stop_gateway() {
    [ -n "$kg_pid" ] || return 0
    local pids= i
    # SIGTERM: the gateway shuts down its kernels, which run in sessions of
    # their own (not in its process group).
    kill -TERM "$kg_pid" 2>/dev/null || true
    for i in $(seq 1 100); do
        kill -0 "$kg_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL -- "-$kg_pid" 2>/dev/null || true
    wait "$kg_pid" 2>/dev/null || true
    kg_pid=
    for i in $(seq 1 50); do
        pids="$(kernels_left)"
        [ -n "$pids" ] || return 0
        # shellcheck disable=SC2086 # a list of pids
        kill -KILL $pids 2>/dev/null || true
        sleep 0.1
    done
    echo "warning: kernels of the gateway still running after SIGKILL: $pids" >&2
}

cleanup() {
    stop_gateway
    if [ -n "$keep" ]; then
        mkdir -p "$keep" && cp -r "$work"/. "$keep"/
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The version the venv imports, or nothing.
kg_installed() {
    "$kg_venv/bin/python" -c 'import kernel_gateway; print(kernel_gateway.__version__)' 2>/dev/null || true
}

# As tests/common/gateway.rs: under the same lock file (flock), and the same
# marker file, so the fixture and this script share one venv.
ensure_gateway_venv() {
    mkdir -p "$kg_root"
    exec 9>"$kg_root/kg-$kg_version.lock"
    flock 9
    if [ -f "$kg_venv/retrace-installed" ] && [ "$(kg_installed)" = "$kg_version" ]; then
        log "reusing the gateway venv $kg_venv"
    else
        log "installing jupyter-kernel-gateway==$kg_version into $kg_venv"
        rm -rf "$kg_venv"
        local install_log="$kg_root/kg-$kg_version-install.log"
        if ! { python3 -m venv "$kg_venv" &&
            "$kg_venv/bin/python" -m pip install --no-input "jupyter-kernel-gateway==$kg_version"; } \
            >"$install_log" 2>&1 </dev/null; then
            tail -30 "$install_log" >&2
            echo "installing jupyter-kernel-gateway==$kg_version into $kg_venv failed (log: $install_log)" >&2
            exit 1
        fi
        if [ "$(kg_installed)" != "$kg_version" ]; then
            echo "$kg_venv does not import kernel_gateway $kg_version after the install" >&2
            exit 1
        fi
        echo "jupyter-kernel-gateway==$kg_version" >"$kg_venv/retrace-installed"
    fi
    flock -u 9
    exec 9>&-
}

# Status of GET /api/kernelspecs with the token, or 0 when nothing answers.
kernelspecs_status() { # port, token
    python3 - "$1" "$2" <<'PY' 2>/dev/null || echo 0
import sys
import urllib.error
import urllib.request

req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/api/kernelspecs",
                             headers={"Authorization": f"token {sys.argv[2]}"})
try:
    with urllib.request.urlopen(req, timeout=5) as r:
        print(r.status)
except urllib.error.HTTPError as e:
    print(e.code)
PY
}

start_gateway() { # port, token
    local port="$1" token="$2" i status
    mkdir -p "$work/jupyter" "$work/runtime" "$work/config" "$work/data" "$work/home"
    # A clean environment and Jupyter directories of its own: nothing of the
    # user's Jupyter setup reaches it, and its kernels inherit only this.
    # The token on the command line, not KG_AUTH_TOKEN, for the same reason.
    (cd "$work/home" && exec env -i \
        PATH="$kg_venv/bin:/usr/bin:/bin" HOME="$work/home" LANG=C.UTF-8 \
        JUPYTER_PATH="$work/jupyter" JUPYTER_RUNTIME_DIR="$work/runtime" \
        JUPYTER_CONFIG_DIR="$work/config" JUPYTER_DATA_DIR="$work/data" JUPYTER_PLATFORM_DIRS=1 \
        setsid "$kg_venv/bin/jupyter-kernelgateway" \
        --KernelGatewayApp.ip=127.0.0.1 \
        --KernelGatewayApp.port="$port" \
        --KernelGatewayApp.port_retries=0 \
        --KernelGatewayApp.default_kernel_name="$kernel_name" \
        --KernelSpecManager.ensure_native_kernel=False \
        --KernelGatewayApp.auth_token="$token" \
        </dev/null >"$work/gateway.log" 2>&1) &
    kg_pid=$!
    for i in $(seq 1 1200); do
        if ! kill -0 "$kg_pid" 2>/dev/null; then
            wait "$kg_pid" 2>/dev/null || true
            kg_pid=
            tail -40 "$work/gateway.log" >&2
            echo "jupyter-kernelgateway on port $port exited before answering" >&2
            exit 1
        fi
        status="$(kernelspecs_status "$port" "$token")"
        [ "$status" = 200 ] && return 0
        sleep 0.1
    done
    tail -40 "$work/gateway.log" >&2
    echo "jupyter-kernelgateway on port $port did not answer GET /api/kernelspecs (last status $status)" >&2
    exit 1
}

log "building retrace and the gateway example (cargo, release)"
cargo build --quiet --release --bin retrace --example gateway

if [ "$enterprise" -eq 1 ]; then
    args=(--kernel retrace-fat --retrace "$retrace"
        --starts "$starts" --cells "$cells" --rounds "$rounds" --warmup "$warmup")
    [ -z "$json_out" ] || args+=(--json "$json_out")
    log "starting Enterprise Gateway on two SSH hosts (the test fixture) and measuring"
    # The fixture passes the URL, the token and the kernelspec through the
    # environment.
    rc=0
    cargo bench --quiet --bench enterprise_gateway -- "$example" "${args[@]}" || rc=$?
    exit "$rc"
fi
ensure_gateway_venv
log "writing the fat image's kernelspec (builds the image if needed)"
"$retrace" image kernelspec fat --name "$kernel_name" --dir "$work/jupyter" >&2
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
token="$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
log "starting jupyter-kernelgateway $kg_version on 127.0.0.1:$port"
start_gateway "$port" "$token"

args=(--gateway-url "http://127.0.0.1:$port" --kernel "$kernel_name" --retrace "$retrace"
    --starts "$starts" --cells "$cells" --rounds "$rounds" --warmup "$warmup")
[ -z "$json_out" ] || args+=(--json "$json_out")
rc=0
# The token through the environment: not in the process list.
JUPYTER_GATEWAY_AUTH_TOKEN="$token" "$example" "${args[@]}" || rc=$?
if [ "$rc" -ne 0 ]; then
    echo "--- gateway log (last lines) ---" >&2
    tail -20 "$work/gateway.log" >&2
fi
exit "$rc"
