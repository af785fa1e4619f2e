"""retrace's package installer, run confined: its own cgroup, an
unprivileged user, a filesystem view holding only the slim image and this
directory. It is the only process of retrace that reaches the package
index. Each wheel is installed into its own target (one store entry per
wheel) with --no-deps --only-binary :all: --require-hashes: nothing is
resolved and nothing is ever built.

argv: plan.json, written by retrace: {"wheels": [{"key", "name",
"version", "sha256"}], "index_args": [...], "parallel": N}. Writes
result.json beside it: one {"key", "status", "ms", "log"} per wheel."""

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

plan_path = sys.argv[1]
root = os.path.dirname(os.path.abspath(plan_path))
with open(plan_path) as f:
    plan = json.load(f)


def install(wheel):
    key = wheel["key"]
    requirement = os.path.join(root, key + ".txt")
    with open(requirement, "w") as f:
        f.write(f"{wheel['name']}=={wheel['version']} --hash=sha256:{wheel['sha256']}\n")
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--only-binary", ":all:",
         "--require-hashes", "--no-cache-dir", "--disable-pip-version-check", "--no-input",
         "--no-warn-script-location", "--target", os.path.join(root, key, "site"),
         *plan["index_args"], "-r", requirement],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    return {
        "key": key,
        "status": run.returncode,
        "ms": (time.monotonic() - started) * 1e3,
        "log": run.stdout[-4000:],
    }


with ThreadPoolExecutor(max(1, plan["parallel"])) as pool:
    results = list(pool.map(install, plan["wheels"]))
with open(os.path.join(root, "result.json"), "w") as f:
    json.dump(results, f)
