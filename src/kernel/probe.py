# retrace's own code inside every kernel: the answer reader and the state
# inspector. Run once per kernel start, before any task code, as a silent
# execution, in a private namespace whose __builtins__ is a copy taken now:
# later cells may monkeypatch builtins, json, type, print or sys.stdout, and
# none of that reaches this code. Nothing here calls a method that user code
# can define (__repr__, __str__, __eq__, __getattr__, properties, __float__
# of a subclass): values are recognised by exact type identity, classes and
# slots are read through descriptors of `type` and `object` captured now.
#
# Entry points are two names in the builtins module (not in the user's
# namespace, so the task's variables stay exactly what its code made); a
# cell that rebinds them or removes the reader's hooks has them put back
# after it (see `_rearm`):
#   __retrace_answer__()        -> envelope with this cell's answer
#   __retrace_inspect__(hexq)   -> envelope with a compact view of the state
# An envelope's repr is "retrace:" + JSON; the harness reads its text/plain.
#
# This file is the first of four (then probe_sympy.py, probe_cell.py and
# probe_install.py) that probe.rs joins, in that order, into one source.

import builtins as _builtins_mod
import sys as _sys_mod
import time as _time_mod
import math as _math_mod
import decimal as _decimal_mod
import fractions as _fractions_mod
import difflib as _difflib_mod
import keyword as _keyword_mod
import json.encoder as _json_encoder_mod
import re as _re_mod
import types as _types_mod

_builtins_dict = _builtins_mod.__dict__
_sys_modules = _sys_mod.modules
_monotonic = _time_mod.monotonic
_isfinite = _math_mod.isfinite
_ldexp = _math_mod.ldexp
_json_str = _json_encoder_mod.encode_basestring_ascii
_close_matches = _difflib_mod.get_close_matches
_keywords = frozenset(_keyword_mod.kwlist)
_Decimal = _decimal_mod.Decimal
_Fraction = _fractions_mod.Fraction
_ModuleType = _types_mod.ModuleType
_FunctionType = _types_mod.FunctionType
_BuiltinFunctionType = _types_mod.BuiltinFunctionType
_MemberDescriptorType = _types_mod.MemberDescriptorType
_GetSetDescriptorType = _types_mod.GetSetDescriptorType
_NoneType = type(None)

_type = type
_int, _float, _str, _bool, _list, _tuple, _dict = int, float, str, bool, list, tuple, dict
_set, _frozenset, _bytes, _range = set, frozenset, bytes, range
_len, _min, _sorted, _enumerate, _round = len, min, sorted, enumerate, round
_int_repr = int.__repr__
_float_repr = float.__repr__
_str_repr = str.__repr__
_str_join = str.join
_str_startswith = str.startswith
_str_isidentifier = str.isidentifier
_str_isascii = str.isascii
# A lone UTF-16 surrogate in a str is text that is not valid Unicode
# ('\ud800', or a byte that did not decode, '\udcff'): read as U+FFFD.
_surrogates_subn = _re_mod.compile("[\\ud800-\\udfff]").subn
_bit_length = int.bit_length
_dict_get = dict.get
_dict_pop = dict.pop
_dict_items = dict.items
_dict_keys = dict.keys
_mappingproxy_keys = type(type.__dict__).keys
_mappingproxy_get = type(type.__dict__).get
_dict_setitem = dict.__setitem__
_dict_contains = dict.__contains__
_list_append = list.append
_list_len = list.__len__
_list_getitem = list.__getitem__
_obj_getattribute = object.__getattribute__
_decimal_str = _Decimal.__str__
_decimal_is_finite = _Decimal.is_finite
_from_hex = bytes.fromhex
_bytes_decode = bytes.decode

_type_dict = type.__dict__
_mro_of = _type_dict["__mro__"].__get__
_class_dict_of = _type_dict["__dict__"].__get__
_flags_of = _type_dict["__flags__"].__get__
_name_of = _type_dict["__name__"].__get__
_qualname_of = _type_dict["__qualname__"].__get__
_module_of = _type_dict["__module__"].__get__
_module_dict_of = _ModuleType.__dict__["__dict__"].__get__
_frac_num = _Fraction.__dict__["_numerator"].__get__
_frac_den = _Fraction.__dict__["_denominator"].__get__

_HEAPTYPE = 1 << 9

from IPython import get_ipython as _get_ipython  # noqa: E402

_shell = _get_ipython()
_ExecutionResult = _sys_modules["IPython.core.interactiveshell"].ExecutionResult

# Bounds of one answer: element count, text size, nesting and time.
MAX_ITEMS = 10000
MAX_CHARS = 100000
MAX_DEPTH = 16
MAX_SECONDS = 2.0
# Digits beyond which an int is not converted (about MAX_CHARS digits).
MAX_INT_BITS = 332000


class _Unsupported(Exception):
    pass


class _Envelope:
    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text

    # IPython's pretty printer calls this instead of repr(): a cell that
    # replaced builtins.repr cannot garble the envelope.
    def _repr_pretty_(self, p, cycle):
        p.text(self.text)


def _envelope(text):
    return _Envelope("retrace:" + text)


# ------------------------------------------------------------ type names


def _safe_text(s, limit=200):
    if _type(s) is not _str:
        return "?"
    return s if _len(s) <= limit else s[:limit] + "..."


def _is_static(t):
    try:
        return not (_flags_of(t) & _HEAPTYPE)
    except BaseException:
        return False


def type_name(t):
    """`module.Qualname` read from the type object itself, never from the
    instance; C types of builtins as plain names (`int`), classes defined by
    code always with their module, so `__module__ = 'builtins'` shows."""
    try:
        mod = _module_of(t)
        qual = _qualname_of(t)
    except BaseException:
        return "?"
    mod = _safe_text(mod)
    qual = _safe_text(qual)
    static = _is_static(t)
    if static and mod == "builtins":
        return qual
    if static:
        return mod + "." + qual
    top = mod.split(".")[0] if _type(mod) is _str else mod
    if top in ("pandas", "numpy") and "." in mod:
        return top + "." + qual
    return mod + "." + qual


def _one_of(t, types):
    # Identity only: `t in (...)` would call a metaclass's __eq__.
    for u in types:
        if t is u:
            return True
    return False


def _genuine(t, module_name, attr):
    """Whether `t` is the class `attr` of the loaded module `module_name`."""
    m = _dict_get(_sys_modules, module_name)
    if _type(m) is not _ModuleType:
        return False
    return _dict_get(_module_dict_of(m), attr) is t


# ------------------------------------------------------------ serializer


class _Budget:
    __slots__ = ("items", "chars", "deadline", "replaced")

    def __init__(self):
        self.items = 0
        self.chars = 0
        self.deadline = _monotonic() + MAX_SECONDS
        self.replaced = 0


def _text(s, b):
    """`s` with each lone surrogate replaced by U+FFFD (counted in `b`): the
    value is read with its invalid text visible, as the harness keeps
    printed text (kernel/text.rs)."""
    if _str_isascii(s):
        return s
    fixed, n = _surrogates_subn("\ufffd", s)
    b.replaced += n
    return fixed


def _tick(b, chars, path, t):
    b.items += 1
    b.chars += chars
    if b.items > MAX_ITEMS:
        raise _Unsupported(type_name(t), "too large: more than %d elements" % MAX_ITEMS)
    if b.chars > MAX_CHARS:
        raise _Unsupported(type_name(t), "too large: more than %d characters" % MAX_CHARS)
    if not (b.items & 255) and _monotonic() > b.deadline:
        raise _Unsupported(type_name(t), "too slow to read")


def _int_digits(n):
    if _bit_length(n) > MAX_INT_BITS:
        raise _Unsupported("int", "too large: more than %d digits" % (MAX_CHARS,))
    try:
        return _int_repr(n)
    except ValueError:
        pass
    # Beyond sys.get_int_max_str_digits(): split into chunks of 4000 digits.
    neg = n < 0
    if neg:
        n = -n
    chunks = []
    base = 10**4000
    while n:
        n, r = divmod(n, base)
        _list_append(chunks, r)
    parts = [_int_repr(chunks[-1])]
    i = _len(chunks) - 2
    while i >= 0:
        _list_append(parts, _int_repr(chunks[i]).rjust(4000, "0"))
        i -= 1
    s = _str_join("", parts)
    return "-" + s if neg else s


def _int_json(n, digits):
    if _len(digits) <= 18:
        return digits
    try:
        f = _float(n)
    except OverflowError:
        return "null"
    return _float_json(f)


def _float_json(f):
    if not _isfinite(f):
        return "null"
    return _float_repr(f)


def _number(text, value_json):
    return (text, value_json)


def _numpy(x, t, depth, b, path):
    name = _name_of(t)
    if name in ("float64", "float32", "float16", "longdouble"):
        f = _float(x)
        text = _float_repr(f) if name == "float64" else _str(x)
        return (text, _float_json(f))
    if name in (
        "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "intc", "uintc", "longlong", "ulonglong", "intp", "uintp", "long", "ulong",
        "short", "ushort", "byte", "ubyte",
    ):
        n = _int(x)
        d = _int_digits(n)
        return (d, _int_json(n, d))
    if name in ("bool", "bool_"):
        return ("True", "true") if _bool(x) else ("False", "false")
    if name == "str_":
        x = _text(x, b)
        return (_str_repr(x), _json_str(x))
    if name == "ndarray":
        ndim = x.ndim
        size = x.size
        kind = x.dtype.kind
        if _type(ndim) is not _int or _type(size) is not _int or _type(kind) is not _str:
            raise _Unsupported("numpy.ndarray", "unreadable array")
        if ndim > 2:
            raise _Unsupported("numpy.ndarray", "arrays of more than 2 dimensions are not plain values")
        if size > MAX_ITEMS:
            raise _Unsupported("numpy.ndarray", "too large: more than %d elements" % MAX_ITEMS)
        if kind not in "biufUO":
            raise _Unsupported("numpy.ndarray", "arrays of dtype kind %r are not plain values" % kind)
        return _encode(x.tolist(), depth, b, path)
    raise _Unsupported(type_name(t), _not_plain(path))


def _sympy(x, t, mro):
    """A sympy Integer, Rational or Float as a plain number; None for
    anything else (a tree is read by `_sympy_tree`)."""
    numbers = _dict_get(_sys_modules, "sympy.core.numbers")
    if _type(numbers) is not _ModuleType:
        return None
    nd = _module_dict_of(numbers)
    rational = _dict_get(nd, "Rational")
    flt = _dict_get(nd, "Float")
    for cls in mro:
        if not _from_sympy(cls):
            return None
        if cls is rational:
            p, q = _rational_of(x, mro)
            if p is None:
                return None
            if q == 1:
                d = _int_digits(p)
                return (d, _int_json(p, d))
            text = _int_digits(p) + "/" + _int_digits(q)
            try:
                return (text, _float_json(p / q))
            except OverflowError:
                return (text, "null")
        if cls is flt:
            mpf = _mro_attr(mro, "_mpf_", x)
            if _type(mpf) is not _tuple or _len(mpf) != 4:
                return None
            sign, man, exp, bc = mpf
            if _type(sign) is not _int or _type(man) is not _int or _type(exp) is not _int:
                return None
            if man == 0:
                if exp == 0:
                    return ("0.0", "0.0")
                return None  # inf / nan
            try:
                f = _ldexp(_float(-man if sign else man), exp)
            except OverflowError:
                return None
            return (_float_repr(f), _float_json(f))
    return None


def _from_sympy(cls):
    """Whether `cls` is `object` or a class whose own dict says it was
    defined in a `sympy.` module (read from the class dict, so a metaclass
    cannot answer for it)."""
    if cls is object:
        return True
    mod = _mappingproxy_get(_class_dict_of(cls), "__module__")
    return _type(mod) is _str and _str_startswith(mod, "sympy.")


def _all_sympy(mro):
    for cls in mro:
        if not _from_sympy(cls):
            return False
    return True


def _mro_attr(mro, name, x):
    """`x.name` as attribute lookup finds it in the class dicts, for
    slotted objects: a slot is read through its member descriptor; a plain
    class attribute (Integer singletons keep `p` and `q` so) is returned as
    it is; anything else (a property, a method) is returned unread, for the
    caller's type check to refuse. None when nothing is found or the slot
    is empty."""
    for cls in mro:
        d = _mappingproxy_get(_class_dict_of(cls), name, _MISSING)
        if d is _MISSING:
            continue
        if _type(d) is _MemberDescriptorType:
            try:
                return d.__get__(x)
            except AttributeError:
                return None
        return d
    return None


def _rational_of(x, mro):
    """(p, q) of a sympy Rational (q > 0, 1 for an Integer), else (None, None)."""
    p = _mro_attr(mro, "p", x)
    q = _mro_attr(mro, "q", x)
    if _type(p) is not _int or _type(q) is not _int or q <= 0:
        return (None, None)
    return (p, q)
