
# ------------------------------------------------------------ chart data
#
# A matplotlib figure's data as JSON, in the shape of E2B's chart extractor
# (github.com/e2b-dev/code-interpreter, chart_data_extractor/e2b_charts,
# MIT licence, Copyright (c) 2025 FOUNDRYLABS, INC.), ported to plain dicts
# (no pydantic in the kernel): the MIME key `e2b/chart`, the chart types
# `line`, `scatter`, `bar`, `pie`, `box_and_whisker`, `superchart`,
# `unknown` and their fields as E2B's `model_dump()` writes them. Differences
# (docs/outputs.md): a series keeps at most MAX_CHART_POINTS points (then
# `points_total` says how many it had), a chart at most MAX_CHART_ELEMENTS
# elements; a bar is named by the tick at its centre (E2B pairs bars and tick
# labels in order) and its orientation comes from the bar container when it
# has one; NaN and infinities are null; a blank figure has no chart.
# Registered as an IPython formatter, so every figure the inline backend
# shows carries its chart beside its PNG (docs/outputs.md).

CHART_MIME = "e2b/chart"
MAX_CHART_POINTS = 1000
MAX_CHART_ELEMENTS = 200


def _chart_text(s):
    return s if _type(s) is _str and s != "" else None


def _chart_number(v):
    try:
        f = _float(v)
    except BaseException:
        return None
    return f if _isfinite(f) else None


def _chart_value(v, dates=None):
    """A point's coordinate as E2B writes it: dates as ISO text, numbers as
    floats, anything else as text."""
    import datetime

    np = _dict_get(_sys_modules, "numpy")
    if np is not None and isinstance(v, np.datetime64):
        return _str(v.astype("datetime64[s]"))
    if isinstance(v, (datetime.date, datetime.datetime)):
        return v.isoformat()
    if isinstance(v, _str):
        return v
    f = _chart_number(v)
    if f is None and not isinstance(v, (_int, _float)) and (np is None or not isinstance(v, np.number)):
        return _str(v)[:200]
    return f


def _dynamic_round(number):
    # E2B's utils/rounding.py: 8 significant digits.
    d = _Decimal(_str(number))
    with _decimal_mod.localcontext() as ctx:
        ctx.prec = _int(max(1, 8 - d.adjusted()))
        return _chart_number(+d)


def _is_date_converter(converter):
    return converter is not None and _str_startswith(_safe_text(_type(converter).__module__), "matplotlib.dates")


def _child_label(label, prefix, name):
    if _type(label) is not _str:
        return name + " ?"
    if _str_startswith(label, prefix) and label[_len(prefix):].isdigit():
        return name + " " + label[_len(prefix):]
    return label


def _axes_kind(ax):
    from matplotlib.collections import PathCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import PathPatch, Rectangle, Wedge
    from matplotlib.text import Text

    objects = [o for o in ax._children if not isinstance(o, Text)]
    if all(isinstance(o, Line2D) for o in objects):
        return "line"
    if all(isinstance(o, (PathPatch, Line2D)) for o in objects):
        return "box_and_whisker"
    objects = [o for o in objects if not (isinstance(o, Line2D) and _is_grid_line(o))]
    if all(isinstance(o, PathCollection) for o in objects):
        return "scatter"
    if all(isinstance(o, Wedge) for o in objects):
        return "pie"
    if all(isinstance(o, Rectangle) for o in objects):
        return "bar"
    return "unknown"


def _is_grid_line(line):
    x, y = line.get_xdata(), line.get_ydata()
    if _len(x) != 2 or _len(y) != 2:
        return False
    return bool(x[0] == x[1] or y[0] == y[1])


def _chart_2d(ax, chart):
    import re

    for axis in ("x", "y"):
        label = _chart_text(getattr(ax, "get_" + axis + "label")())
        chart[axis + "_label"] = label
    for axis in ("x", "y"):
        label = chart[axis + "_label"]
        match = re.search(r"\s\((.*?)\)|\[(.*?)\]", label) if label else None
        chart[axis + "_unit"] = (match.group(1) or match.group(2)) if match else None


def _swap_axes(chart):
    for a, b in (("x_label", "y_label"), ("x_unit", "y_unit")):
        chart[a], chart[b] = chart[b], chart[a]


def _ticks(ax, axis):
    import matplotlib.dates

    obj = getattr(ax, axis + "axis")
    converter = obj.get_converter() if hasattr(obj, "get_converter") else obj.converter
    ticks = _list(obj.get_ticklocs())
    labels = [t.get_text() for t in obj.get_ticklabels()]
    if _is_date_converter(converter):
        values = [matplotlib.dates.num2date(t).isoformat() for t in ticks]
        scale = "datetime"
    else:
        values = [_chart_number(t) for t in ticks]
        scale = getattr(ax, "get_" + axis + "scale")()
        if scale == "linear" and ticks:
            # E2B's rule: ticks 0..n-1 whose labels are not those numbers.
            categorical = True
            for i, (tick, label) in _enumerate(zip(ticks, labels)):
                if not (tick == i and _str(i) != label):
                    categorical = False
                    break
            if categorical:
                scale = "categorical"
    return values, labels, scale


def _point_chart(ax, chart):
    _chart_2d(ax, chart)
    for axis in ("x", "y"):
        values, labels, scale = _ticks(ax, axis)
        chart[axis + "_ticks"] = values
        chart[axis + "_tick_labels"] = labels
        chart[axis + "_scale"] = scale


def _series(label, xs, ys):
    n = _min(_len(xs), _len(ys))
    keep = _min(n, MAX_CHART_POINTS)
    element = {
        "label": label,
        "points": [[_chart_value(xs[i]), _chart_value(ys[i])] for i in _range(keep)],
    }
    if keep < n:
        element["points_total"] = n
    return element


def _line_elements(ax):
    out = []
    for line in ax.get_lines():
        if _is_grid_line(line):
            continue
        label = _child_label(line.get_label(), "_child", "Line")
        out.append(_series(label, line.get_xdata(), line.get_ydata()))
    return out


def _scatter_elements(ax):
    out = []
    for c in ax.collections:
        offsets = c.get_offsets()
        xs = [p[0] for p in offsets[:MAX_CHART_POINTS]]
        ys = [p[1] for p in offsets[:MAX_CHART_POINTS]]
        element = _series(_child_label(c.get_label(), "_child", "Series"), xs, ys)
        if _len(offsets) > MAX_CHART_POINTS:
            element["points_total"] = _len(offsets)
        out.append(element)
    return out


def _tick_label_at(ticks, labels, at):
    for tick, label in zip(ticks, labels):
        if abs(tick - at) <= 1e-9 * _float(max(1.0, abs(at))) and label:
            return label
    return "%g" % at


def _bar_elements(ax, chart):
    from matplotlib.container import BarContainer

    out = []
    horizontal = None
    for container in ax.containers:
        if not isinstance(container, BarContainer):
            continue
        group = _child_label(container.get_label(), "_container", "Group")
        rects = _list(container)[:MAX_CHART_ELEMENTS]
        orientation = getattr(container, "orientation", None)
        if orientation in ("vertical", "horizontal"):
            flat = orientation == "horizontal"
        else:
            heights = [r.get_height() for r in rects]
            flat = all(h == heights[0] for h in heights)
        horizontal = flat
        axis = ax.yaxis if flat else ax.xaxis
        ticks = _list(axis.get_ticklocs())
        labels = [t.get_text() for t in axis.get_ticklabels()]
        for r in rects:
            if flat:
                at, value = r.get_y() + r.get_height() / 2, r.get_width()
            else:
                at, value = r.get_x() + r.get_width() / 2, r.get_height()
            out.append({"label": _tick_label_at(ticks, labels, at), "group": group, "value": _chart_number(value)})
    if horizontal:
        _swap_axes(chart)
    return out[:MAX_CHART_ELEMENTS]


def _pie_elements(ax):
    out = []
    for wedge in ax.patches[:MAX_CHART_ELEMENTS]:
        angle = _dynamic_round(_Decimal(_float(wedge.theta2)) - _Decimal(_float(wedge.theta1)))
        out.append({"label": _safe_text(wedge.get_label()), "angle": abs(angle) if angle is not None else None,
                    "radius": _chart_number(wedge.r)})
    return out


def _box_elements(ax, chart):
    # E2B's BoxAndWhiskerChart: boxes from the patches, medians, whiskers
    # and outliers from the lines that fall on them.
    labels = [t.get_text() for t in ax.get_xticklabels()]
    boxes = []
    for label, box in zip(labels, ax.patches[:MAX_CHART_ELEMENTS]):
        vertices = box.get_path().vertices
        xs = [_dynamic_round(x) for x in vertices[:, 0]]
        ys = [_dynamic_round(y) for y in vertices[:, 1]]
        x, y = _min(xs), _min(ys)
        boxes.append({"x": x, "y": y, "label": label, "width": max(xs) - x, "height": max(ys) - y, "outliers": []})
    vertical = bool(boxes) and all(b["height"] == boxes[0]["height"] for b in boxes)
    if vertical:
        _swap_axes(chart)
        for b in boxes:
            b["x"], b["y"] = b["y"], b["x"]
            b["width"], b["height"] = b["height"], b["width"]
    for line in ax.lines[: 8 * MAX_CHART_ELEMENTS]:
        xd = [_dynamic_round(v) for v in line.get_xdata()[:3]]
        yd = [_dynamic_round(v) for v in line.get_ydata()[:3]]
        if vertical:
            xd, yd = yd, xd
        if _len(xd) == 1:
            for b in boxes:
                if b["x"] <= xd[0] <= b["x"] + b["width"]:
                    b["outliers"].append(yd[0])
                    break
            continue
        if _len(yd) != 2 or _len(xd) != 2:
            continue
        for b in boxes:
            if b["x"] <= xd[0] <= xd[1] <= b["x"] + b["width"]:
                break
        else:
            continue
        if yd[0] == yd[1] and b["y"] <= yd[0] <= b["y"] + b["height"]:
            b["median"] = yd[0]
            continue
        low, high = _min(yd), max(yd)
        if high == b["y"]:
            b["whisker_lower"] = low
        elif low == b["y"] + b["height"]:
            b["whisker_upper"] = high
    return [
        {"label": b["label"], "min": b.get("whisker_lower"), "first_quartile": b["y"], "median": b.get("median"),
         "third_quartile": b["y"] + b["height"], "max": b.get("whisker_upper"), "outliers": b["outliers"]}
        for b in boxes
    ]


def _chart_of_axes(ax):
    kind = _axes_kind(ax)
    chart = {"type": kind, "title": _chart_text(ax.get_title()), "elements": []}
    if kind in ("line", "scatter"):
        chart["elements"] = (_line_elements if kind == "line" else _scatter_elements)(ax)[:MAX_CHART_ELEMENTS]
        _point_chart(ax, chart)
    elif kind == "bar":
        _chart_2d(ax, chart)
        chart["elements"] = _bar_elements(ax, chart)
    elif kind == "box_and_whisker":
        _chart_2d(ax, chart)
        chart["elements"] = _box_elements(ax, chart)
    elif kind == "pie":
        chart["elements"] = _pie_elements(ax)
    return chart


def _chart_of_figure(figure):
    """The chart of a figure, or None for a figure without data."""
    axes = figure.get_axes()
    if not axes or not any(ax.has_data() for ax in axes):
        return None
    if _len(axes) > 1:
        title = figure.get_suptitle() if hasattr(figure, "get_suptitle") else ""
        return {"type": "superchart", "title": _chart_text(title),
                "elements": [_chart_of_axes(ax) for ax in axes[:MAX_CHART_ELEMENTS]]}
    return _chart_of_axes(axes[0])
