"""Fresh-kernel start of Python's jupyter_client, the peer of a whole
`retrace exec` process (benches/peer/all.sh, figure "fresh kernel").

Starts one ipykernel of the given image with jupyter_client's own
`start_new_kernel` (a kernelspec written to a private temporary directory
that runs the image's python with its kernel config, unconfined, with an
environment like the one retrace gives its kernels), runs one cell and waits
for its execute_reply. Prints one JSON object:

- start_ms: from before start_new_kernel until it returned (the kernel
  answered kernel_info);
- total_ms: from before start_new_kernel until the cell's reply, the figure
  compared with `retrace exec` (whose process also pays its own start and
  the kernel's shutdown, so the comparison favours jupyter_client);
- ok: the cell ended with status ok and printed what it should.

The kernel is shut down after the measurement, outside it.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

from jupyter_client.manager import start_new_kernel


def kernel_env(kernel_python, home):
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
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    return env


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel-python", required=True)
    ap.add_argument("--kernel-config", default="")
    ap.add_argument("--mpl-cache", default="", help="prebuilt matplotlib config dir to copy")
    ap.add_argument("--code", default="import numpy, pandas, matplotlib; print(1)")
    ap.add_argument("--expect", default="1\n")
    args = ap.parse_args()

    base = tempfile.mkdtemp(prefix="retrace-jcstart.")
    try:
        home = os.path.join(base, "home")
        os.makedirs(home, mode=0o700)
        # retrace copies the image's font cache into each kernel's
        # MPLCONFIGDIR; so does this, to start from the same state.
        if args.mpl_cache and os.path.isdir(args.mpl_cache):
            shutil.copytree(args.mpl_cache, os.path.join(home, ".mplconfig"))
        spec_dir = os.path.join(base, "share", "kernels", "retrace-bench")
        os.makedirs(spec_dir)
        argv = [args.kernel_python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        if args.kernel_config:
            argv.append("--config=" + os.path.abspath(args.kernel_config))
        with open(os.path.join(spec_dir, "kernel.json"), "w") as f:
            json.dump(
                {
                    "argv": argv,
                    "display_name": "retrace bench",
                    "language": "python",
                    "env": kernel_env(args.kernel_python, home),
                },
                f,
            )
        os.environ["JUPYTER_PATH"] = os.path.join(base, "share")
        os.environ["JUPYTER_RUNTIME_DIR"] = os.path.join(base, "runtime")
        work = os.path.join(base, "work")
        os.makedirs(work)

        t0 = time.perf_counter()
        km, kc = start_new_kernel(kernel_name="retrace-bench", cwd=work, startup_timeout=60)
        t1 = time.perf_counter()
        out = []

        def keep(msg):
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])

        reply = kc.execute_interactive(args.code, output_hook=keep, allow_stdin=False, timeout=60)
        t2 = time.perf_counter()
        ok = reply["content"]["status"] == "ok" and "".join(out) == args.expect
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        print(
            json.dumps(
                {
                    "start_ms": (t1 - t0) * 1000.0,
                    "total_ms": (t2 - t0) * 1000.0,
                    "ok": ok,
                }
            )
        )
        return 0 if ok else 1
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
