
# ------------------------------------------------------------ what a cell produces
#
# Beyond what a cell prints and displays, in every kernel retrace talks to
# (local or behind a gateway: this runs in the kernel, so it needs nothing
# of the host and the host never reads the kernel's files):
# - files the cell wrote into its working directory (images, CSV, JSON) are
#   published after it as display_data under FILE_MIME, within the byte
#   bound the harness sends with its answer request (its output cap);
# - a matplotlib figure also carries its chart data (chart.py, `e2b/chart`);
# - a pandas DataFrame or Series also carries pandas' table schema
#   (`application/vnd.dataresource+json`, the first MAX_TABLE_ROWS rows);
# - PIL's `Image.show()` displays the image instead of looking for a
#   viewer program.
# docs/outputs.md describes all of it.

import os as _os_mod  # noqa: E402
import stat as _stat_mod  # noqa: E402
import base64 as _base64_mod  # noqa: E402

FILE_MIME = "application/vnd.retrace.file+json"
TABLE_MIME = "application/vnd.dataresource+json"
# The kinds of file collected, by extension (the harness checks the MIME
# type again: src/kernel/artifact.rs).
_FILE_TYPES = {
    "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif",
    "webp": "image/webp", "svg": "image/svg+xml", "csv": "text/csv", "json": "application/json",
}
MAX_FILE_BYTES = 1 << 20
MAX_FILES = 64
# Entries of the working directory looked at per scan.
MAX_SCAN = 1000
MAX_TABLE_ROWS = 50
MAX_TABLE_COLUMNS = 40
_TABLE_FIELD_TYPES = ("string", "number", "integer", "date", "time", "datetime", "year", "yearmonth",
                      "boolean", "object", "geopoint", "geojson", "array", "duration", "any")

_getcwd = _os_mod.getcwd
_scandir = _os_mod.scandir
_os_open = _os_mod.open
_os_read = _os_mod.read
_os_close = _os_mod.close
_fstat = _os_mod.fstat
_path_join = _os_mod.path.join
_S_ISREG = _stat_mod.S_ISREG
_OPEN_FLAGS = _os_mod.O_RDONLY | _os_mod.O_NOFOLLOW | _os_mod.O_NONBLOCK | _os_mod.O_CLOEXEC
_b64encode = _base64_mod.b64encode

# The working directory and its collectable files before the running cell.
_files = {"dir": None, "seen": None}


def _file_kind(name):
    dot = name.rfind(".")
    return _dict_get(_FILE_TYPES, name[dot + 1:].lower()) if dot > 0 else None


def _scan_files(directory):
    """name -> (inode, size, mtime, ctime) of the regular files of a kind
    collected; a link is never followed (nor listed)."""
    seen = {}
    with _scandir(directory) as entries:
        for i, entry in _enumerate(entries):
            if i >= MAX_SCAN:
                break
            name = entry.name
            if _type(name) is not _str or _file_kind(name) is None:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if _S_ISREG(st.st_mode):
                seen[name] = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    return seen


def _files_before_cell():
    try:
        directory = _getcwd()
        _files["seen"] = _scan_files(directory)
        _files["dir"] = directory
    except BaseException:  # noqa: BLE001 (nothing is collected for this cell)
        _files["seen"] = None


def _read_file(directory, name, limit):
    """The file's bytes, opened without following a link; None when it is
    no regular file or larger than `limit`."""
    fd = _os_open(_path_join(directory, name), _OPEN_FLAGS)
    try:
        st = _fstat(fd)
        if not _S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        chunks = []
        got = 0
        while got <= limit:
            chunk = _os_read(fd, _min(1 << 16, limit + 1 - got))
            if not chunk:
                break
            _list_append(chunks, chunk)
            got += _len(chunk)
        return None if got > limit else b"".join(chunks)
    finally:
        _os_close(fd)


def _files_after_cell(budget):
    """Publishes the files the cell created or changed, each at most
    MAX_FILE_BYTES and small enough for one message under `budget` (the
    harness's output cap), all of them within `budget`."""
    before, directory = _files["seen"], _files["dir"]
    _files["seen"] = None
    if before is None or _type(budget) is not _int or budget <= 0:
        return
    per_file = _min(MAX_FILE_BYTES, (budget - 4096) * 3 // 4)
    left = budget
    sent = 0
    now = _scan_files(directory)
    for name in _sorted(now):
        if sent >= MAX_FILES or per_file <= 0:
            break
        sig = now[name]
        if _dict_get(before, name) == sig or sig[1] > per_file:
            continue
        try:
            data = _read_file(directory, name, per_file)
        except OSError:
            continue
        if data is None:
            continue
        encoded = _bytes_decode(_b64encode(data), "ascii")
        if _len(encoded) + _len(name) + 200 > left:
            continue
        left -= _len(encoded) + _len(name) + 200
        sent += 1
        mime = _file_kind(name)
        _shell.display_pub.publish(
            data={
                "text/plain": "<file %s (%d bytes)>" % (name, _len(data)),
                FILE_MIME: {"name": name, "mime": mime, "bytes": _len(data), "base64": encoded},
            },
            metadata={},
        )


# ---- formatters: chart data beside a figure's image, a table's schema


def _table_of(obj):
    pd = _dict_get(_sys_modules, "pandas")
    if pd is None:
        return None
    if isinstance(obj, pd.Series):
        obj = obj.to_frame()
    elif not isinstance(obj, pd.DataFrame):
        return None
    head = obj.iloc[:MAX_TABLE_ROWS, :MAX_TABLE_COLUMNS]
    table = _json_loads(head.to_json(orient="table", date_format="iso", default_handler=_str))
    # What Jupyter's table readers take: every field named by text, of a
    # type the Table Schema knows (pandas writes a column 0 as the name 0).
    schema = table["schema"]
    fields = []
    for f in schema["fields"]:
        kind = f.get("type")
        _list_append(fields, {"name": _str(f.get("name")), "type": kind if kind in _TABLE_FIELD_TYPES else "any"})
    out = {"schema": {"fields": fields}, "data": table["data"]}
    key = schema.get("primaryKey")
    if _type(key) is _list:
        out["schema"]["primaryKey"] = [_str(k) for k in key]
    return out


def _install_formatters():
    from IPython.core.formatters import BaseFormatter
    from traitlets import ObjectName, Unicode

    class _ChartFormatter(BaseFormatter):
        format_type = Unicode(CHART_MIME)
        print_method = ObjectName("_repr_e2b_chart_")
        _return_type = (_dict,)

        def __call__(self, obj):
            figure = _dict_get(_sys_modules, "matplotlib.figure")
            if figure is None or not isinstance(obj, figure.Figure):
                return None
            try:
                return _chart_of_figure(obj)
            except Exception:  # noqa: BLE001 (a figure this reader cannot read has no chart)
                return None

    class _TableFormatter(BaseFormatter):
        format_type = Unicode(TABLE_MIME)
        print_method = ObjectName("_repr_data_resource_")
        _return_type = (_dict,)

        def __call__(self, obj):
            try:
                return _table_of(obj)
            except Exception:  # noqa: BLE001 (no unique columns, nested ones: no table)
                return None

    display = _shell.display_formatter
    formatters = display.formatters
    for mime, cls in ((CHART_MIME, _ChartFormatter), (TABLE_MIME, _TableFormatter)):
        if mime not in formatters:
            formatters[mime] = cls(parent=display)


# ---- PIL's Image.show(): a display, not a viewer program


def _register_viewer(image_show):
    class _DisplayViewer(image_show.Viewer):
        def show(self, image, **_options):
            from IPython.display import display

            if image.mode not in ("1", "L", "LA", "P", "RGB", "RGBA", "I", "I;16"):
                image = image.convert("RGBA" if "A" in image.mode else "RGB")
            display(image, include=["image/png", "text/plain"])
            return 1

    image_show.register(_DisplayViewer, order=-1)


class _ImageShowHook:
    """Registers the viewer when `PIL.ImageShow` is first imported, so a
    kernel that never uses PIL does not import it."""

    def find_spec(self, name, path=None, target=None):
        if name != "PIL.ImageShow":
            return None
        for finder in _sys_mod.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                run = spec.loader.exec_module

                def exec_module(module):
                    run(module)
                    _register_viewer(module)

                spec.loader.exec_module = exec_module
                return spec
            if spec is not None:
                return None
        return None


def _install_image_show():
    loaded = _dict_get(_sys_modules, "PIL.ImageShow")
    if loaded is not None:
        _register_viewer(loaded)
    else:
        _sys_mod.meta_path.insert(0, _ImageShowHook())


for _install in (_install_formatters, _install_image_show):
    try:
        _install()
    except Exception:  # noqa: BLE001 (the kernel runs on without it)
        pass
