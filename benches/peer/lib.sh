# Shared parts of the peer benchmarks (sourced by compare.sh and all.sh, not
# run): the throwaway jupyter_client venv and percentiles.

# peer_venv WORK KERNEL_PYTHON: creates WORK/venv from KERNEL_PYTHON and
# installs jupyter_client and pyzmq there at the versions the image has (so
# both clients talk to the same protocol code); the image is not touched.
# Prints the venv's python.
peer_venv() {
    local work="$1" kernel_python="$2" pins
    pins="$("$kernel_python" - <<'PY'
import importlib.metadata as m
pins = []
for name in ("jupyter_client", "pyzmq"):
    try:
        pins.append(f"{name}=={m.version(name)}")
    except m.PackageNotFoundError:
        pins.append(name)
print(" ".join(pins))
PY
)"
    "$kernel_python" -m venv "$work/venv" >&2
    # shellcheck disable=SC2086 # $pins is a list of requirement specifiers
    "$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check $pins >&2
    echo "$work/venv/bin/python"
}

# loadavg: the 1/5/15 min load averages, or ? where /proc has none.
loadavg() {
    cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?'
}
