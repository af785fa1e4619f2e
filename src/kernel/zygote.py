# retrace's zygote: one pre-imported Python process per image that forks
# fresh confined kernels on request (see src/kernel/zygote.rs for the design).
#
# Runs as root on the host, in a cgroup of its own, with the kernel's
# environment minus its per-kernel paths. It never runs task code, never
# creates a ZMQ context and has exactly one thread whenever it forks.
#
# Protocol: JSON lines. Its first line on stdout says it is ready; then one
# request per line on stdin, one reply per line on stdout. EOF on stdin (the
# harness is gone) ends it. Nothing secret passes through it: the kernel's
# HMAC key stays in the connection file, which only the kernel reads.
import ctypes
import gc
import json
import os
import sys
import threading
import traceback

PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
# The order PID 1's namespaces are entered in; mnt last, because it moves
# the root, and with it /proc, to the kernel's view.
NAMESPACES = ("ipc", "uts", "net", "cgroup", "pid", "mnt")
# Best effort: whatever of these the image has is imported before any fork.
# Not more: every module mapped here is mapped in every kernel, and each
# fork a kernel makes copies page tables for all of it (scipy was left out:
# with it a fork storm ran into the memory limit before the pids limit).
PRELOAD = (
    "numpy",
    "pandas",
    "matplotlib",
    "matplotlib.figure",
    "matplotlib.font_manager",
    "matplotlib.backends.backend_agg",
    # The backend is chosen at the first figure, in the kernel (inline,
    # from MPLBACKEND), not at import: importing pyplot here is safe.
    "matplotlib.pyplot",
    "IPython",
    "zmq",
    "jupyter_client",
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
    "ipykernel.zmqshell",
    "ipykernel.iostream",
    "ipykernel.comm",
)

libc = ctypes.CDLL(None, use_errno=True)


class sock_fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _check(rc, what):
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _threads():
    return max(threading.active_count(), len(os.listdir("/proc/self/task")))


def preload():
    loaded = []
    for name in PRELOAD:
        try:
            __import__(name)
            loaded.append(name)
        except Exception:  # noqa: BLE001 (an image without it is fine)
            pass
    return loaded


def _reply(fd, obj):
    data = (json.dumps(obj) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


def fork_kernel(req):
    """Forks C, which joins the kernel's cgroups and namespaces and forks
    G1 in them; G1 forks the kernel G and exits, so G re-parents to the
    jail's PID 1 (an orphan goes to the reaper of its *parent's* PID
    namespace, and C's is the host's). Returns G's pid in the jail."""
    if _threads() != 1:
        return {"ok": False, "error": f"refused: {_threads()} threads in the zygote"}
    sys.stdout.flush()
    sys.stderr.flush()
    r, w = os.pipe()
    c = os.fork()
    if c == 0:
        code = 1
        try:
            os.close(r)
            _child(req, w)
        except BaseException as e:  # noqa: BLE001
            try:
                _reply(w, {"ok": False, "error": f"{type(e).__name__}: {e}"})
            except OSError:
                pass
        os._exit(code)
    os.close(w)
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(r, 4096)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(c, 0)
    if not data:
        return {"ok": False, "error": "the forked child said nothing"}
    return json.loads(data)


def _child(req, w):
    """C: still root in the host's namespaces."""
    # First: from here on whatever it and its children write is charged to
    # the kernel's cgroup.
    for path in req["procs"]:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, b"0")
        finally:
            os.close(fd)
    pid1 = int(req["pid1"])
    out = os.open(f"/proc/{pid1}/fd/1", os.O_WRONLY)
    err = os.open(f"/proc/{pid1}/fd/2", os.O_WRONLY)
    ns = [os.open(f"/proc/{pid1}/ns/{n}", os.O_RDONLY) for n in NAMESPACES]
    for name, fd in zip(NAMESPACES, ns):
        _check(libc.setns(fd, 0), f"setns {name}")
        os.close(fd)
    g1 = os.fork()
    if g1 == 0:
        g = os.fork()
        if g == 0:
            _kernel(req, out, err)
        _reply(w, {"ok": True, "pid": g})
        os._exit(0)
    os.waitpid(g1, 0)
    os._exit(0)


def _kernel(req, out, err):
    """G: becomes the kernel, as `isolate::become_kernel` does on the cold
    path, then runs ipykernel in this process. Never returns."""
    code = 123
    try:
        null = os.open("/dev/null", os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        # Nothing of the zygote's (its pipes to the harness) stays open.
        os.closerange(3, 1 << 20)
        os.setsid()
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(str(req["oom_score_adj"]))
        import resource

        r = req["rlimits"]
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NOFILE, (r["nofile"], r["nofile"]))
        resource.setrlimit(resource.RLIMIT_FSIZE, (r["fsize"], r["fsize"]))
        resource.setrlimit(resource.RLIMIT_CPU, (r["cpu_secs"], r["cpu_secs"] + 1))
        os.setgroups([])
        os.setgid(req["gid"])
        os.setuid(req["uid"])
        one, zero = ctypes.c_ulong(1), ctypes.c_ulong(0)
        # The uid change made the process non-dumpable (its /proc files
        # root's); the cold kernel's exec made it dumpable again.
        _check(libc.prctl(PR_SET_DUMPABLE, one, zero, zero, zero), "dumpable")
        _check(libc.prctl(PR_SET_NO_NEW_PRIVS, one, zero, zero, zero), "no_new_privs")
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(dict(req["env"]))
        _refresh(req)
        # Last: from here on the denied syscalls fail with EPERM.
        for program in req["seccomp"]:
            raw = bytes.fromhex(program)
            buf = ctypes.create_string_buffer(raw, len(raw))
            prog = sock_fprog(len(raw) // 8, ctypes.cast(buf, ctypes.c_void_p))
            _check(
                libc.prctl(
                    PR_SET_SECCOMP,
                    ctypes.c_ulong(SECCOMP_MODE_FILTER),
                    ctypes.byref(prog),
                    ctypes.c_ulong(0),
                    ctypes.c_ulong(0),
                ),
                "installing the syscall filter",
            )
        code = _run(req["argv"])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001
        try:
            sys.stderr.write("retrace-zygote: " + traceback.format_exc())
            sys.stderr.flush()
        except Exception:  # noqa: BLE001
            pass
    finally:
        os._exit(code)


def _refresh(req):
    """What the zygote's imports cached from its own process: RNG states
    (siblings must differ), paths read from the environment at import."""
    import random
    import site
    import sysconfig
    import tempfile

    random.seed()
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed()
    tempfile.tempdir = None
    # The user site follows HOME (IPython or pip may have asked already).
    site.USER_BASE = None
    site.USER_SITE = None
    config_vars = getattr(sysconfig, "_CONFIG_VARS", None)
    if config_vars and "userbase" in config_vars:
        config_vars["userbase"] = sysconfig._getuserbase()
    mpl = sys.modules.get("matplotlib")
    if mpl is not None:
        config = os.environ.get("MPLCONFIGDIR") or mpl.get_configdir()
        mpl.get_configdir = lambda: config
        mpl.get_cachedir = lambda: config
    # The imported objects stay frozen: a collection would write every
    # object's GC header and copy the zygote's pages into this kernel.


def _run(argv):
    """`python -m MODULE ARGS...` in this process."""
    import runpy

    args = argv[1:]
    if len(args) < 2 or args[0] != "-m":
        raise ValueError(f"cannot run {argv!r} in the zygote")
    sys.argv = [args[1]] + args[2:]
    # What `python -m` puts first on the path.
    if sys.path and sys.path[0] == "":
        sys.path[0] = os.getcwd()
    sys.stdin = open(0, "r", closefd=False)
    runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    return 0


def main():
    # Replies go to a private copy of stdout; fd 1 becomes stderr, so a
    # library that prints while importing cannot corrupt the protocol.
    replies = os.dup(1)
    os.dup2(2, 1)
    loaded = preload()
    gc.collect()
    gc.freeze()
    _reply(replies, {"ready": True, "pid": os.getpid(), "preloaded": loaded, "threads": _threads()})
    for line in sys.stdin.buffer:
        try:
            req = json.loads(line)
            reply = fork_kernel(req)
        except Exception as e:  # noqa: BLE001
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        _reply(replies, reply)


main()
