"""The host's own cost of ending a fork bomb, without retrace: the physical
floor under the kill-latency figure of all.sh.

Run with the fat image's python. Imports numpy, pandas and matplotlib (as a
kernel of that image has them), then, per repetition, forks N children that
loop in `time.sleep(0.01)` (as `proc_persistent_fork_bomb`'s processes do
once the pids limit stops them), sends each SIGKILL and waits until all are
reaped. No cgroup, namespace or harness is involved: what remains is the
kernel's exit work for N copies of this process's page tables. Prints one
line per repetition: milliseconds from the first SIGKILL to the last reap.

    python exit_floor.py [--forks 63] [--reps 3]
"""

import argparse
import os
import signal
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot  # noqa: E402,F401
import numpy  # noqa: E402,F401
import pandas  # noqa: E402,F401


def one(forks):
    children = []
    for _ in range(forks):
        pid = os.fork()
        if pid == 0:
            while True:
                time.sleep(0.01)
        children.append(pid)
    time.sleep(0.3)  # every child scheduled and asleep, as a pinned bomb is
    began = time.monotonic()
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    for pid in children:
        os.waitpid(pid, 0)
    return (time.monotonic() - began) * 1e3


def main():
    p = argparse.ArgumentParser()
    # proc_persistent_fork_bomb's pids limit (64) less the process that forks.
    p.add_argument("--forks", type=int, default=63)
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args()
    for _ in range(args.reps):
        print(f"{one(args.forks):.3f}", flush=True)


if __name__ == "__main__":
    main()
