# retrace MATH answer checker (docs/math-checking.md): its imports, limits,
# value types, time budget, text helpers and the guard of sympy trees.
#
# The checker is this file, reading.py, compare.py, rules.py and entry.py,
# run in that order as one source (src/harness/math_checker.rs) in a
# namespace of its own in a confined checker kernel (image `checker`,
# images/checker.lock). It defines builtins.__retrace_math_check__(b64); every
# later cell calls it with base64 of the UTF-8 JSON
#     {"expected": "<LaTeX>", "answer": "<kernel answer text>" | null, "rel_tol": 1e-6}
# and it prints exactly one line: "RETRACE-MATH " + JSON (ensure_ascii) with the
# verdicts of three rules: retrace's own, Math-Verify's and Minerva's.
#
# Answers are model-written and hostile: nothing here evals, sympifies or
# parse_expr's answer text. Python-ish text is read with ast.parse(mode="eval")
# and a whitelist of node types, names and sympy constructors; sizes, depths and
# exponents are capped before anything is computed. Everything the checker needs
# lives in its own namespace, so later cells cannot swap a helper.
# KeyboardInterrupt (the harness's per-cell time limit) is never caught.

import ast
import base64
import builtins
import contextlib
import io
import json
import logging
import math
import re
import signal
import sys
import threading
import warnings

import sympy
from sympy import (
    Abs, Add, And, E, Eq, EulerGamma, Float, GoldenRatio, Catalan, I, Integer,
    Interval, Intersection, Complement, Matrix, MatrixBase, Mul, Number, Or,
    Pow, Rational, S, Symbol, Tuple, Union, UnevaluatedExpr, nan, oo, pi, zoo,
)
from sympy.core.relational import (
    GreaterThan, LessThan, Relational, StrictGreaterThan, StrictLessThan,
    Unequality,
)
from sympy.sets.sets import FiniteSet as SympyFiniteSet, Set as SympySet
from latex2sympy2_extended import latex2sympy
from latex2sympy2_extended.latex2sympy2 import ConversionConfig
from latex2sympy2_extended.math_normalization import (
    NormalizationConfig, normalize_latex,
)
from math_verify import parse as mv_parse, verify as mv_verify
from math_verify.grader import should_treat_as_complex

PREFIX = "RETRACE-MATH "

# ---- limits ---------------------------------------------------------
MAX_ANSWER_CHARS = 10_000     # whole answer text
MAX_LATEX_CHARS = 2_000       # one LaTeX / plain-math piece handed to a parser
MAX_NESTING = 60              # bracket / brace depth before ast.parse or ANTLR
MAX_AST_NODES = 2_000
MAX_TREE_NODES = 20_000       # sympy tree size after reading
MAX_INT_BITS = 10_000         # ~3,000 digits for any integer in a reading
MAX_POW_BITS = 10_000         # |exp| * bits(base) of an exact numeric power
MAX_COMBINATORIAL_ARG = 5_000  # factorial / binomial / gamma of a number
MAX_FLOAT_PREC = 2_000
MAX_MATRIX_CELLS = 400
MAX_ITEMS = 200
RULE_BUDGET_S = 5.0           # retrace rule's own time budget (SIGALRM)
OUT_CAP = 2_000               # chars of a normalized string in the output

class Refused(Exception):
    """The guard refused a reading (size, depth, name or node type)."""

class Unreadable(Exception):
    """The text could not be read as math."""

class BudgetExceeded(BaseException):
    """The retrace rule's own time budget ran out (not an Exception, so
    library code catching Exception does not swallow it)."""

# ---- small value types for readings --------------------------------
class Text:
    __slots__ = ("s",)

    def __init__(self, s):
        self.s = s

    def __repr__(self):
        return "Text(%r)" % self.s

class Coll:
    """An answer collection. kind: tuple (ordered), list (a Python list:
    ordered against a tuple, unordered against a set / several answers),
    set (unordered), multi (top-level comma list: several answers)."""
    __slots__ = ("kind", "items")

    def __init__(self, kind, items):
        self.kind = kind
        self.items = list(items)

    def __repr__(self):
        return "Coll(%s, %r)" % (self.kind, self.items)

class Reading:
    __slots__ = ("value", "flags", "extracted", "how")

    def __init__(self, value, flags=(), extracted=None, how=None):
        self.value = value
        self.flags = set(flags)
        self.extracted = extracted
        self.how = how

# ---- budget ----------------------------------------------------------
main_thread = threading.main_thread

@contextlib.contextmanager
def budget(seconds):
    if threading.current_thread() is not main_thread():
        yield
        return

    def on_alarm(signum, frame):
        raise BudgetExceeded()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)

# ---- text helpers ----------------------------------------------------
def max_depth(s):
    d = m = 0
    for ch in s:
        if ch in "([{":
            d += 1
            if d > m:
                m = d
        elif ch in ")]}":
            d -= 1
    return m

def last_braced(s, cmds=("\\boxed", "\\fbox")):
    """Content of the last \\boxed{...} / \\fbox{...} (nested braces), or
    of `\\boxed x` up to a `$`; None if there is none or it is unclosed."""
    idx = -1
    cmd = None
    for c in cmds:
        j = s.rfind(c)
        if j > idx:
            idx, cmd = j, c
    if idx < 0:
        return None
    k = idx + len(cmd)
    while k < len(s) and s[k] == " ":
        k += 1
    if k < len(s) and s[k] == "{":
        depth = 0
        for j in range(k, len(s)):
            if s[j] == "{":
                depth += 1
            elif s[j] == "}":
                depth -= 1
                if depth == 0:
                    return s[k + 1:j]
        return None
    if k > idx + len(cmd):  # "\boxed 5"
        return s[k:].split("$")[0].strip()
    return None

MATH_DELIMS = [
    re.compile(r"\$\$(.+?)\$\$", re.S),
    re.compile(r"\\\[(.+?)\\\]", re.S),
    re.compile(r"\\\((.+?)\\\)", re.S),
    re.compile(r"(?<!\\)\$(.+?)(?<!\\)\$", re.S),
]

def last_math(s):
    best = None
    for rx in MATH_DELIMS:
        for m in rx.finditer(s):
            if best is None or m.end() > best[0]:
                best = (m.end(), m.group(1))
    return None if best is None else best[1]

def split_top(s, sep):
    """Split on `sep` outside (), [], {} and \\left...\\right."""
    parts, depth, cur = [], 0, []
    i = 0
    while i < len(s):
        ch = s[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return parts

TEXT_CMD = re.compile(
    r"^\\(?:text|textbf|textit|textrm|mathrm|mbox|mathbf|textsf|texttt|operatorname)\s*\{([^{}]*)\}$")
WORDY = re.compile(r"^[A-Za-z][A-Za-z .,'\-()]*$")
DEGREES = re.compile(
    r"(\^\s*\{?\s*\\circ\s*\}?|\\degree|°|\\text\{\s*degrees?\s*\}|\s+degrees?$)")
PERCENT = re.compile(r"(\\%|%|\\text\{\s*percent\s*\}|\s+percent$)")
UNIT_TEXT_TAIL = re.compile(
    r"^(.*?[0-9A-Za-z}\)\]])\s*(?:\\[,;! ]|~)*\s*"
    r"\\(?:text|mbox|mathrm|textrm|textnormal)\s*\{\s*[A-Za-z][A-Za-z .^0-9{}]*\}"
    r"(?:\s*\^\s*\{?[23]\}?)?\s*$")
UNIT_WORD_TAIL = re.compile(
    r"^(-?[0-9][0-9.,/]*)\s+([A-Za-z][A-Za-z .]*?)(?:\^?[23])?$")
DOLLAR_SIGN = re.compile(r"^\\\$\s*|^\\\$|\\\$$")
THOUSANDS = re.compile(r"^-?\d{1,3}(,\d{3})+(\.\d+)?$")

def clean_text(s):
    s = s.strip()
    for _ in range(3):
        m = TEXT_CMD.match(s)
        if not m:
            break
        s = m.group(1).strip()
    s = s.strip().strip(".").strip()
    s = re.sub(r"^\(([A-Za-z0-9])\)$", r"\1", s)
    s = re.sub(r"\s+", " ", s)
    return s.casefold()

# ---- guard for sympy trees ------------------------------------------
def int_bits(n):
    return abs(int(n)).bit_length()

def numeric_magnitude(e):
    """|e| as a float for a numeric sympy expression, computed with evalf
    (mpmath floats, so towers do not allocate big integers)."""
    try:
        v = e.evalf(15)
        v = complex(v)
        return abs(v)
    except (TypeError, ValueError, OverflowError, ArithmeticError):
        return math.inf

COMBINATORIAL = ("factorial", "factorial2", "subfactorial", "binomial",
                 "gamma", "RisingFactorial", "FallingFactorial",
                 "fibonacci", "lucas", "harmonic", "bell", "catalan",
                 "bernoulli", "euler", "primorial", "prime")

def pow_ok(b, e):
    if not (getattr(b, "is_number", False) and getattr(e, "is_number", False)):
        return True
    if b in (S.Zero, S.One, S.NegativeOne):
        return True
    if isinstance(b, Float) or isinstance(e, Float):
        return True
    if isinstance(b, Rational) and isinstance(e, Rational):
        bits = max(int_bits(b.p), int_bits(b.q), 1)
        if int_bits(e.q) > 40:
            return False
        return abs(int(e.p)) * bits <= MAX_POW_BITS
    if isinstance(e, Rational) and abs(e) <= 64:
        return True
    mag = numeric_magnitude(e)
    return mag <= 64

def guard_tree(obj):
    stack = [obj]
    n = 0
    while stack:
        x = stack.pop()
        n += 1
        if n > MAX_TREE_NODES:
            raise Refused("expression too large")
        if isinstance(x, Text):
            continue
        if isinstance(x, Coll):
            if len(x.items) > MAX_ITEMS:
                raise Refused("too many items")
            stack.extend(x.items)
            continue
        if isinstance(x, MatrixBase):
            if x.rows * x.cols > MAX_MATRIX_CELLS:
                raise Refused("matrix too large")
            stack.extend(list(x))
            continue
        if isinstance(x, (bool, int, float, complex, str)) or x is None:
            continue
        if isinstance(x, Rational):
            if int_bits(x.p) > MAX_INT_BITS or int_bits(x.q) > MAX_INT_BITS:
                raise Refused("integer too large")
            continue
        if isinstance(x, Float):
            if x._prec > MAX_FLOAT_PREC:
                raise Refused("float precision too large")
            continue
        if isinstance(x, Pow) and not pow_ok(x.base, x.exp):
            raise Refused("power too large")
        fname = type(x).__name__
        if fname in COMBINATORIAL:
            for a in x.args:
                if getattr(a, "is_number", False) and \
                        numeric_magnitude(a) > MAX_COMBINATORIAL_ARG:
                    raise Refused("%s argument too large" % fname)
        args = getattr(x, "args", ())
        if isinstance(args, tuple):
            stack.extend(args)
    return obj
