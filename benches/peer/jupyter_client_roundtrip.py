"""Trivial-cell round trip of Python's jupyter_client, the peer of
benches/peer/roundtrip.rs (run both through benches/peer/compare.sh).

Starts one ipykernel of the given image (its python and kernel config, with
an environment like the one retrace gives its kernels) on ipc:// sockets in a
private temporary directory, connects a BlockingKernelClient to it, runs
--warmup untimed executions and then --n timed ones. An execution is
complete when both its execute_reply and the IOPub status idle for its
msg_id have arrived (the rule retrace uses). Prints one JSON object:

- roundtrip_ms: from before kc.execute() to completion;
- kernel_busy_ms: the kernel's own busy->idle span (status header dates);
- overhead_ms: per execution, round trip minus the kernel's span.

Modes:
- poll (default): one zmq.Poller over the shell and IOPub channel sockets,
  messages read with channel.get_msg(timeout=0): the fastest use of the
  public BlockingKernelClient API;
- interactive: kc.execute_interactive() (waits for idle on IOPub, then
  reads the reply), the API most callers use.

--request retrace sends the execute_request retrace sends (same
user_expressions, allow_stdin False, stop_on_error False), so both clients
ask the kernel for the same work; --request plain sends kc.execute's default.
--probe also sends a second shell request after each execute_request and
waits for its reply too, like retrace's Kernel::execute (for measuring what
that costs; not used by compare.sh).
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

import zmq
from jupyter_client import BlockingKernelClient
from jupyter_client.connect import write_connection_file
from peer_kernel import kernel_env, run_cell

# The execute_request of retrace's Kernel::execute (src/kernel/session.rs:
# ANSWER_KEY, ANSWER_EXPRESSION). This kernel has no retrace probe, so it
# answers with a NameError result (about 0.06 ms of its span); retrace's
# kernel reads the cell's answer instead.
RETRACE_USER_EXPRESSIONS = {"retrace": "__retrace_answer__()"}
RETRACE_STOP_ON_ERROR = False

# --probe: a second shell request sent right after the execute_request, whose
# reply must also arrive (what retrace's Kernel::execute does, so that code in
# the kernel cannot end its cell early by forging reply and idle).
PROBES = {
    "kernel_info": ("kernel_info_request", {}),
    "comm_info": ("comm_info_request", {"target_name": "retrace.completion"}),
    "is_complete": ("is_complete_request", {"code": ""}),
}


def stats(samples):
    s = sorted(samples)
    n = len(s)

    def pct(p):
        if n == 0:
            return math.nan
        rank = math.ceil(p / 100.0 * n)
        return s[min(max(rank, 1), n) - 1]

    return {
        "n": n,
        "p50": pct(50),
        "p90": pct(90),
        "p99": pct(99),
        "mean": sum(s) / max(n, 1),
        "min": s[0] if s else math.nan,
        "max": s[-1] if s else math.nan,
    }


def start_kernel(base):
    """Starts the kernel; returns (process, connection file)."""
    runtime = os.path.join(base, "rt")
    work = os.path.join(base, "work")
    home = os.path.join(base, "home")
    for d in (runtime, work, home):
        os.makedirs(d, mode=0o700)
    conn_file, _ = write_connection_file(
        fname=os.path.join(runtime, "kernel.json"),
        ip=os.path.join(runtime, "k"),
        transport="ipc",
    )
    cmd = [ARGS.kernel_python, "-m", "ipykernel_launcher", "-f", conn_file]
    if ARGS.kernel_config:
        cmd.append("--config=" + os.path.abspath(ARGS.kernel_config))
    proc = subprocess.Popen(
        cmd,
        env=kernel_env(ARGS.kernel_python, home),
        cwd=work,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return proc, conn_file


def request_kwargs():
    if ARGS.request == "retrace":
        return {
            "silent": False,
            "store_history": True,
            "user_expressions": RETRACE_USER_EXPRESSIONS,
            "allow_stdin": False,
            "stop_on_error": RETRACE_STOP_ON_ERROR,
        }
    return {"allow_stdin": False}


def run_poll(kc, poller, shell, iopub, code, kwargs):
    """One execution; returns (round trip ms, kernel busy ms, wall segments)."""
    w0 = time.time()
    t0 = time.perf_counter()
    msg_id = kc.execute(code, **kwargs)
    probe_id = None
    if ARGS.probe != "none":
        probe = kc.session.msg(*PROBES[ARGS.probe])
        probe_id = probe["header"]["msg_id"]
        kc.shell_channel.send(probe)
    w_sent = time.time()
    reply = idle = False
    probed = probe_id is None
    busy_at = idle_at = None
    while not (reply and idle and probed):
        for sock, _ in poller.poll():
            channel = kc.shell_channel if sock is shell else kc.iopub_channel
            while channel.msg_ready():
                msg = channel.get_msg(timeout=0)
                parent = msg["parent_header"].get("msg_id")
                if parent == probe_id and sock is shell:
                    probed = True
                if parent != msg_id:
                    continue
                kind = msg["header"]["msg_type"]
                if kind == "execute_reply":
                    reply = True
                    if msg["content"]["status"] != "ok":
                        raise RuntimeError(f"execution failed: {msg['content']}")
                elif kind == "status":
                    state = msg["content"]["execution_state"]
                    if state == "busy":
                        busy_at = msg["header"]["date"]
                    elif state == "idle":
                        idle_at = msg["header"]["date"]
                        idle = True
    elapsed = (time.perf_counter() - t0) * 1e3
    w_done = time.time()
    return elapsed, (idle_at - busy_at).total_seconds() * 1e3, segments(
        w0, w_sent, busy_at, idle_at, w_done
    )


def segments(w0, w_sent, busy_at, idle_at, w_done):
    """Wall-clock splits of the overhead (the kernel's header dates are
    taken from the same host clock): building+sending the request,
    call->kernel busy, kernel idle->done."""
    return {
        "send_ms": (w_sent - w0) * 1e3 if w_sent is not None else None,
        "to_busy_ms": (busy_at.timestamp() - w0) * 1e3,
        "idle_to_end_ms": (w_done - idle_at.timestamp()) * 1e3,
        "wall": (w0, w_done),
    }


KERNEL_TRACE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernel_trace.py")


def run_cell_stdout(kc, code):
    """Runs a cell, returns what it printed."""
    content, out = run_cell(kc, code)
    if content["status"] != "ok":
        raise RuntimeError(f"cell failed: {content}")
    return out


def trace_segments(entries, wall):
    """Splits each timed round trip at the kernel's stamps (see roundtrip.rs)."""
    complete = [e for e in entries if all(k in e for k in ("busy", "idle", "iopub_idle"))]
    if len(complete) < len(wall):
        raise RuntimeError(f"{len(complete)} complete trace entries for {len(wall)} executions")
    timed = complete[len(complete) - len(wall) :]
    cols = {k: [] for k in ("send_leg", "kernel_in", "span", "kernel_out", "recv_leg", "reply_after_idle")}
    for e, (called, done) in zip(timed, wall):
        cols["send_leg"].append(e["recv"] - called)
        cols["kernel_in"].append(e["busy"] - e["recv"])
        cols["span"].append(e["idle"] - e["busy"])
        cols["kernel_out"].append(e["iopub_idle"] - e["idle"])
        cols["recv_leg"].append(done - e["iopub_idle"])
        cols["reply_after_idle"].append(e.get("reply", math.nan) - e["iopub_idle"])
    return {k: stats([v * 1e3 for v in vs]) for k, vs in cols.items()}


def run_interactive(kc, code, kwargs):
    dates = {}

    def hook(msg):
        if msg["header"]["msg_type"] == "status":
            dates[msg["content"]["execution_state"]] = msg["header"]["date"]

    w0 = time.time()
    t0 = time.perf_counter()
    reply = kc.execute_interactive(code, timeout=30, output_hook=hook, **kwargs)
    elapsed = (time.perf_counter() - t0) * 1e3
    w_done = time.time()
    if reply["content"]["status"] != "ok":
        raise RuntimeError(f"execution failed: {reply['content']}")
    span = (dates["idle"] - dates["busy"]).total_seconds() * 1e3
    return elapsed, span, segments(w0, None, dates["busy"], dates["idle"], w_done)


def main():
    base = tempfile.mkdtemp(prefix="jcrt-")
    proc = None
    kc = None
    try:
        t_start = time.perf_counter()
        proc, conn_file = start_kernel(base)
        kc = BlockingKernelClient()
        kc.load_connection_file(conn_file)
        kc.start_channels(shell=True, iopub=True, stdin=False, hb=False, control=True)
        kc.wait_for_ready(timeout=60)
        start_ms = (time.perf_counter() - t_start) * 1e3
        # Let the status messages of the handshake pass.
        time.sleep(0.05)
        while kc.iopub_channel.msg_ready():
            kc.iopub_channel.get_msg(timeout=0)

        kwargs = request_kwargs()
        shell = kc.shell_channel.socket
        iopub = kc.iopub_channel.socket
        poller = zmq.Poller()
        poller.register(shell, zmq.POLLIN)
        poller.register(iopub, zmq.POLLIN)

        def once():
            if ARGS.mode == "interactive":
                return run_interactive(kc, ARGS.code, kwargs)
            return run_poll(kc, poller, shell, iopub, ARGS.code, kwargs)

        if ARGS.kernel_trace:
            with open(KERNEL_TRACE) as f:
                trace_code = f.read()
            run_cell_stdout(kc, trace_code)
        for _ in range(ARGS.warmup):
            once()
        roundtrip, busy, overhead = [], [], []
        parts = {}
        wall = []
        for _ in range(ARGS.n):
            total, span, split = once()
            wall.append(split.pop("wall"))
            roundtrip.append(total)
            busy.append(span)
            overhead.append(total - span)
            for key, value in split.items():
                if value is not None:
                    parts.setdefault(key, []).append(value)

        report = {
            "client": "jupyter_client",
            "jupyter_client_version": __import__("jupyter_client").__version__,
            "pyzmq_version": zmq.__version__,
            "python": sys.version.split()[0],
            "mode": ARGS.mode,
            "request": ARGS.request,
            "probe": ARGS.probe,
            "code": ARGS.code,
            "n": ARGS.n,
            "warmup": ARGS.warmup,
            "kernel_start_ms": start_ms,
            "roundtrip_ms": stats(roundtrip),
            "kernel_busy_ms": stats(busy),
            "overhead_ms": stats(overhead),
            "segments": {key: stats(values) for key, values in parts.items()},
        }
        if ARGS.kernel_trace:
            entries = json.loads(run_cell_stdout(kc, trace_code))
            report["trace"] = trace_segments(entries, wall)
        if ARGS.raw:
            report["raw"] = {"roundtrip_ms": roundtrip, "kernel_busy_ms": busy}
        print(json.dumps(report))
    finally:
        if kc is not None:
            try:
                kc.shutdown()
            except Exception:
                pass
        if proc is not None:
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
        if kc is not None:
            kc.stop_channels()
        shutil.rmtree(base, ignore_errors=True)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernel-python", required=True, help="the image's venv python")
    p.add_argument("--kernel-config", help="the image's kernel_config.py")
    p.add_argument("--n", type=int, default=500)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--code", default="pass")
    p.add_argument("--mode", choices=("poll", "interactive"), default="poll")
    p.add_argument("--request", choices=("retrace", "plain"), default="retrace")
    p.add_argument(
        "--probe",
        choices=("none",) + tuple(PROBES),
        default="none",
        help="(poll mode) also send this shell request after each execute_request "
        "and wait for its reply, as retrace does",
    )
    p.add_argument("--raw", action="store_true", help="also print every sample")
    p.add_argument(
        "--kernel-trace",
        action="store_true",
        help="also stamp the request's way through the kernel (kernel_trace.py) "
        "and report where the round trip goes, in 'trace'",
    )
    return p.parse_args()


if __name__ == "__main__":
    ARGS = parse_args()
    main()
