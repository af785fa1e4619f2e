# retrace's code inside every kernel, after probe_cell.py: its installation
# into the shell, and what puts it back when a cell takes it away.

# ------------------------------------------------------------ installation

# What the reader depends on, captured now: a later cell that replaces the
# shell's event manager, its `trigger`, the callback table, this reader's
# callbacks or its entry points has them put back after the cell, by
# whichever of three paths still works: post_run_cell, the shell's
# user_expressions (which evaluates the answer request) and the answer
# entry point itself.
# Entry points shadowed in the user's namespace are removed: the names are
# retrace's.
_events = _shell.events
_EventManager = _type(_events)
_trigger = _mappingproxy_get(_class_dict_of(_EventManager), "trigger")
_callbacks = _events.callbacks
_shell_dict = _obj_getattribute(_shell, "__dict__")
_events_dict = _obj_getattribute(_events, "__dict__")
_type_setattr = type.__setattr__
# A failing callback an earlier cell registered must not print IPython's
# "Error in callback" header into the next cell's stdout, where it would be
# the last line (the answer); its traceback still comes as an error message.
if _dict_contains(_events_dict, "print_on_error"):
    _dict_setitem(_events_dict, "print_on_error", False)
_ENTRY_POINTS = ("__retrace_answer__", "__retrace_inspect__")
_user_expressions = _obj_getattribute(_shell, "user_expressions")


# The harness's per-cell request (probe.rs, ANSWER_KEY and answer_expression):
# `__retrace_answer__(N)`, N the bytes the cell's files may take.
_ANSWER_KEY = "retrace"
_ANSWER_CALL = "__retrace_answer__("


def _answer_request(expression):
    """N of the harness's `__retrace_answer__(N)` (0 for `()`), else None."""
    if _type(expression) is not _str or not _str_startswith(expression, _ANSWER_CALL) or expression[-1:] != ")":
        return None
    digits = expression[_len(_ANSWER_CALL):-1]
    if digits == "":
        return 0
    return _int(digits) if digits.isdigit() and _len(digits) <= 18 else None


def _user_expressions_rearmed(expressions):
    # The harness's answer request is a user expression: put everything
    # back before it is evaluated, in case the cell also broke the hooks
    # that would have done so.
    _rearm()
    # The per-cell request is answered here: IPython would run the envelope
    # through every display formatter (about 0.2 ms a cell) to get the same
    # text/plain, which is the envelope's own text.
    if _type(expressions) is _dict and _len(expressions) == 1:
        files = _answer_request(_dict_get(expressions, _ANSWER_KEY))
        if files is not None:
            try:
                value = {"status": "ok", "data": {"text/plain": __retrace_answer__(files).text}, "metadata": {}}
            except BaseException:  # as IPython's user_expressions does
                value = _shell._user_obj_error()
            return {_ANSWER_KEY: value}
    return _user_expressions(expressions)



# A cell that awaits (top-level `await`) runs in an event loop of its own on
# the main thread, not in the kernel's: the harness believes the end of a
# cell once the main thread is back in the kernel loop's wait (main_thread.rs),
# and a cell awaiting in that very loop would look ended while it runs. The
# loop is kept across cells, so a task one awaiting cell starts can be
# awaited by a later one (it runs while awaiting cells run, as in a terminal
# IPython). Put back after every cell, like the hooks.
import asyncio as _asyncio_mod  # noqa: E402

_get_running_loop = _asyncio_mod.events._get_running_loop
_set_running_loop = _asyncio_mod.events._set_running_loop
_cell_loop = _asyncio_mod.new_event_loop()
_trait_values = _obj_getattribute(_shell, "_trait_values")


def _cell_loop_runner(coro):
    kernel_loop = _get_running_loop()
    _set_running_loop(None)
    task = _cell_loop.create_task(coro)
    try:
        return _cell_loop.run_until_complete(task)
    except BaseException:
        task.cancel()
        raise
    finally:
        _set_running_loop(kernel_loop)


def _rearm():
    try:
        if _dict_get(_trait_values, "loop_runner", _MISSING) is not _cell_loop_runner:
            _dict_setitem(_trait_values, "loop_runner", _cell_loop_runner)
        if _dict_get(_shell_dict, "user_expressions", _MISSING) is not _user_expressions_rearmed:
            _dict_setitem(_shell_dict, "user_expressions", _user_expressions_rearmed)
        if _dict_get(_shell_dict, "events", _MISSING) is not _events:
            _dict_setitem(_shell_dict, "events", _events)
        _dict_pop(_events_dict, "trigger", None)
        if _mappingproxy_get(_class_dict_of(_EventManager), "trigger") is not _trigger:
            _type_setattr(_EventManager, "trigger", _trigger)
        if _dict_get(_events_dict, "callbacks", _MISSING) is not _callbacks:
            _dict_setitem(_events_dict, "callbacks", _callbacks)
        for event, fn in (("pre_run_cell", _pre_run_cell), ("post_run_cell", _post_run_cell)):
            hooks = _dict_get(_callbacks, event)
            if _type(hooks) is not _list:
                hooks = []
                _dict_setitem(_callbacks, event, hooks)
            present = False
            for f in hooks:
                if f is fn:
                    present = True
            if not present:
                _list_append(hooks, fn)
        ns = _shell.user_ns
        for name, fn in ((_ENTRY_POINTS[0], __retrace_answer__), (_ENTRY_POINTS[1], __retrace_inspect__)):
            _dict_setitem(_builtins_dict, name, fn)
            if _type(ns) is _dict:
                _dict_pop(ns, name, None)
    except Exception:
        pass


_rearm()


# A thread writes with the parent header of the cell that started it, not of
# whatever cell runs when it prints: ipykernel takes the header from a
# context variable and falls back to the latest cell's, and a new thread
# starts with an empty context. Started in a copy of its creator's context,
# a thread still printing after its cell returned is that cell's output,
# which the harness drops, instead of becoming the next cell's.
def _install_thread_context():
    import contextvars as _contextvars_mod
    import threading as _threading_mod

    copy_context = _contextvars_mod.copy_context
    original_start = _threading_mod.Thread.start

    def start(self, *args, **kwargs):
        context = copy_context()
        run = self.run
        self.run = lambda: context.run(run)
        return original_start(self, *args, **kwargs)

    _threading_mod.Thread.start = start


_install_thread_context()


# The harness's completion probe (a comm_info request for this target, sent
# right behind each cell; execution.rs, PROBE_COMM_TARGET) proves the cell
# has returned because the kernel's dispatcher takes shell requests one at a
# time. Answered here, at the dispatcher's door, it costs the kernel one
# reply: ipykernel's own path would also publish busy and idle and flush the
# streams while its IOPub thread is still sending the cell's idle (about
# 0.25 ms a cell). Any other request takes ipykernel's path untouched: only
# a message whose unverified header and content look like the probe is
# verified here (and, verified, remembered against replay, so it cannot go
# on to ipykernel's path, which would verify it again).
_COMPLETION_TARGET = "retrace.completion"


def _install_completion_reply():
    import inspect

    kernel = _obj_getattribute(_shell, "kernel")
    session = kernel.session
    dispatch = kernel.dispatch_shell
    # ipykernel 6 and 7 dispatch with `await dispatch_shell(msg, ...)`;
    # anything else (an older kernel on a gateway) keeps its own path.
    if not inspect.iscoroutinefunction(dispatch):
        return
    request_type = b'"comm_info_request"'
    target = _str.encode(_json_str(_COMPLETION_TARGET))

    def unverified_probe(msg):
        """(idents, frames) of what looks like a probe, else None. Every
        shell request passes here: a probe has no buffers, so its header and
        content are the last frames but three and the last, and only those
        are looked at before it is known to be one."""
        if _len(msg) < 6:
            return None
        header = _bytes(msg[-4])
        if request_type not in header or target not in _bytes(msg[-1]):
            return None
        if _json_loads(_bytes_decode(header, "utf-8")).get("msg_type") != "comm_info_request":
            return None
        idents, frames = session.feed_identities(msg, copy=False)
        if _len(frames) != 5:
            return None
        return idents, frames

    def reply_stream(subshell_id):
        # ipykernel 7 replies through its shell channel thread when it has one.
        if getattr(kernel, "_supports_kernel_subshells", False):
            manager = kernel.shell_channel_thread.manager
            return manager.get_subshell_to_shell_channel_socket(subshell_id)
        return kernel.shell_stream

    async def dispatch_shell(msg, *args, **kwargs):
        # Everything that can fail before the message is verified does so
        # here, and the message then takes ipykernel's path untouched.
        try:
            probe = None
            if not args and _len(kwargs) <= 1 and (not kwargs or "subshell_id" in kwargs):
                probe = unverified_probe(msg)
            stream = reply_stream(_dict_get(kwargs, "subshell_id")) if probe is not None else None
        except Exception:  # noqa: BLE001 (ipykernel's path reports it)
            probe = None
        if probe is None:
            return await dispatch(msg, *args, **kwargs)
        idents, frames = probe
        try:
            request = session.deserialize(frames, content=True, copy=False)
        except Exception:  # noqa: BLE001 (as ipykernel: dropped)
            return None
        if request["content"].get("target_name") == _COMPLETION_TARGET:
            session.send(stream, "comm_info_reply", {"comms": {}, "status": "ok"}, request, idents)
        else:
            await kernel.comm_info_request(stream, idents, request)
        return None

    kernel.dispatch_shell = dispatch_shell


try:
    _install_completion_reply()
except Exception:  # noqa: BLE001 (the probe then takes ipykernel's path)
    pass


# A str holding a lone surrogate makes jupyter_client's packer raise (it
# writes UTF-8; '\udc80'-'\udcff' alone pass, as the bytes they stand for),
# and the whole message is lost: a flush of stdout, the cell's error, even
# its reply. Such a message is written as ASCII JSON instead, every other
# character an escape; the harness reads a lone surrogate's escape, and a
# byte that is not UTF-8, as U+FFFD and counts it (kernel/text.rs).
def _install_lenient_packer():
    from jupyter_client.jsonutil import json_clean, json_default

    session = _obj_getattribute(_shell, "kernel").session
    pack = session.pack
    dumps = _json_mod.dumps

    def lenient_pack(obj):
        try:
            return pack(obj)
        except UnicodeEncodeError:
            text = dumps(json_clean(obj), default=json_default, ensure_ascii=True, allow_nan=False)
            return _str.encode(text, "ascii")

    session.pack = lenient_pack


try:
    _install_lenient_packer()
except Exception:  # noqa: BLE001 (such messages are then lost, as before)
    pass


def _working_directory_importable():
    """The kernel has started with its working directory off the import
    path (`PYTHONSAFEPATH`, `ignore_cwd`: src/pyenv/mod.rs), so no task
    file named like a module it imports on the way (`types.py`,
    `ipykernel_launcher.py`) ran in its place. From here on the directory
    is importable as in any notebook (a task's own `helpers.py`), where
    IPython puts it: after the standard library, before site-packages. And
    the Pythons the task's code starts (`!python x.py`) get their usual
    path."""
    import os

    os.environ.pop("PYTHONSAFEPATH", None)
    path = _sys_mod.path
    if "" in path:
        return
    at = 0
    for i, entry in _enumerate(path):
        if os.path.basename(entry) in ("site-packages", "dist-packages"):
            at = i
            break
    path.insert(at, "")


_working_directory_importable()
