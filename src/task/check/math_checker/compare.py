# The math checker's comparison of two readings (after reading.py) and
# rule 1, retrace's own.

# ---- comparison ---------------------------------------------------------
def has_float(x):
    if isinstance(x, MatrixBase):
        return any(has_float(y) for y in x)
    return isinstance(x, sympy.Basic) and x.has(Float)

def is_zero_exact(d):
    if d == 0:
        return True
    try:
        if sympy.simplify(d) == 0:
            return True
    except (ValueError, TypeError, AttributeError, NotImplementedError, RecursionError):
        pass
    if getattr(d, "is_number", False):
        try:
            v = complex(d.evalf(50))
            return abs(v) < 1e-40
        except (TypeError, ValueError, ArithmeticError):
            return False
    return False

def scalar_eq(e, a, tol):
    """(ok, used_tolerance)"""
    if not (isinstance(e, sympy.Expr) and isinstance(a, sympy.Expr)):
        try:
            return (bool(e == a), False)
        except Exception:
            return (False, False)
    if e == a and not has_float(a):
        return (True, False)
    if e.has(oo, -oo, zoo, nan) or a.has(oo, -oo, zoo, nan):
        return (e == a, False)
    inexact = has_float(a) or has_float(e)
    if inexact:
        if e.is_number and a.is_number:
            try:
                ve = complex(e.evalf(30))
                va = complex(a.evalf(30))
            except (TypeError, ValueError, ArithmeticError):
                return (False, True)
            bound = tol * abs(ve) if ve != 0 else tol
            return (abs(va - ve) <= bound, True)
        try:
            d = sympy.nsimplify(a - e, rational=True)
            return (is_zero_exact(d), True)
        except (ValueError, TypeError, AttributeError, NotImplementedError):
            return (False, True)
    try:
        return (is_zero_exact(a - e), False)
    except (TypeError, ValueError, AttributeError):
        return (False, False)

def as_text(v):
    if isinstance(v, Text):
        return v.s
    if isinstance(v, Symbol):
        return v.name.casefold()
    if isinstance(v, sympy.logic.boolalg.BooleanAtom):
        return str(bool(v)).casefold()
    return None

def seq_items(v):
    """Ordered items of an answer value (tuple / list / vector)."""
    if isinstance(v, Coll):
        return v.items
    if isinstance(v, MatrixBase) and (v.rows == 1 or v.cols == 1):
        return list(v)
    return None

def cmp(e, a, tol):
    """-> (ok, kind, used_tol); kind is the structure that decided."""
    if isinstance(e, Text):
        ta = as_text(a)
        return (ta is not None and strip_punct(ta) == strip_punct(e.s), "text", False)
    if isinstance(a, Text):
        te = as_text(e)
        if te is not None:
            return (strip_punct(te) == strip_punct(a.s), "text", False)
        return (False, "text", False)
    if isinstance(e, Eq):
        if isinstance(a, Eq):
            return (eq_eq(e, a, tol), "equation", False)
        if isinstance(e.lhs, Symbol):
            ok, _, t = cmp(e.rhs, a, tol)
            return (ok, "equation", t)
        return (False, "equation", False)
    if isinstance(a, Eq):
        if isinstance(a.lhs, Symbol):
            ok, _, t = cmp(e, a.rhs, tol)
            return (ok, "equation", t)
        if isinstance(a.rhs, Symbol):
            ok, _, t = cmp(e, a.lhs, tol)
            return (ok, "equation", t)
        return (False, "equation", False)
    if isinstance(e, Coll):
        if e.kind == "tuple":
            if isinstance(a, Interval) and len(e.items) == 2 and \
                    a.left_open and a.right_open:
                return seq_eq(e.items, [a.start, a.end], tol, "tuple")
            items = seq_items(a)
            if items is None or (isinstance(a, Coll) and a.kind in ("set",)):
                return (False, "tuple", False)
            return seq_eq(e.items, items, tol, "tuple")
        kind = "set" if e.kind == "set" else "multiple"
        if e.kind == "list":
            kind = "multiple"
        if isinstance(a, Coll):
            return set_eq(e.items, a.items, tol, kind)
        if isinstance(a, SympyFiniteSet):
            return set_eq(e.items, list(a.args), tol, kind)
        if len(e.items) == 1:
            ok, _, t = cmp(e.items[0], a, tol)
            return (ok, kind, t)
        return (False, kind, False)
    if isinstance(e, (Interval, Union)):
        if isinstance(a, (Interval, Union)):
            return interval_eq(e, a, tol)
        if isinstance(e, Interval) and e.left_open and e.right_open and \
                isinstance(a, Coll) and a.kind in ("tuple", "list") and len(a.items) == 2:
            return seq_eq([e.start, e.end], a.items, tol, "tuple")
        return (False, "interval", False)
    if isinstance(e, MatrixBase):
        if isinstance(a, MatrixBase):
            if a.shape != e.shape:
                if (1 in a.shape and 1 in e.shape and len(a) == len(e)):
                    return seq_eq(list(e), list(a), tol, "matrix")
                return (False, "matrix", False)
            return seq_eq(list(e), list(a), tol, "matrix")
        items = seq_items(a)
        if items is not None and (e.rows == 1 or e.cols == 1):
            return seq_eq(list(e), items, tol, "matrix")
        if isinstance(a, Coll) and all(isinstance(r, Coll) for r in a.items):
            flat = [x for r in a.items for x in r.items]
            if len(a.items) == e.rows and len(flat) == len(e):
                return seq_eq(list(e), flat, tol, "matrix")
        return (False, "matrix", False)
    if isinstance(e, SympySet) or isinstance(a, SympySet):
        return (e == a, "set", False)
    if isinstance(a, Coll):
        if len(a.items) == 1 and a.kind in ("list", "set", "multi"):
            ok, _, t = cmp(e, a.items[0], tol)
            return (ok, "multiple", t)
        return (False, "multiple", False)
    if isinstance(a, MatrixBase):
        return (False, "matrix", False)
    ok, t = scalar_eq(e, a, tol)
    return (ok, "numeric" if t else "exact", t)

def strip_punct(s):
    return re.sub(r"[\s.,;:'\"()\\]", "", s)

def eq_eq(e, a, tol):
    if cmp(e.lhs, a.lhs, tol)[0] and cmp(e.rhs, a.rhs, tol)[0]:
        return True
    if cmp(e.lhs, a.rhs, tol)[0] and cmp(e.rhs, a.lhs, tol)[0]:
        return True
    try:
        de, da = e.lhs - e.rhs, a.lhs - a.rhs
        if is_zero_exact(de - da) or is_zero_exact(de + da):
            return True
        ratio = sympy.simplify(de / da)
        return bool(ratio.is_number and ratio != 0 and ratio.is_finite)
    except (TypeError, ValueError, AttributeError, ZeroDivisionError):
        return False

def seq_eq(es, as_, tol, kind):
    if len(es) != len(as_):
        return (False, kind, False)
    used = False
    for x, y in zip(es, as_):
        ok, _, t = cmp(x, y, tol)
        used = used or t
        if not ok:
            return (False, kind, used)
    return (True, kind, used)

def set_eq(es, as_, tol, kind):
    if len(es) != len(as_):
        return (False, kind, False)
    left = list(as_)
    used = False
    for x in es:
        for j, y in enumerate(left):
            ok, _, t = cmp(x, y, tol)
            if ok:
                used = used or t
                del left[j]
                break
        else:
            return (False, kind, used)
    return (True, kind, used)

def interval_eq(e, a, tol):
    ei = list(e.args) if isinstance(e, Union) else [e]
    ai = list(a.args) if isinstance(a, Union) else [a]
    if len(ei) != len(ai):
        return (False, "interval", False)
    used = False
    for x, y in zip(ei, ai):
        if not (isinstance(x, Interval) and isinstance(y, Interval)):
            if x != y:
                return (False, "interval", used)
            continue
        if (x.left_open, x.right_open) != (y.left_open, y.right_open):
            return (False, "interval", used)
        ok, _, t = seq_eq([x.start, x.end], [y.start, y.end], tol, "interval")
        used = used or t
        if not ok:
            return (False, "interval", used)
    return (True, "interval", used)

def div100(v):
    if isinstance(v, sympy.Expr):
        return v / 100
    return None

def compare_readings(er, ar, tol):
    e, a = er.value, ar.value
    ok, kind, used = cmp(e, a, tol)
    flags = er.flags | ar.flags
    if not ok and "percent" in flags and kind in ("exact", "numeric"):
        # 10\% expected: accept 10 (done above) or 0.1; 10% answered: 0.1
        for x, y in ((div100(e), a), (e, div100(a))):
            if x is None or y is None:
                continue
            ok2, kind2, used2 = cmp(x, y, tol)
            if ok2:
                ok, kind, used = ok2, kind2, used2
                break
    if not ok:
        return (False, "math:mismatch", used)
    if kind == "text":
        return (True, "math:text", used)
    for f in ("degrees", "percent", "units"):
        if f in flags:
            return (True, "math:" + f, used)
    return (True, "math:" + kind, used)

# ---- expected readings cache -------------------------------------------
expected_cache = {}

def read_expected(latex):
    hit = expected_cache.get(latex)
    if hit is not None:
        return hit
    if len(latex) > MAX_ANSWER_CHARS:
        raise Refused("expected text too long")
    s = latex.strip()
    inner = last_braced(s)
    if inner is not None:
        s = inner
    elif s.startswith("$") and s.endswith("$"):
        s = s.strip("$")
    r = read_math_text(s)
    r.value = norm_value(r.value)
    if len(expected_cache) > 512:
        expected_cache.clear()
    expected_cache[latex] = r
    return r

def show(v):
    try:
        if isinstance(v, Text):
            s = "text:" + v.s
        elif isinstance(v, MatrixBase):
            s = "Matrix([%s])" % ", ".join(
                "[%s]" % ", ".join(show(x) for x in v.row(i)) for i in range(v.rows))
        elif isinstance(v, Float) and v._prec <= 53:
            s = repr(float(v))
        elif isinstance(v, Coll):
            s = "%s(%s)" % (v.kind, ", ".join(show(x) for x in v.items))
        else:
            s = sympy.sstr(v)
    except (ValueError, TypeError, RecursionError):
        s = "<unprintable>"
    return s if len(s) <= OUT_CAP else s[:OUT_CAP] + "..."

# ---- rule 1: retrace ---------------------------------------------------
def retrace_rule(expected, answer, tol):
    out = {"correct": False, "parsed": False, "rule": "math:unparsed",
           "extracted": None, "normalized": None, "tolerance": None}
    try:
        er = read_expected(expected)
    except (Refused, Unreadable):
        out["rule"] = "math:expected_unparsed"
        return out
    if answer is None:
        out["rule"] = "math:no_answer"
        return out
    try:
        ar = read_answer(answer)
    except Refused:
        out["rule"] = "math:refused"
        return out
    except Unreadable:
        return out
    if ar is None:
        out["rule"] = "math:no_answer"
        return out
    out["parsed"] = True
    out["extracted"] = ar.extracted if ar.extracted is None or \
        len(ar.extracted) <= OUT_CAP else ar.extracted[:OUT_CAP] + "..."
    ar.value = norm_value(ar.value)
    out["normalized"] = show(ar.value)
    ok, rule, used = compare_readings(er, ar, tol)
    out["correct"] = ok
    out["rule"] = rule
    out["tolerance"] = tol if used else None
    return out
