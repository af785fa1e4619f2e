"""Fresh-kernel start of Python's jupyter_client, the peer of a whole
`retrace exec` process (benches/peer/all.sh, figure "fresh kernel").

Starts one ipykernel of the given image the way jupyter_client's
`start_new_kernel` does (a KernelManager of a kernelspec written to a
private temporary directory that runs the image's python with its kernel
config, unconfined, with an environment like the one retrace gives its
kernels; then a client that waits for kernel_info), but on ipc:// sockets
in that directory, as retrace's kernels are (`start_new_kernel` takes no
transport and would use TCP), runs one cell and waits for its
execute_reply and IOPub idle. Prints one JSON object:

- start_ms: from before the KernelManager until the kernel answered
  kernel_info (what start_new_kernel returns after);
- total_ms: from the same start until the cell's reply, the figure
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

from jupyter_client.manager import KernelManager
from peer_kernel import kernel_env, run_cell


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
        runtime = os.path.join(base, "runtime")
        os.makedirs(runtime, mode=0o700)
        os.environ["JUPYTER_RUNTIME_DIR"] = runtime
        work = os.path.join(base, "work")
        os.makedirs(work)

        # start_new_kernel's own steps, with the manager on ipc:// sockets
        # (as retrace's kernels are): start_new_kernel itself takes no
        # transport and would use TCP on loopback.
        t0 = time.perf_counter()
        km = KernelManager(
            kernel_name="retrace-bench", transport="ipc", ip=os.path.join(runtime, "k")
        )
        km.start_kernel(cwd=work)
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        t1 = time.perf_counter()
        content, out = run_cell(kc, args.code)
        t2 = time.perf_counter()
        ok = content["status"] == "ok" and out == args.expect
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
