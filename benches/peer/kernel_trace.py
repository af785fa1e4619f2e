# Kernel-side timestamps of a round trip, for the --kernel-trace runs of
# roundtrip.rs and jupyter_client_roundtrip.py (not used in the comparison
# itself: the hooks cost the kernel a little).
#
# Sent to an ipykernel 7 kernel as a cell, twice. The first run installs
# hooks that stamp (time.time(), same clock as the client's wall clock):
#   recv        the shell channel thread has read the request off the socket
#   busy, idle  the main thread publishes status busy / idle
#   iopub_idle  the IOPub thread writes the idle message to its socket
#   reply       the execute_reply is handed to the shell stream for sending
# The second run prints one JSON list (one entry per execute_request, in
# arrival order) and removes the hooks.
import json as _rt_json
import time as _rt_time


def _rt_install():
    from ipykernel.kernelapp import IPKernelApp

    app = IPKernelApp.instance()
    kernel = app.kernel
    stream = kernel.shell_stream
    iopub = app.iopub_thread
    rec = {"recv": [], "status": [], "iopub": [], "reply": []}
    orig = {
        "recv": stream._recv_callback,
        "status": kernel._publish_status,
        "iopub": iopub._really_send,
        "reply": stream.send_multipart,
    }
    now = _rt_time.time

    def on_recv(msg, _cb=orig["recv"], _r=rec["recv"]):
        _r.append((now(), msg))
        return _cb(msg)

    def publish_status(status, channel, parent=None, _o=orig["status"], _r=rec["status"]):
        t = now()
        p = parent or kernel.get_parent(channel) or {}
        _r.append((t, status, p.get("header", {}).get("msg_id")))
        return _o(status, channel, parent)

    def really_send(msg, *a, _o=orig["iopub"], _r=rec["iopub"], **kw):
        _r.append((now(), msg))
        return _o(msg, *a, **kw)

    def send_multipart(msg, *a, _o=orig["reply"], _r=rec["reply"], **kw):
        _r.append((now(), msg))
        return _o(msg, *a, **kw)

    stream._recv_callback = on_recv
    kernel._publish_status = publish_status
    iopub._really_send = really_send
    stream.send_multipart = send_multipart

    def uninstall():
        stream._recv_callback = orig["recv"]
        del kernel._publish_status
        del iopub._really_send
        del stream.send_multipart

    return rec, uninstall


def _rt_parts(msg):
    """(header, parent_header, content) of a raw multipart message."""
    parts = [f.bytes if hasattr(f, "bytes") else bytes(f) for f in msg]
    i = parts.index(b"<IDS|MSG>")
    return (
        _rt_json.loads(parts[i + 2]),
        _rt_json.loads(parts[i + 3]),
        _rt_json.loads(parts[i + 5]),
    )


def _rt_dump(rec):
    entries, by_id = [], {}
    for t, msg in rec["recv"]:
        header, _, _ = _rt_parts(msg)
        if header.get("msg_type") == "execute_request":
            entry = {"id": header["msg_id"], "recv": t}
            entries.append(entry)
            by_id[entry["id"]] = entry
    for t, status, parent in rec["status"]:
        if parent in by_id:
            by_id[parent].setdefault(status, t)
    for key, records in (("iopub_idle", rec["iopub"]), ("reply", rec["reply"])):
        for t, msg in records:
            try:
                header, parent, content = _rt_parts(msg)
            except (ValueError, IndexError):
                continue
            entry = by_id.get(parent.get("msg_id"))
            if entry is None:
                continue
            if key == "reply" and header.get("msg_type") == "execute_reply":
                entry.setdefault("reply", t)
            elif key == "iopub_idle" and content.get("execution_state") == "idle":
                entry.setdefault("iopub_idle", t)
    print(_rt_json.dumps(entries))


if "_rt_trace" not in globals():
    _rt_trace = _rt_install()
else:
    _rt_trace[1]()
    _rt_dump(_rt_trace[0])
    del _rt_trace
