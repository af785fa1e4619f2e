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
import copy
import ctypes
import gc
import json
import os
import signal
import sys
import threading
import time
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
    # What ipykernel's start imports on top (measured: the debugger's
    # debugpy/pydevd alone was a third of a kernel's start), and what
    # retrace's probe imports. Not matplotlib_inline's backend: importing
    # it hooks it into the running shell, and the zygote has none.
    "ipykernel.debugger",
    "IPython.core.debugger",
    "IPython.core.completerlib",
    "IPython.core.oinspect",
    "IPython.extensions.storemagic",
    "IPython.utils.wildcard",
    "pdb",
    "faulthandler",
    "tornado.platform.asyncio",
    "decimal",
    "fractions",
    "difflib",
    # jupyter_client reads the host's addresses through it (module only:
    # the addresses are read in the kernel, which sees its own network).
    "psutil",
    "jupyter_client.localinterfaces",
)

libc = ctypes.CDLL(None, use_errno=True)
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
MADV_HUGEPAGE = 14
MADV_COLLAPSE = 25
# The kernel's command line with the zygote's connection file, as
# `python -c <this> -m ipykernel_launcher -f FILE --config=...` gave it.
ZYGOTE_ARGS = sys.argv[1:]
# Beside the connection file: the kernel installed retrace's probe itself
# (`PROBE_MARKER` in src/kernel/launch.rs).
PROBE_MARKER = "probe-installed"
PREPARED = None
SIDE_ENV = {}


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


def _since(began):
    return round((time.monotonic() - began) * 1e3, 2)


def _reap(flags):
    """Reaps the Cs of earlier forks (kernels are PID 1's children, never
    the zygote's)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, flags)
        except ChildProcessError:
            return
        if pid == 0:
            return


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
    began = time.monotonic()
    c = os.fork()
    if c == 0:
        code = 1
        try:
            os.close(r)
            _child(req, w, began)
        except _BecomeKernel:
            raise
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
    # C is reaped by the SIGCHLD handler: it exits once G1 has, and the
    # kernel should not wait for those two teardowns of a large address
    # space.
    if not data:
        _reap(0)
        return {"ok": False, "error": "the forked child said nothing"}
    return json.loads(data)


def _child(req, w, began):
    """C: still root in the host's namespaces. Its reply says where the
    time went (ms since the zygote's fork), for `-vv`."""
    ms = {"forked": _since(began)}
    # The zygote's handler would reap G1 under C's waitpid (and, inherited,
    # every child the kernel's code waits for).
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # First: from here on whatever it and its children write is charged to
    # the kernel's cgroup.
    for path in req["procs"]:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, b"0")
        finally:
            os.close(fd)
    ms["cgroups_joined"] = _since(began)
    pid1 = int(req["pid1"])
    out = os.open(f"/proc/{pid1}/fd/1", os.O_WRONLY)
    err = os.open(f"/proc/{pid1}/fd/2", os.O_WRONLY)
    ns = [os.open(f"/proc/{pid1}/ns/{n}", os.O_RDONLY) for n in NAMESPACES]
    for name, fd in zip(NAMESPACES, ns):
        _check(libc.setns(fd, 0), f"setns {name}")
        os.close(fd)
    ms["namespaces_entered"] = _since(began)
    pid_r, pid_w = os.pipe()
    g1 = os.fork()
    if g1 == 0:
        g = os.fork()
        if g == 0:
            _kernel(req, out, err)
        os.write(pid_w, str(g).encode())
        os._exit(0)
    os.close(pid_w)
    g = int(os.read(pid_r, 32))
    # The reply only once G1 is gone: from then on G is PID 1's child, and
    # PID 1 waits for the pid it is handed.
    os.waitpid(g1, 0)
    ms["kernel_forked"] = _since(began)
    _reply(w, {"ok": True, "pid": g, "ms": ms})
    os._exit(0)


class _BecomeKernel(BaseException):
    """Raised in G once it is confined: it unwinds the zygote's stack (the
    fork request in its frames: cgroup paths, PID 1's host pid, the seccomp
    program; the zygote's starting environment) before the kernel runs, at
    the top of the module, with nothing but its command line."""

    def __init__(self, argv):
        super().__init__()
        self.argv = argv


def _kernel(req, out, err):
    """G: becomes the kernel, as `isolate::become_kernel` does on the cold
    path, then raises `_BecomeKernel` to run ipykernel in this process from
    the module's top. Never returns."""
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
        # null: no file-size bound (see `Rlimits::fsize`).
        fsize = resource.RLIM_INFINITY if r["fsize"] is None else r["fsize"]
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_CPU, (r["cpu_secs"], r["cpu_secs"] + 1))
        env = dict(req["env"])
        env.update(SIDE_ENV)
        _rewrite_environ_block(env)
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
        os.environ.update(env)
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
    except BaseException:  # noqa: BLE001
        _exit_with_traceback(123)
    raise _BecomeKernel(list(req["argv"]))


def _exit_with_traceback(code):
    try:
        # fd 2, not sys.stderr: that may be ipykernel's by now.
        os.write(2, ("retrace-zygote: " + traceback.format_exc()).encode())
    except Exception:  # noqa: BLE001
        pass
    os._exit(code)


def _become_kernel(argv):
    """G, its stack unwound: runs the kernel. Never returns."""
    code = 123
    try:
        # Garbage of the zygote's frames that may still hold the request
        # (an exception's cycle); the imported objects stay frozen.
        gc.collect()
        code = _run(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001
        _exit_with_traceback(code)
    os._exit(code)


def _rewrite_environ_block(env):
    """/proc/self/environ shows the environment the process was exec'd
    with: the zygote's (its HOME, its directories). A cold kernel's shows
    its own, so a forked one gets `env` written over the old block, NUL
    padded. The zygote is started with room to spare (`ENV_ROOM` in
    zygote.rs); without it the kernel does not start. PR_SET_MM would move
    the block instead, but it needs CAP_SYS_RESOURCE, which G lacks."""
    block = b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items())
    with open("/proc/self/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    start, end = int(fields[47]), int(fields[48])
    if len(block) > end - start:
        raise OSError(f"the environment ({len(block)} bytes) does not fit the zygote's ({end - start})")
    ctypes.memmove(start, block, len(block))
    ctypes.memset(start + len(block), 0, end - start - len(block))


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
    pd = sys.modules.get("pandas")
    if pd is not None:
        _pandas_as_in_a_kernel(pd)
    mpl = sys.modules.get("matplotlib")
    if mpl is not None:
        config = os.environ.get("MPLCONFIGDIR") or mpl.get_configdir()
        mpl.get_configdir = lambda: config
        mpl.get_cachedir = lambda: config
    # The imported objects stay frozen: a collection would write every
    # object's GC header and copy the zygote's pages into this kernel.


def _pandas_as_in_a_kernel(pd):
    """pandas chose `display.max_columns` at import by whether it ran in an
    IPython kernel: the zygote has no shell yet, so it got a terminal's 0
    (wide frames wrapped in full) where a kernel's own import gets 20
    (wide frames elided with `...`). Put the kernel's default back, as
    value and as default, unless the option is gone (another pandas)."""
    try:
        from pandas._config import config as cf

        key = "display.max_columns"
        registered = cf._registered_options[key]
        if registered.defval == 0:
            cf._registered_options[key] = registered._replace(defval=20)
            pd.set_option(key, 20)
    except Exception:
        pass


def _probe_path():
    """retrace's probe in HOME (`PROBE_FILE` in src/kernel/launch.rs)."""
    return os.path.join(os.environ.get("HOME", ""), ".retrace-probe.py")


def compile_probe():
    """retrace's probe (`.retrace-probe.py`, in the zygote's HOME as in
    every kernel's), compiled once: each kernel's installing cell takes this
    code object when its own file holds the same source. Compiled, never
    run, here."""
    path = _probe_path()
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
        sys._retrace_probe = {source: compile(source, "<retrace>", "exec")}
    except (OSError, SyntaxError, ValueError):
        return False
    return True


def huge_pages():
    """Backs the zygote's heap with transparent huge pages where the host
    lets a process ask (THP mode `madvise` or `always`; MADV_COLLAPSE needs
    Linux 6.1): a fork then copies one page-table entry per huge page
    instead of 512, about two thirds of each of a start's three forks (and
    of every fork a kernel's own code makes). A kernel that writes into a
    shared huge page splits its own mapping of it and copies only the 4 KiB
    page written, so its private memory does not grow. Returns the MiB of
    anonymous memory on huge pages."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size") as f:
            huge = int(f.read())
        with open("/proc/self/maps") as f:
            maps = f.read().splitlines()
    except (OSError, ValueError):
        return 0
    for line in maps:
        fields = line.split()
        path = fields[5] if len(fields) > 5 else ""
        if fields[1] != "rw-p" or path not in ("", "[heap]"):
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        start = (start + huge - 1) // huge * huge
        end = end // huge * huge
        if end - start >= huge and libc.madvise(start, end - start, MADV_HUGEPAGE) == 0:
            libc.madvise(start, end - start, MADV_COLLAPSE)
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("AnonHugePages:"):
                return int(line.split()[1]) // 1024
    return 0


def prepare_app(args):
    """ipykernel's application as far as every kernel of this image shares
    it: the command line and the config files parsed (a quarter of a
    kernel's start). `args` are the kernel's `-m ipykernel_launcher ...`
    with the zygote's connection file. Returns (app, its base class,
    whether the shell was prebuilt) or None when the app cannot be prepared
    (the kernel then runs ipykernel_launcher as a cold kernel does)."""
    if args[:2] != ["-m", "ipykernel_launcher"]:
        return None
    try:
        from ipykernel.kernelapp import IPKernelApp
        from IPython.core.application import BaseIPythonApplication

        app = IPKernelApp.instance()
        # What IPKernelApp.initialize's super() call does, minus the crash
        # handler, which each kernel installs for its own profile.
        app.parse_command_line(args[2:])
        cl_config = copy.deepcopy(app.config)
        app.init_profile_dir()
        app.init_config_files()
        app.load_config_file()
        app.update_config(cl_config)
    except Exception:  # noqa: BLE001 (the kernels start the long way)
        sys.stderr.write("retrace-zygote: no prepared app: " + traceback.format_exc())
        return None
    return app, BaseIPythonApplication, prebuild_shell(app)


def prebuild_shell(app):
    """Builds the IPython shell of ipykernel's kernel here, once: after the
    imports, the largest part of a forked kernel's start (magics,
    formatters, completer, traceback handlers). Each kernel's
    `IPythonKernel` then gets it from `ZMQInteractiveShell.instance()`, and
    `adopt_shell` gives it what is that kernel's own. Only with the history
    database off (its saving thread would stop every fork) and with
    ipykernel's own kernel and shell classes. Returns whether it was built."""
    try:
        from ipykernel.compiler import XCachingCompiler
        from ipykernel.ipkernel import IPythonKernel
        from ipykernel.zmqshell import ZMQInteractiveShell

        if app.config.HistoryManager.get("enabled", True) is not False:
            return False
        if app.kernel_class is not IPythonKernel or "IPythonKernel" in app.config:
            return False
        ZMQInteractiveShell.instance(
            parent=app,
            profile_dir=app.profile_dir,
            kernel=None,
            compiler_class=XCachingCompiler,
        )
    except Exception:  # noqa: BLE001 (each kernel builds its own)
        sys.stderr.write("retrace-zygote: no prebuilt shell: " + traceback.format_exc())
        shell_module = sys.modules.get("ipykernel.zmqshell")
        if shell_module is not None:
            shell_module.ZMQInteractiveShell.clear_instance()
        return False
    return _threads() == 1


def adopt_shell(app):
    """What a shell built in the kernel would have taken from it: the
    kernel, its profile and IPython directory, HOME and working directory,
    and the kernel's standard streams (restored at exit)."""
    from pathlib import Path

    from IPython.utils.path import get_home_dir

    kernel = app.kernel
    shell = kernel.shell
    shell.parent = kernel
    shell.kernel = kernel
    shell.profile_dir = kernel.profile_dir
    shell.ipython_dir = app.ipython_dir
    shell.home_dir = get_home_dir()
    shell.starting_dir = os.getcwd()
    shell.history_manager.dir_hist[:] = [Path.cwd()]
    shell.save_sys_module_state()


def install_probe(app, connection_file):
    """retrace's probe installed in this kernel before it serves anything,
    as the cold path's installing cell does it (a private namespace with a
    copy of the builtins as a cell sees them, the file in HOME read and
    removed, `sys._retrace_probe` taken away), saving that cell's round
    trip. Then it says so with an empty file beside the connection file
    (the harness's directory, which the harness takes back and clears of
    it once the kernel answers); without that file the harness sends the
    installing cell, so whatever fails here leaves the kernel to be
    installed the cold way."""
    import builtins

    compiled = sys.__dict__.pop("_retrace_probe", {})
    path = _probe_path()
    try:
        with open(path, encoding="utf-8") as f:
            code = compiled.get(f.read())
        shell = getattr(app, "shell", None)
        if code is None or shell is None:
            return
        # A cell runs inside the shell's builtin trap (get_ipython, exit,
        # quit are builtins then), and so does this.
        with shell.builtin_trap:
            exec(code, {"__name__": "_retrace", "__builtins__": dict(builtins.__dict__)})
        os.remove(path)
        marker = os.path.join(os.path.dirname(connection_file), PROBE_MARKER)
        os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
    except Exception:  # noqa: BLE001 (the harness installs it with a cell)
        os.write(2, ("retrace-zygote: probe not installed: " + traceback.format_exc()).encode())


def _run_prepared(argv):
    """The rest of `python -m ipykernel_launcher ARGS`, on the prepared
    app: what depends on this kernel (its connection file, its HOME's
    IPython profile) is set here, the rest was parsed in the zygote.
    Returns False when `argv` is not what the app was prepared for."""
    if PREPARED is None or argv[1:4] != ["-m", "ipykernel_launcher", "-f"]:
        return False
    app, base, shell_prebuilt = PREPARED
    if argv[5:] != ZYGOTE_ARGS[4:]:
        return False
    import importlib.util

    from IPython.paths import get_ipython_dir

    connection_file = argv[4]

    def per_kernel(self, argv=None):
        self.connection_file = connection_file
        self.profile_dir = None
        self.ipython_dir = get_ipython_dir()
        self.init_profile_dir()
        self.init_crash_handler()

    sys.argv = [importlib.util.find_spec("ipykernel_launcher").origin] + argv[3:]
    # As `python -m ipykernel_launcher` with PYTHONSAFEPATH: nothing of the
    # working directory (the task's files) on the path while the kernel
    # starts; nor does InteractiveShellApp.init_path add it (safe_path,
    # ignore_cwd). retrace's probe makes it importable once started.
    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]
    sys.stdin = open(0, "r", closefd=False)
    if shell_prebuilt:
        init_kernel = app.init_kernel

        def init_kernel_adopting():
            init_kernel()
            adopt_shell(app)

        app.init_kernel = init_kernel_adopting
    inherited = base.initialize
    base.initialize = per_kernel
    try:
        app.initialize(argv[3:])
    finally:
        base.initialize = inherited
    install_probe(app, connection_file)
    app.start()
    return True


def _run(argv):
    """`python -m MODULE ARGS...` in this process."""
    import runpy

    if _run_prepared(argv):
        return 0
    args = argv[1:]
    if len(args) < 2 or args[0] != "-m":
        raise ValueError(f"cannot run {argv!r} in the zygote")
    sys.argv = [args[1]] + args[2:]
    # What `python -m` puts first on the path: the working directory, unless
    # PYTHONSAFEPATH (every kernel's) says nothing.
    if sys.path and sys.path[0] == "":
        if sys.flags.safe_path:
            del sys.path[0]
        else:
            sys.path[0] = os.getcwd()
    sys.stdin = open(0, "r", closefd=False)
    runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    return 0


def main():
    # Replies go to a private copy of stdout; fd 1 becomes stderr, so a
    # library that prints while importing cannot corrupt the protocol.
    replies = os.dup(1)
    os.dup2(2, 1)
    global PREPARED, SIDE_ENV
    before = dict(os.environ)
    loaded = preload()
    PREPARED = prepare_app(ZYGOTE_ARGS)
    probe_compiled = compile_probe()
    # What imports (debugpy) and config files (retrace's sets MPLBACKEND)
    # put into the environment: a cold kernel has it, so each kernel gets
    # it back after its environment is replaced.
    SIDE_ENV = {k: v for k, v in os.environ.items() if before.get(k) != v}
    gc.collect()
    gc.freeze()
    huge_mib = huge_pages()
    signal.signal(signal.SIGCHLD, lambda *_: _reap(os.WNOHANG))
    _reply(
        replies,
        {
            "ready": True,
            "pid": os.getpid(),
            "preloaded": loaded,
            "app_prepared": PREPARED is not None,
            "shell_prebuilt": PREPARED is not None and PREPARED[2],
            "probe_compiled": probe_compiled,
            "huge_pages_mib": huge_mib,
            "threads": _threads(),
        },
    )
    for line in sys.stdin.buffer:
        try:
            req = json.loads(line)
            reply = fork_kernel(req)
        except Exception as e:  # noqa: BLE001
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        _reply(replies, reply)
    _reap(0)


def _start():
    """The zygote's loop; in a forked kernel, the kernel's command line once
    the zygote's frames are gone."""
    try:
        main()
    except _BecomeKernel as become:
        return become.argv
    return None


_KERNEL_ARGV = _start()
if _KERNEL_ARGV is not None:
    _become_kernel(_KERNEL_ARGV)
