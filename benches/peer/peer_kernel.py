"""The peer's kernel: what the jupyter_client benchmarks
(jupyter_client_roundtrip.py, jupyter_client_start.py) share, so that both
start the image's ipykernel as retrace would and read a cell's end alike.
Imported by them, not run.
"""

import os

# retrace's launch_command caps these (src/kernel/launch.rs).
THREAD_VARS = (
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)


def kernel_env(kernel_python, home, threads="1"):
    """Like retrace's launch_command: nothing of the caller's environment."""
    venv_bin = os.path.dirname(os.path.abspath(kernel_python))
    env = {
        "PATH": venv_bin + ":/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "IPYTHONDIR": os.path.join(home, ".ipython"),
        "MPLCONFIGDIR": os.path.join(home, ".mplconfig"),
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    }
    for var in THREAD_VARS:
        env[var] = threads
    return env


def run_cell(kc, code, timeout=60):
    """Runs one cell with kc.execute_interactive (until its execute_reply
    and IOPub idle); returns (reply content, what it printed on stdout)."""
    out = []

    def hook(msg):
        if msg["header"]["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
            out.append(msg["content"]["text"])

    reply = kc.execute_interactive(code, timeout=timeout, output_hook=hook, allow_stdin=False)
    return reply["content"], "".join(out)
