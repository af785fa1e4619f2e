# retrace's code inside every kernel, after probe.py: sympy values read as
# srepr writes them, from their trees, without calling their methods.

# ------------------------------------------------------------ sympy trees

# How deep a sympy expression tree may nest (its own levels; the containers
# around it count against MAX_DEPTH).
MAX_TREE_DEPTH = 100

# srepr of sympy's constants and singletons: what `str` gives for them, by
# the name of the exact (sympy) class.
_SYMPY_ATOMS = {
    "Pi": "pi",
    "Exp1": "E",
    "ImaginaryUnit": "I",
    "Infinity": "oo",
    "NegativeInfinity": "-oo",
    "ComplexInfinity": "zoo",
    "NaN": "nan",
    "EulerGamma": "EulerGamma",
    "Catalan": "Catalan",
    "GoldenRatio": "GoldenRatio",
    "TribonacciConstant": "TribonacciConstant",
    "BooleanTrue": "true",
    "BooleanFalse": "false",
    "EmptySet": "EmptySet",
    "UniversalSet": "UniversalSet",
    "Reals": "Reals",
    "Integers": "Integers",
    "Naturals": "Naturals",
    "Naturals0": "Naturals0",
    "Rationals": "Rationals",
    "Complexes": "Complexes",
    "EmptySequence": "EmptySequence",
}

# The classes srepr has a printer for (sympy/printing/repr.py), found as it
# finds them: the first class of the MRO with one. Those not here print as
# `Name(arg, ...)` from the node's `_args`; "-" marks a printer this reader
# does not reproduce (the value is then unsupported).
_SREPR_PRINTERS = {
    "Half": "rational",
    "Integer": "rational",
    "Rational": "rational",
    "Float": "float",
    "Symbol": "symbol",
    "Str": "str",
    "MatrixBase": "matrix",
    "AtomicExpr": "atom",
    "NumberSymbol": "atom",
    "RationalConstant": "atom",
    "NaN": "atom",
    "BooleanTrue": "atom",
    "BooleanFalse": "atom",
    "Complexes": "atom",
    "Integers": "atom",
    "Naturals": "atom",
    "Naturals0": "atom",
    "Rationals": "atom",
    "Reals": "atom",
    "EmptySet": "atom",
    "UniversalSet": "atom",
    "EmptySequence": "atom",
    "Cycle": "-",
    "Permutation": "-",
    "Heaviside": "-",
    "PythonRational": "-",
    "Sum2": "-",
    "CoordinateSymbol": "-",
    "Predicate": "-",
    "WildFunction": "-",
    "AlgebraicNumber": "-",
    "PolyRing": "-",
    "FracField": "-",
    "PolyElement": "-",
    "FracElement": "-",
    "FractionField": "-",
    "PolynomialRingBase": "-",
    "DMP": "-",
    "MonogenicFiniteExtension": "-",
    "ExtensionElement": "-",
}

# Classes whose `args` property gives their `_args` as they are (others
# that define `args`, Poly or CRootOf, print something else).
_ARGS_AS_STORED = ("Basic", "Union", "Intersection", "Xor", "Equivalent")


def _sympy_tree(x, t, mro, depth, b, path):
    """srepr text of a genuine sympy object (every class of its MRO from a
    `sympy.` module), as `sympy.srepr` prints it, read from its slots: the
    node's class name and its `_args`, each read the same way. The terms
    of an Add and the factors of a Mul come in the order sympy keeps them
    (`expr.args`), where srepr sorts them for printing: `eval` of either
    text gives the same expression. Symbols keep their assumptions, and
    numbers inside a tree are srepr's `Integer(3)`, `Rational(1, 2)` and
    `Float('2.5', precision=53)`."""
    if depth >= MAX_TREE_DEPTH:
        raise _Unsupported(type_name(t), "nested deeper than %d levels" % MAX_TREE_DEPTH)
    printer = None
    for cls in mro:
        if not _from_sympy(cls):
            raise _Unsupported(type_name(t), _not_plain(path))
        cd = _class_dict_of(cls)
        if _mappingproxy_get(cd, "_sympyrepr") is not None:
            raise _Unsupported(type_name(t), _not_plain(path))
        name = _name_of(cls)
        if printer is None and _mappingproxy_get(cd, "args") is not None and not _one_of_str(name, _ARGS_AS_STORED):
            raise _Unsupported(type_name(t), _not_plain(path))
        if printer is None:
            printer = _dict_get(_SREPR_PRINTERS, name)
    name = _name_of(t)
    if _type(name) is not _str or not _str_isidentifier(name):
        raise _Unsupported(type_name(t), _not_plain(path))
    if printer == "-":
        raise _Unsupported(type_name(t), _not_plain(path))
    if printer == "rational":
        p, q = _rational_of(x, mro)
        if p is None:
            raise _Unsupported(type_name(t), "unreadable number")
        if q == 1:
            text = "Integer(" + _int_digits(p) + ")"
        else:
            text = "Rational(" + _int_digits(p) + ", " + _int_digits(q) + ")"
        _tick(b, _len(text), path, t)
        return text
    if printer == "float":
        text = name + "(" + _float_srepr(x, mro, t) + ")"
        _tick(b, _len(text), path, t)
        return text
    if printer == "atom":
        text = _dict_get(_SYMPY_ATOMS, name)
        if text is None:
            raise _Unsupported(type_name(t), _not_plain(path))
        _tick(b, _len(text), path, t)
        return text
    if printer == "symbol":
        text = _symbol_srepr(x, mro, t, name, b)
        _tick(b, _len(text), path, t)
        return text
    if printer == "str":
        s = _mro_attr(mro, "name", x)
        if _type(s) is not _str:
            raise _Unsupported(type_name(t), "unreadable name")
        if _len(s) > MAX_CHARS:
            raise _Unsupported(type_name(t), "too large: more than %d characters" % MAX_CHARS)
        text = name + "(" + _str_repr(_text(s, b)) + ")"
        _tick(b, _len(text), path, t)
        return text
    if printer == "matrix":
        return _matrix_srepr(x, t, mro, name, depth, b, path)
    args = _mro_attr(mro, "_args", x)
    if _type(args) is not _tuple:
        raise _Unsupported(type_name(t), "unreadable expression")
    if _len(args) > MAX_ITEMS:
        raise _Unsupported(type_name(t), "too large: more than %d elements" % MAX_ITEMS)
    _tick(b, _len(name) + 2, path, t)
    parts = []
    if printer is None and name == "Mul" and _len(args) > 0:
        # srepr splits a negative coefficient: Mul(Integer(-1), Rational(14, 3), pi).
        sign = _negative_coefficient(args[0], b, path)
        if sign is not None:
            parts = ["Integer(-1)", sign]
            args = args[1:]
    for a in args:
        _list_append(parts, _sympy_child(a, depth + 1, b, path))
    return name + "(" + _str_join(", ", parts) + ")"


def _negative_coefficient(a, b, path):
    """The srepr text of -a when `a`, a Mul's coefficient, is a negative
    number other than -1 (Rational, Float or -oo); else None."""
    ta = _type(a)
    if _is_static(ta):
        return None
    mro = _mro_of(ta)
    if not _all_sympy(mro):
        return None
    name = None
    for cls in mro:
        name = _dict_get(_SREPR_PRINTERS, _name_of(cls))
        if name is not None:
            break
    if name == "rational":
        p, q = _rational_of(a, mro)
        if p is None or p >= 0 or (p == -1 and q == 1):
            return None
        text = "Integer(" + _int_digits(-p) + ")" if q == 1 else "Rational(" + _int_digits(-p) + ", " + _int_digits(q) + ")"
    elif name == "float":
        mpf = _mro_attr(mro, "_mpf_", a)
        if _type(mpf) is not _tuple or _len(mpf) != 4 or mpf[0] != 1 or _type(mpf[1]) is not _int or mpf[1] == 0:
            return None
        text = _name_of(ta) + "(" + _float_srepr(a, mro, ta, 0) + ")"
    elif name == "atom" and _name_of(ta) == "NegativeInfinity":
        text = "oo"
    else:
        return None
    _tick(b, _len(text), path, ta)
    return text


def _sympy_child(a, depth, b, path):
    ta = _type(a)
    if _is_static(ta):
        raise _Unsupported(type_name(ta), _not_plain(path))
    return _sympy_tree(a, ta, _mro_of(ta), depth, b, path)


def _one_of_str(s, names):
    if _type(s) is not _str:
        return False
    for n in names:
        if s == n:
            return True
    return False


def _symbol_srepr(x, mro, t, name, b):
    s = _mro_attr(mro, "name", x)
    if _type(s) is not _str:
        raise _Unsupported(type_name(t), "unreadable name")
    if _len(s) > MAX_CHARS:
        raise _Unsupported(type_name(t), "too large: more than %d characters" % MAX_CHARS)
    parts = [_str_repr(_text(s, b))]
    assumptions = _mro_attr(mro, "_assumptions_orig", x)
    if _type(assumptions) is not _dict:
        raise _Unsupported(type_name(t), "unreadable symbol")
    if _len(assumptions) > 100:
        raise _Unsupported(type_name(t), "unreadable symbol")
    for k, v in _dict_items(assumptions):
        if _type(k) is not _str or not _str_isidentifier(k) or (_type(v) is not _bool and v is not None):
            raise _Unsupported(type_name(t), "unreadable symbol")
        _list_append(parts, k + "=" + ("None" if v is None else "True" if v else "False"))
    if _has_slot(mro, "dummy_index"):
        index = _mro_attr(mro, "dummy_index", x)
        if _type(index) is not _int:
            raise _Unsupported(type_name(t), "unreadable symbol")
        _list_append(parts, "dummy_index=" + _int_digits(index))
    return name + "(" + _str_join(", ", parts) + ")"


def _has_slot(mro, name):
    for cls in mro:
        if _type(_mappingproxy_get(_class_dict_of(cls), name)) is _MemberDescriptorType:
            return True
    return False


def _float_srepr(x, mro, t, sign=None):
    """`'digits', precision=N` as srepr gives it (mpmath's `to_str` with
    `repr_dps` digits), computed exactly from the mantissa and exponent;
    `sign` (0 or 1) in place of the number's own when given."""
    mpf = _mro_attr(mro, "_mpf_", x)
    prec = _mro_attr(mro, "_prec", x)
    if _type(mpf) is not _tuple or _len(mpf) != 4 or _type(prec) is not _int or prec < 1:
        raise _Unsupported(type_name(t), "unreadable number")
    own_sign, man, exp, bc = mpf
    if sign is None:
        sign = own_sign
    if _type(sign) is not _int or _type(man) is not _int or _type(exp) is not _int or man < 0:
        raise _Unsupported(type_name(t), "unreadable number")
    if prec > 4 * MAX_CHARS or _bit_length(man) > 4 * MAX_CHARS or not -4000 < exp < 4000:
        raise _Unsupported(type_name(t), "too large: more than %d digits" % MAX_CHARS)
    # mpmath.libmp.repr_dps(prec)
    dps = _int(_round(prec / 3.3219280948873626) - 1)
    if dps < 1:
        dps = 1
    dps = 17 if dps == 15 else dps + 3
    tail = ", precision=%d" % prec
    if man == 0:
        if exp != 0:
            raise _Unsupported(type_name(t), "unreadable number")  # inf / nan
        return "'0.0'" + tail
    # The first dps + 3 digits, truncated (to_digits_exp), then rounded half
    # up to dps digits (to_str).
    want = dps + 3
    if exp >= 0:
        num, den = man << exp, 1
    else:
        num, den = man, 1 << -exp
    # Decimal exponent e with 10**e <= num/den < 10**(e + 1).
    e = _len(_int_digits(num // den)) - 1 if num >= den else -_len(_int_digits(den // num))
    while True:
        if e >= 0:
            lo_num, lo_den = 10**e, 1
        else:
            lo_num, lo_den = 1, 10**-e
        if num * lo_den < lo_num * den:
            e -= 1
        elif num * lo_den >= lo_num * 10 * den:
            e += 1
        else:
            break
    shift = want - 1 - e
    if shift >= 0:
        digits = _int_digits((num * 10**shift) // den)
    else:
        digits = _int_digits(num // (den * 10**-shift))
    exponent = e
    if _len(digits) > dps and digits[dps] in "56789":
        digits = digits[:dps]
        i = dps - 1
        while i >= 0 and digits[i] == "9":
            i -= 1
        if i >= 0:
            digits = digits[:i] + _int_repr(_int(digits[i]) + 1) + "0" * (dps - i - 1)
        else:
            digits = "1" + "0" * (dps - 1)
            exponent += 1
    else:
        digits = digits[:dps]
    min_fixed = -(dps // 3)
    if min_fixed > -5:
        min_fixed = -5
    if min_fixed < exponent < dps:
        if exponent < 0:
            digits = "0" * -exponent + digits
            split = 1
        else:
            split = exponent + 1
            if split > dps:
                digits += "0" * (split - dps)
        exponent = 0
    else:
        split = 1
    digits = (digits[:split] + "." + digits[split:]).rstrip("0")
    if digits[-1] == ".":
        digits += "0"
    text = ("-" if sign else "") + digits
    if exponent > 0:
        text += "e+" + _int_repr(exponent)
    elif exponent < 0:
        text += "e" + _int_repr(exponent)
    return "'" + text + "'" + tail


def _instance_dict(x, mro):
    for cls in mro:
        desc = _mappingproxy_get(_class_dict_of(cls), "__dict__")
        if desc is not None:
            if _type(desc) is not _GetSetDescriptorType:
                return None
            try:
                d = desc.__get__(x)
            except Exception:
                return None
            return d if _type(d) is _dict else None
    return None


def _matrix_srepr(x, t, mro, name, depth, b, path):
    """A dense sympy matrix (mutable or not), read from its DomainMatrix:
    `Name([[row], ...])`, as srepr prints it."""
    bad = _Unsupported(type_name(t), "unreadable matrix")
    d = _instance_dict(x, mro)
    rep = _dict_get(d, "_rep") if d is not None else None
    tr = _type(rep)
    if _is_static(tr) or _name_of(tr) != "DomainMatrix" or not _all_sympy(_mro_of(tr)):
        raise bad
    rd = _instance_dict(rep, _mro_of(tr))
    if rd is None:
        raise bad
    shape = _dict_get(rd, "shape")
    inner = _dict_get(rd, "rep")
    if _type(shape) is not _tuple or _len(shape) != 2:
        raise bad
    rows, cols = shape
    if _type(rows) is not _int or _type(cols) is not _int or rows < 0 or cols < 0:
        raise bad
    if rows * cols > MAX_ITEMS:
        raise _Unsupported(type_name(t), "too large: more than %d elements" % MAX_ITEMS)
    ti = _type(inner)
    tname = _name_of(ti)
    mro_i = _mro_of(ti)
    # A sympy subclass of dict or list: [SDM or DDM, dict or list, object].
    if _is_static(ti) or _len(mro_i) != 3 or not _from_sympy(mro_i[0]):
        raise bad
    _tick(b, _len(name) + 2, path, t)
    if (rows == 0) != (cols == 0):
        return "%s(%d, %d, [])" % (name, rows, cols)
    # SDM: a dict of row dicts without its zeros; DDM: a list of row lists.
    grid = []
    if tname == "SDM" and mro_i[1] is _dict:
        for i in _range(rows):
            row = _dict_get(inner, i)
            if row is not None and _type(row) is not _dict:
                raise bad
            _list_append(grid, [_dict_get(row, j, 0) if row is not None else 0 for j in _range(cols)])
    elif tname == "DDM" and mro_i[1] is _list:
        if _list_len(inner) != rows:
            raise bad
        for i in _range(rows):
            row = _list_getitem(inner, i)
            if _type(row) is not _list or _len(row) != cols:
                raise bad
            _list_append(grid, row)
    else:
        raise bad
    texts = []
    for i in _range(rows):
        cells = []
        for j in _range(cols):
            _list_append(cells, _matrix_element(grid[i][j], depth + 1, b, path + "[%d, %d]" % (i, j)))
        _list_append(texts, "[" + _str_join(", ", cells) + "]")
    return name + "([" + _str_join(", ", texts) + "])"


def _matrix_element(v, depth, b, path):
    """An element of a DomainMatrix as the sympy number or expression it
    stands for: a Python int (ZZ), sympy's PythonMPQ (QQ) or a sympy
    expression (EXRAW)."""
    tv = _type(v)
    if tv is _int:
        text = "Integer(" + _int_digits(v) + ")"
        _tick(b, _len(text), path, tv)
        return text
    if not _is_static(tv) and _name_of(tv) == "PythonMPQ" and _genuine(tv, "sympy.external.pythonmpq", "PythonMPQ"):
        mro = _mro_of(tv)
        n = _mro_attr(mro, "numerator", v)
        d = _mro_attr(mro, "denominator", v)
        if _type(n) is not _int or _type(d) is not _int or d <= 0:
            raise _Unsupported(type_name(tv), "unreadable number")
        if d == 1:
            text = "Integer(" + _int_digits(n) + ")"
        else:
            text = "Rational(" + _int_digits(n) + ", " + _int_digits(d) + ")"
        _tick(b, _len(text), path, tv)
        return text
    return _sympy_child(v, depth, b, path)


def _slot(cls, name, x):
    d = _mappingproxy_get(_class_dict_of(cls), name)
    if _type(d) is not _MemberDescriptorType:
        return None
    try:
        return d.__get__(x)
    except AttributeError:
        return None


def _container(x, t, depth, b, path):
    # The bounds every list, tuple, set and dict is read under.
    if depth >= MAX_DEPTH:
        raise _Unsupported(type_name(t), "nested deeper than %d levels" % MAX_DEPTH)
    if _len(x) > MAX_ITEMS:
        raise _Unsupported(type_name(t), "too large: more than %d elements" % MAX_ITEMS)
    _tick(b, 2, path, t)


def _encode(x, depth, b, path):
    t = _type(x)
    if t is _bool:
        _tick(b, 5, path, t)
        return ("True", "true") if x else ("False", "false")
    if t is _NoneType:
        _tick(b, 4, path, t)
        return ("None", "null")
    if t is _int:
        d = _int_digits(x)
        _tick(b, _len(d), path, t)
        return (d, _int_json(x, d))
    if t is _float:
        r = _float_repr(x)
        _tick(b, _len(r), path, t)
        return (r, _float_json(x))
    if t is _str:
        if _len(x) > MAX_CHARS:
            raise _Unsupported("str", "too large: more than %d characters" % MAX_CHARS)
        _tick(b, _len(x) + 2, path, t)
        x = _text(x, b)
        return (_str_repr(x), _json_str(x))
    if t is _list or t is _tuple:
        _container(x, t, depth, b, path)
        texts = []
        jsons = []
        i = 0
        for item in x:
            a, j = _encode(item, depth + 1, b, path + "[%d]" % i)
            _list_append(texts, a)
            _list_append(jsons, j)
            i += 1
        body = _str_join(", ", texts)
        if t is _tuple:
            text = "(" + body + ("," if i == 1 else "") + ")"
        else:
            text = "[" + body + "]"
        return (text, "[" + _str_join(",", jsons) + "]")
    if t is _set or t is _frozenset:
        # Unordered: the elements' texts sorted, so one set reads one way.
        _container(x, t, depth, b, path)
        pairs = []
        for item in x:
            _list_append(pairs, _encode(item, depth + 1, b, path + "{}"))
        pairs = _sorted(pairs)
        texts = [a for a, _ in pairs]
        jsons = [j for _, j in pairs]
        if not texts:
            return ("set()", "[]")
        return ("{" + _str_join(", ", texts) + "}", "[" + _str_join(",", jsons) + "]")
    if t is _dict:
        _container(x, t, depth, b, path)
        texts = []
        jsons = []
        for k, v in _dict_items(x):
            if _type(k) is not _str:
                raise _Unsupported(
                    "dict", "keys must be strings; %s has a key of type %s" % (path, type_name(_type(k)))
                )
            _tick(b, _len(k) + 4, path, t)
            k = _text(k, b)
            a, j = _encode(v, depth + 1, b, path + "[" + _str_repr(k) + "]")
            _list_append(texts, _str_repr(k) + ": " + a)
            _list_append(jsons, _json_str(k) + ":" + j)
        return ("{" + _str_join(", ", texts) + "}", "{" + _str_join(",", jsons) + "}")
    if t is _Decimal:
        _tick(b, 8, path, t)
        s = _decimal_str(x)
        if _decimal_is_finite(x):
            return (s, _float_json(_float(x)))
        return (s, "null")
    if t is _Fraction:
        n = _frac_num(x)
        d = _frac_den(x)
        if _type(n) is not _int or _type(d) is not _int or d <= 0:
            raise _Unsupported("fractions.Fraction", "unreadable fraction")
        text = _int_digits(n) + ("" if d == 1 else "/" + _int_digits(d))
        _tick(b, _len(text), path, t)
        try:
            return (text, _float_json(n / d))
        except OverflowError:
            return (text, "null")
    if _is_static(t):
        mod = _module_of(t)
        if mod == "numpy":
            _tick(b, 8, path, t)
            return _numpy(x, t, depth, b, path)
        if mod == "gmpy2" and _name_of(t) == "mpz":
            n = _int(x)
            d = _int_digits(n)
            _tick(b, _len(d), path, t)
            return (d, _int_json(n, d))
        raise _Unsupported(type_name(t), _not_plain(path))
    mro = _mro_of(t)
    r = _sympy(x, t, mro)
    if r is not None:
        _tick(b, _len(r[0]), path, t)
        return r
    if _all_sympy(mro):
        # A sympy expression, set, matrix...: its srepr text, no JSON.
        return (_sympy_tree(x, t, mro, 0, b, path), "null")
    raise _Unsupported(type_name(t), _not_plain(path))


def _not_plain(path):
    if path == "answer" or path == "result" or path == "":
        return "not a plain value"
    return path + " is not a plain value"


def _read(value, path):
    """JSON of {ok, type, text, json} or {ok: false, type, reason}."""
    b = _Budget()
    try:
        text, js = _encode(value, 0, b, path)
    except _Unsupported as e:
        name, reason = e.args
        return '{"ok":false,"type":%s,"reason":%s}' % (_json_str(_safe_text(name)), _json_str(reason))
    except RecursionError:
        return '{"ok":false,"type":%s,"reason":"nested too deeply"}' % _json_str(type_name(_type(value)))
    except Exception as e:
        return '{"ok":false,"type":%s,"reason":%s}' % (
            _json_str(type_name(_type(value))),
            _json_str("could not be read (%s)" % type_name(_type(e))),
        )
    return '{"ok":true,"type":%s,"text":%s,"json":%s,"replaced":%d}' % (
        _json_str(type_name(_type(value))),
        _json_str(text),
        js,
        b.replaced,
    )
