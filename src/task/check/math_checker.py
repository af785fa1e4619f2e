# retrace MATH answer checker (docs/math-checking.md).
#
# Run once as a setup cell in a confined checker kernel (image `checker`,
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
# is captured in the closure below, so later cells cannot swap a helper.
# KeyboardInterrupt (the harness's per-cell time limit) is never caught.


def _retrace_math_setup():
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

    # ---- the AST whitelist reader ----------------------------------------
    CONST_NAMES = {
        "pi": pi, "E": E, "I": I, "oo": oo, "zoo": zoo, "inf": oo,
        "infinity": oo, "Infinity": oo, "true": S.true, "false": S.false,
        "EmptySet": S.EmptySet, "Reals": S.Reals, "Integers": S.Integers,
        "Naturals": S.Naturals, "Naturals0": S.Naturals0,
        "Complexes": S.Complexes, "Rationals": S.Rationals,
        "GoldenRatio": GoldenRatio, "EulerGamma": EulerGamma,
        "Catalan": Catalan, "ImaginaryUnit": I, "Pi": pi, "Exp1": E,
        "Half": S.Half, "One": S.One, "Zero": S.Zero, "NegativeOne": S.NegativeOne,
        "NegativeInfinity": -oo, "ComplexInfinity": zoo,
        "BooleanTrue": S.true, "BooleanFalse": S.false,
    }
    # plain-text readings (inside a string answer) add these
    PLAIN_NAMES = {"e": E, "i": I, "j": I}

    def fn(f):
        return ("fn", f)

    FUNCS = {
        "sqrt": fn(sympy.sqrt), "cbrt": fn(sympy.cbrt), "root": fn(sympy.root),
        "exp": fn(sympy.exp), "log": fn(sympy.log), "ln": fn(sympy.log),
        "sin": fn(sympy.sin), "cos": fn(sympy.cos), "tan": fn(sympy.tan),
        "cot": fn(sympy.cot), "sec": fn(sympy.sec), "csc": fn(sympy.csc),
        "asin": fn(sympy.asin), "acos": fn(sympy.acos), "atan": fn(sympy.atan),
        "acot": fn(sympy.acot), "asec": fn(sympy.asec), "acsc": fn(sympy.acsc),
        "atan2": fn(sympy.atan2), "sinh": fn(sympy.sinh), "cosh": fn(sympy.cosh),
        "tanh": fn(sympy.tanh), "asinh": fn(sympy.asinh),
        "acosh": fn(sympy.acosh), "atanh": fn(sympy.atanh),
        "Abs": fn(sympy.Abs), "abs": fn(sympy.Abs), "re": fn(sympy.re),
        "im": fn(sympy.im), "conjugate": fn(sympy.conjugate),
        "arg": fn(sympy.arg), "sign": fn(sympy.sign),
        "floor": fn(sympy.floor), "ceiling": fn(sympy.ceiling),
        "Max": fn(sympy.Max), "Min": fn(sympy.Min), "gcd": fn(sympy.gcd),
        "lcm": fn(sympy.lcm), "factorial": fn(sympy.factorial),
        "binomial": fn(sympy.binomial), "gamma": fn(sympy.gamma),
        "Mod": fn(sympy.Mod),
        "Add": fn(Add), "Mul": fn(Mul), "Pow": fn(Pow),
        "Union": fn(Union), "Intersection": fn(Intersection),
        "Complement": fn(Complement), "And": fn(And), "Or": fn(Or),
        "UnevaluatedExpr": ("unevaluated", None),
        "Integer": ("Integer", None), "Rational": ("Rational", None),
        "Float": ("Float", None), "Symbol": ("Symbol", None),
        "Dummy": ("Symbol", None),
        "Tuple": ("Tuple", None), "FiniteSet": ("FiniteSet", None),
        "Interval": ("Interval", None),
        "Equality": ("rel", Eq), "Eq": ("rel", Eq),
        "Unequality": ("rel", Unequality), "Ne": ("rel", Unequality),
        "StrictLessThan": ("rel", StrictLessThan), "Lt": ("rel", StrictLessThan),
        "LessThan": ("rel", LessThan), "Le": ("rel", LessThan),
        "StrictGreaterThan": ("rel", StrictGreaterThan), "Gt": ("rel", StrictGreaterThan),
        "GreaterThan": ("rel", GreaterThan), "Ge": ("rel", GreaterThan),
        "ImmutableDenseMatrix": ("Matrix", None), "MutableDenseMatrix": ("Matrix", None),
        "ImmutableMatrix": ("Matrix", None), "Matrix": ("Matrix", None),
        "BooleanTrue": ("const", S.true), "BooleanFalse": ("const", S.false),
        "Pi": ("const", pi), "ImaginaryUnit": ("const", I), "Exp1": ("const", E),
        "Infinity": ("const", oo), "NegativeInfinity": ("const", -oo),
        "Half": ("const", S.Half), "EmptySet": ("const", S.EmptySet),
    }
    ASSUMPTIONS = {"real", "positive", "negative", "integer", "nonnegative",
                   "nonpositive", "nonzero", "rational", "complex", "finite",
                   "commutative", "even", "odd", "prime", "zero"}
    SYMBOL_NAME = re.compile(r"^[A-Za-z\\][A-Za-z0-9_\\{}' ]{0,40}$")
    PLAIN_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,15}$")

    def to_sym(v):
        """A reading value as a sympy object (for constructor arguments)."""
        if isinstance(v, Coll):
            if v.kind == "set":
                return SympyFiniteSet(*[to_sym(x) for x in v.items])
            return Tuple(*[to_sym(x) for x in v.items])
        if isinstance(v, Text):
            raise Refused("text inside an expression")
        return v

    def mk_int(n):
        if int_bits(n) > MAX_INT_BITS:
            raise Refused("integer too large")
        return Integer(n)

    def checked_pow(b, e):
        b, e = to_sym(b), to_sym(e)
        if not pow_ok(b, e):
            raise Refused("power too large")
        return guard_tree(Pow(b, e))

    class AstReader:
        def __init__(self, plain):
            self.plain = plain
            self.nodes = 0

        def read(self, text):
            if max_depth(text) > MAX_NESTING:
                raise Refused("nesting too deep")
            try:
                tree = ast.parse(text, mode="eval")
            except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
                raise Unreadable(type(e).__name__)
            return self.node(tree.body, 0)

        def node(self, n, depth):
            self.nodes += 1
            if self.nodes > MAX_AST_NODES or depth > MAX_NESTING:
                raise Refused("expression too large")
            d = depth + 1
            if isinstance(n, ast.Constant):
                v = n.value
                if isinstance(v, bool):
                    return S.true if v else S.false
                if isinstance(v, int):
                    return mk_int(v)
                if isinstance(v, float):
                    if math.isnan(v):
                        raise Unreadable("nan")
                    if math.isinf(v):
                        return oo if v > 0 else -oo
                    return Float(v)
                if isinstance(v, complex):
                    if not (math.isfinite(v.real) and math.isfinite(v.imag)):
                        raise Unreadable("complex infinity")
                    re_part = Float(v.real) if v.real else S.Zero
                    return re_part + Float(v.imag) * I
                if isinstance(v, str):
                    if self.plain:
                        raise Refused("string inside plain math")
                    return ("str", v)
                raise Refused("constant type %s" % type(v).__name__)
            if isinstance(n, ast.Name):
                if n.id in CONST_NAMES:
                    return CONST_NAMES[n.id]
                if self.plain:
                    if n.id in PLAIN_NAMES:
                        return PLAIN_NAMES[n.id]
                    if n.id in FUNCS or not PLAIN_NAME.match(n.id):
                        raise Refused("name %s" % n.id[:40])
                    return Symbol(n.id)
                raise Refused("name %s" % n.id[:40])
            if isinstance(n, ast.UnaryOp):
                v = to_sym(self.value(n.operand, d))
                if isinstance(n.op, ast.USub):
                    return -v
                if isinstance(n.op, ast.UAdd):
                    return v
                raise Refused("unary operator")
            if isinstance(n, ast.BinOp):
                a = to_sym(self.value(n.left, d))
                b = to_sym(self.value(n.right, d))
                op = n.op
                if isinstance(op, ast.Add):
                    return guard_tree(a + b)
                if isinstance(op, ast.Sub):
                    return guard_tree(a - b)
                if isinstance(op, ast.Mult):
                    return guard_tree(a * b)
                if isinstance(op, ast.Div):
                    if b == 0:
                        raise Unreadable("division by zero")
                    return guard_tree(a / b)
                if isinstance(op, ast.Pow):
                    return checked_pow(a, b)
                raise Refused("operator %s" % type(op).__name__)
            if isinstance(n, (ast.Tuple, ast.List, ast.Set)):
                if len(n.elts) > MAX_ITEMS:
                    raise Refused("too many items")
                items = [self.value(x, d) for x in n.elts]
                kind = {ast.Tuple: "tuple", ast.List: "list", ast.Set: "set"}[type(n)]
                if kind == "list" and items and all(
                        isinstance(x, Coll) and x.kind == "list" for x in items):
                    return self.matrix([x.items for x in items])
                return Coll(kind, items)
            if isinstance(n, ast.Call):
                return self.call(n, d)
            raise Refused("node %s" % type(n).__name__)

        def value(self, n, d):
            v = self.node(n, d)
            if isinstance(v, tuple) and v and v[0] == "str":
                raise Refused("string inside an expression")
            return v

        def matrix(self, rows):
            if not rows or len(rows) * max(len(r) for r in rows) > MAX_MATRIX_CELLS:
                raise Refused("matrix size")
            if len({len(r) for r in rows}) != 1 or not rows[0]:
                raise Unreadable("ragged matrix")
            return sympy.ImmutableMatrix([[to_sym(x) for x in r] for r in rows])

        def call(self, n, d):
            if not isinstance(n.func, ast.Name):
                raise Refused("call of a non-name")
            name = n.func.id
            if name not in FUNCS:
                raise Refused("function %s" % name[:40])
            kind, f = FUNCS[name]
            kw = {}
            for k in n.keywords:
                if k.arg is None:
                    raise Refused("**kwargs")
                if not isinstance(k.value, ast.Constant) or \
                        not isinstance(k.value.value, (bool, int)):
                    raise Refused("keyword value")
                kw[k.arg] = k.value.value
            if name in ("Tuple", "FiniteSet") and kw:
                raise Refused("keywords")
            if kind == "const":
                if n.args or kw:
                    raise Refused("arguments to a constant")
                return f
            if kind == "Integer":
                if len(n.args) != 1 or kw:
                    raise Refused("Integer arguments")
                a = n.args[0]
                v = self.node(a, d)
                if isinstance(v, Integer):
                    return v
                raise Refused("Integer argument")
            if kind == "Rational":
                if len(n.args) != 2 or kw:
                    raise Refused("Rational arguments")
                p, q = (self.value(a, d) for a in n.args)
                if not (isinstance(p, Integer) and isinstance(q, Integer)) or q == 0:
                    raise Refused("Rational arguments")
                return Rational(p, q)
            if kind == "Float":
                if len(n.args) != 1 or set(kw) - {"precision", "dps"}:
                    raise Refused("Float arguments")
                a = n.args[0]
                prec = kw.get("precision")
                dps = kw.get("dps")
                if prec is not None and not 1 <= prec <= MAX_FLOAT_PREC:
                    raise Refused("Float precision")
                if dps is not None and not 1 <= dps <= MAX_FLOAT_PREC // 3:
                    raise Refused("Float precision")
                if isinstance(a, ast.Constant) and isinstance(a.value, str):
                    s = a.value.strip()
                    if len(s) > 120 or not re.match(
                            r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d{1,6})?$", s):
                        raise Refused("Float text")
                    if prec is not None:
                        return Float(s, precision=prec)
                    if dps is not None:
                        return Float(s, dps)
                    return Float(s)
                v = self.value(a, d)
                if isinstance(v, (Float, Integer)):
                    return Float(v)
                raise Refused("Float argument")
            if kind == "Symbol":
                if not n.args or not isinstance(n.args[0], ast.Constant) or \
                        not isinstance(n.args[0].value, str) or len(n.args) != 1:
                    raise Refused("Symbol arguments")
                s = n.args[0].value
                if not SYMBOL_NAME.match(s):
                    raise Refused("Symbol name")
                if set(kw) - ASSUMPTIONS - {"dummy_index"}:
                    raise Refused("Symbol assumptions")
                return Symbol(s)
            if kind == "unevaluated":
                if len(n.args) != 1 or kw:
                    raise Refused("UnevaluatedExpr arguments")
                return self.value(n.args[0], d)
            if kw:
                raise Refused("keywords")
            if len(n.args) > MAX_ITEMS:
                raise Refused("too many arguments")
            args = [self.value(a, d) for a in n.args]
            if kind == "Tuple":
                return Coll("tuple", args)
            if kind == "FiniteSet":
                return Coll("set", args)
            if kind == "Interval":
                if len(args) not in (2, 4):
                    raise Refused("Interval arguments")
                lo, hi = to_sym(args[0]), to_sym(args[1])
                lopen = ropen = False
                if len(args) == 4:
                    if args[2] not in (S.true, S.false) or args[3] not in (S.true, S.false):
                        raise Refused("Interval openness")
                    lopen, ropen = bool(args[2]), bool(args[3])
                return Interval(lo, hi, lopen, ropen)
            if kind == "rel":
                if len(args) != 2:
                    raise Refused("relation arguments")
                return f(to_sym(args[0]), to_sym(args[1]), evaluate=False)
            if kind == "Matrix":
                if len(args) == 1 and isinstance(args[0], MatrixBase):
                    return args[0]
                if len(args) != 1 or not isinstance(args[0], Coll):
                    raise Refused("Matrix arguments")
                rows = args[0].items
                if all(isinstance(r, Coll) for r in rows):
                    return self.matrix([r.items for r in rows])
                return self.matrix([[x] for x in rows])
            # plain sympy function / constructor
            sargs = [to_sym(a) for a in args]
            if f is Pow or f is sympy.root:
                if len(sargs) < 2:
                    raise Refused("Pow arguments")
                e = sargs[1] if f is Pow else 1 / sargs[1]
                if not pow_ok(sargs[0], e):
                    raise Refused("power too large")
            if name in COMBINATORIAL:
                for a in sargs:
                    if getattr(a, "is_number", False) and \
                            numeric_magnitude(a) > MAX_COMBINATORIAL_ARG:
                        raise Refused("%s argument too large" % name)
            if name in ("Add", "Mul", "Pow"):
                # srepr prints evaluated trees, so rebuild them unevaluated
                # and let the guard look before anything is computed
                out = guard_tree(f(*sargs, evaluate=False))
                return guard_tree(out.func(*out.args))
            return guard_tree(f(*sargs))

    # ---- LaTeX reading (the way Math-Verify does) -------------------------
    MV_NORMALIZATION = NormalizationConfig(
        basic_latex=True, units=True, malformed_operators=True, nits=True,
        boxed="all", equations=False)

    LATEX_SCREEN = re.compile(
        r"\\binom\s*\{?\s*\d{5,}|\d{5,}\s*!|\\(?:def|input|include|catcode|newcommand)")

    def read_latex(s):
        if len(s) > MAX_LATEX_CHARS:
            raise Refused("LaTeX too long")
        if max_depth(s) > MAX_NESTING:
            raise Refused("nesting too deep")
        if LATEX_SCREEN.search(s):
            raise Refused("LaTeX construct refused")
        if re.search(r"\d{%d,}" % (MAX_INT_BITS // 4), s):
            raise Refused("number too long")
        norm = normalize_latex(s, MV_NORMALIZATION)
        try:
            v = latex2sympy(norm, is_real=not should_treat_as_complex(norm),
                            convert_degrees=False, normalization_config=None)
        except (Exception, RecursionError) as e:  # ANTLR / conversion errors
            raise Unreadable(type(e).__name__)
        return from_latex_value(guard_tree(v), s)

    def from_latex_value(v, src):
        if isinstance(v, SympyFiniteSet):
            braced = src.lstrip().startswith(("\\{", "\\left\\{", "\\lbrace", "\\left\\lbrace"))
            return Coll("set" if braced else "multi", list(v.args))
        if isinstance(v, Tuple):
            return Coll("tuple", list(v.args))
        if isinstance(v, (list, tuple)):
            return Coll("tuple", list(v))
        if isinstance(v, str):
            raise Unreadable("string")
        return v

    # ---- one piece of math text (expected LaTeX, or a string answer) ------
    def looks_latex(s):
        return "\\" in s or "{" in s or "}" in s

    def read_piece(s, flags):
        """Read one answer piece (no top-level commas). Returns a value."""
        s = s.strip()
        if not s:
            raise Unreadable("empty")
        # an equation `lhs = rhs` (single top-level '=')
        eq_parts = [p for p in re.split(r"(?<![<>!=\\])=(?!=)", s)]
        if len(eq_parts) == 2 and eq_parts[0].strip() and eq_parts[1].strip():
            lhs = read_piece(eq_parts[0], flags)
            rhs = read_piece(eq_parts[1], flags)
            return Eq(to_sym(lhs), to_sym(rhs), evaluate=False)
        if not looks_latex(s) and "[" not in s and "]" not in s:
            plain = s.replace("^", "**").replace("\u2212", "-").replace("\u00d7", "*")
            try:
                return AstReader(plain=True).read(plain)
            except Unreadable:
                pass
        return read_latex(s)

    def strip_flags(s, flags):
        s = s.strip()
        if DEGREES.search(s):
            s2 = DEGREES.sub("", s).strip()
            if s2:
                flags.add("degrees")
                s = s2
        if PERCENT.search(s):
            s2 = PERCENT.sub("", s).strip()
            if s2:
                flags.add("percent")
                s = s2
        if DOLLAR_SIGN.search(s):
            s2 = DOLLAR_SIGN.sub("", s).strip()
            if s2:
                flags.add("units")
                s = s2
        m = UNIT_TEXT_TAIL.match(s)
        if m and m.group(1).strip():
            flags.add("units")
            s = m.group(1).strip()
        m = UNIT_WORD_TAIL.match(s)
        if m:
            flags.add("units")
            s = m.group(1).strip()
        return s

    def read_math_text(s):
        """A LaTeX or plain math string -> Reading (value, flags)."""
        s = s.strip()
        s = re.sub(r"^\s*(?:the\s+)?(?:final\s+)?answer\s*(?:is)?\s*[:=]?\s*", "", s,
                   flags=re.I) if len(s) < MAX_LATEX_CHARS else s
        s = s.strip().rstrip(".").strip()
        s = re.sub(r"\\(?:displaystyle|left|right)(?![A-Za-z])", "", s) \
            if "\\" in s else s
        s = re.sub(r"(?<!\\)\\[,!;]", "", s)
        s = re.sub(r"(?<!\\)\\ ", " ", s).strip()
        if not s:
            raise Unreadable("empty")
        # words: \text{Evelyn}, Evelyn, \text{(C)}
        t = clean_text(s)
        m = TEXT_CMD.match(s)
        if (m and re.search(r"[A-Za-z]{2,}", m.group(1)) and
                not re.search(r"\d", m.group(1))) or \
                (WORDY.match(s) and re.search(r"[A-Za-z]{3,}", s) and
                 not re.match(r"^[a-z]\s*[-+*/]", s) and
                 not PLAIN_NAME_FUNCS.search(s)):
            return Reading(Text(t), (), s, "text")
        if m and re.match(r"^\(?[A-Za-z]\)?$", m.group(1).strip()):
            return Reading(Text(t), (), s, "text")
        flags = set()
        s = strip_flags(s, flags)
        if THOUSANDS.match(s):
            return Reading(read_piece(s.replace(",", ""), flags), flags, s, "number")
        outer = s.lstrip()
        bracketed = outer[:1] in "([{" or outer.startswith(("\\{", "\\lbrace", "\\begin"))
        if not bracketed:
            parts = split_top(s, ",")
            if len(parts) > 1:
                if len(parts) > MAX_ITEMS:
                    raise Refused("too many items")
                items = []
                for p in parts:
                    if not p.strip():
                        continue
                    pf = set()
                    items.append(read_piece(strip_flags(p, pf), pf))
                    flags |= pf
                return Reading(Coll("multi", items), flags, s, "multi")
        return Reading(read_piece(s, flags), flags, s, "expr")

    PLAIN_NAME_FUNCS = re.compile(r"\b(sqrt|pi|log|exp|sin|cos|tan|oo)\b")

    def read_string_answer(s):
        """A str answer: last \\boxed{}, else last $...$, else the text."""
        how = "string"
        if len(s) > MAX_ANSWER_CHARS:
            raise Refused("answer text too long")
        inner = last_braced(s)
        if inner is not None:
            s, how = inner, "boxed"
        else:
            inner = last_math(s)
            if inner is not None:
                s, how = inner, "dollars"
        r = read_math_text(s)
        r.extracted = s.strip()
        r.how = how if r.how != "text" else "text"
        return r

    # ---- the answer's kernel text -----------------------------------------
    def read_answer(text):
        """The kernel-recorded answer text -> Reading, or raises."""
        if len(text) > MAX_ANSWER_CHARS:
            raise Refused("answer text too long")
        st = text.strip()
        if not st or st == "None":
            return None
        if max_depth(st) > MAX_NESTING:
            raise Refused("nesting too deep")
        try:
            v = AstReader(plain=False).read(st)
        except Unreadable:
            # not Python: treat the text itself as a string answer
            return read_string_answer(st)
        if isinstance(v, tuple) and v and v[0] == "str":
            if not v[1].strip():
                return None
            r = read_string_answer(v[1])
            r.how = "str:" + r.how
            return r
        v = resolve_nested_strings(v)
        return Reading(guard_tree(v), (), st, "literal")

    def resolve_nested_strings(v):
        if isinstance(v, Coll):
            return Coll(v.kind, [resolve_nested_strings(x) for x in v.items])
        if isinstance(v, tuple) and v and v[0] == "str":
            r = read_string_answer(v[1])
            return r.value
        return v

    # ---- normalisation of symbols -----------------------------------------
    def norm_value(v):
        """Symbols -> plain lowercase real symbols (latex2sympy lowercases and
        makes them real); `i` -> I; UnevaluatedExpr unwrapped."""
        if isinstance(v, Coll):
            return Coll(v.kind, [norm_value(x) for x in v.items])
        if isinstance(v, Text):
            return v
        if isinstance(v, MatrixBase):
            return sympy.ImmutableMatrix(v.applyfunc(lambda x: norm_value(x)))
        if not isinstance(v, sympy.Basic):
            return v
        if v.has(UnevaluatedExpr):
            v = v.replace(lambda x: isinstance(x, UnevaluatedExpr), lambda x: x.args[0])
        syms = v.free_symbols if hasattr(v, "free_symbols") else set()
        if syms:
            sub = {}
            for x in syms:
                if not isinstance(x, Symbol):
                    continue
                name = x.name.lower()
                sub[x] = I if name == "i" else Symbol(name, real=True)
            v = v.xreplace(sub)
        return v

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

    # ---- rule 2: Math-Verify -----------------------------------------------
    POWER_TOWER = re.compile(
        r"(\*\*|\^)\s*[{(]*\s*-?\d+\s*[})]*\s*(\*\*|\^)|(\*\*|\^)\s*[{(]*\s*-?\d{5,}"
        r"|\d{5,}\s*!|\\binom\s*\{?\s*\d{5,}")

    def pred_text_of(answer):
        """The answer as LaTeX text for Math-Verify and Minerva: a str answer
        as is; a number's text; a sympy answer through sympy.latex; Python
        containers element by element (tuple (a, b), set \\{a, b\\}, list a, b)."""
        st = answer.strip()
        if len(st) > MAX_ANSWER_CHARS:
            raise Refused("answer text too long")
        if st == "None":
            return ("str", "")
        try:
            v = AstReader(plain=False).read(st)
        except Unreadable:
            return ("str", st)
        return pred_of_value(v, st, top=True)

    NUMBER_TEXT = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?j?$|^[-+]?\d+/\d+$")

    def pred_of_value(v, text, top=False):
        if isinstance(v, tuple) and v and v[0] == "str":
            return ("str", v[1])
        if text is not None and NUMBER_TEXT.match(text.strip()):
            return ("number", text.strip())
        if isinstance(v, Coll):
            parts = []
            for x in v.items:
                kind, t = pred_of_value(x, None)
                if kind == "str":
                    inner = last_braced(t)
                    t = inner if inner is not None else (last_math(t) or t)
                parts.append(t)
            body = ", ".join(parts)
            if v.kind == "tuple":
                return ("latex", "(" + body + ")")
            if v.kind == "set":
                return ("latex", "\\{" + body + "\\}")
            return ("latex", body)
        if isinstance(v, Float) and text is None:
            return ("latex", repr(float(v)) if v._prec <= 53 else sympy.latex(v))
        if isinstance(v, Integer) and text is None:
            return ("latex", str(int(v)))
        return ("latex", sympy.latex(v))

    def published_pred(answer):
        # The answer as text for a published rule: (verdict so far, kind,
        # text); kind None when the rule is not run (no answer, refused).
        out = {"correct": False, "note": None}
        if answer is None:
            out["note"] = "no answer"
            return out, None, None
        try:
            kind, t = pred_text_of(answer)
        except Refused as e:
            out["note"] = "refused: %s" % e
            return out, None, None
        return out, kind, t

    def math_verify_rule(expected, answer):
        out, kind, t = published_pred(answer)
        if kind is None:
            return out
        if kind == "str":
            if not t.strip():
                out["note"] = "no answer"
                return out
            has_dollar = re.search(r"(?<!\\)\$", t) is not None
            pred = t if (has_dollar or "\\boxed" in t) else "$" + t + "$"
        elif kind == "number":
            pred = t
        else:
            pred = "$" + t + "$"
        if POWER_TOWER.search(pred) or POWER_TOWER.search(expected):
            out["note"] = "refused: power tower or huge exponent"
            return out
        gold = mv_gold(expected)
        parsed = mv_parse(pred)
        out["correct"] = bool(mv_verify(gold, parsed))
        if not parsed:
            out["note"] = "answer not extracted"
        elif not gold:
            out["note"] = "expected not extracted"
        return out

    mv_gold_cache = {}

    def mv_gold(expected):
        hit = mv_gold_cache.get(expected)
        if hit is None:
            hit = mv_parse("$" + expected + "$")
            if len(mv_gold_cache) > 512:
                mv_gold_cache.clear()
            mv_gold_cache[expected] = hit
        return hit

    # ---- rule 3: Minerva (lm-evaluation-harness minerva_math) ---------------
    # Ported from EleutherAI/lm-evaluation-harness lm_eval/tasks/minerva_math/
    # utils.py (normalize_final_answer, SUBSTITUTIONS, REMOVED_EXPRESSIONS:
    # Lewkowycz et al. 2022, App. D; last_boxed_only_string, remove_boxed,
    # timeout, is_equiv). One change: lm-eval parses with
    # sympy.parsing.latex.parse_latex, which needs antlr4-python3-runtime 4.11;
    # the checker image pins 4.13.2 for latex2sympy2_extended, so is_equiv
    # parses with latex2sympy2_extended.latex2sympy (no extra normalisation)
    # instead. Any exception while parsing/subtracting/simplifying is
    # "not equivalent", as in lm-eval.
    SUBSTITUTIONS = [
        ("an ", ""),
        ("a ", ""),
        (".$", "$"),
        ("\\$", ""),
        (r"\ ", ""),
        (" ", ""),
        ("mbox", "text"),
        (",\\text{and}", ","),
        ("\\text{and}", ","),
        ("\\text{m}", "\\text{}"),
    ]
    REMOVED_EXPRESSIONS = [
        "square",
        "ways",
        "integers",
        "dollars",
        "mph",
        "inches",
        "ft",
        "hours",
        "km",
        "units",
        "\\ldots",
        "sue",
        "points",
        "feet",
        "minutes",
        "digits",
        "cents",
        "degrees",
        "cm",
        "gm",
        "pounds",
        "meters",
        "meals",
        "edges",
        "students",
        "childrentickets",
        "multiples",
        "\\text{s}",
        "\\text{.}",
        "\\text{\ns}",
        "\\text{}^2",
        "\\text{}^3",
        "\\text{\n}",
        "\\text{}",
        r"\mathrm{th}",
        r"^\circ",
        r"^{\circ}",
        r"\;",
        r",\!",
        "{,}",
        '"',
        "\\dots",
    ]

    def normalize_final_answer(final_answer):
        """Normalize a final answer to a quantitative reasoning question.

        Copied character for character from appendix D of Lewkowycz et al. (2022)
        """
        final_answer = final_answer.split("=")[-1]

        for before, after in SUBSTITUTIONS:
            final_answer = final_answer.replace(before, after)
        for expr in REMOVED_EXPRESSIONS:
            final_answer = final_answer.replace(expr, "")

        # Extract answer that is in LaTeX math, is bold,
        # is surrounded by a box, etc.
        final_answer = re.sub(r"(.*?)(\$)(.*?)(\$)(.*)", "$\\3$", final_answer)
        final_answer = re.sub(r"(\\text\{)(.*?)(\})", "\\2", final_answer)
        final_answer = re.sub(r"(\\textbf\{)(.*?)(\})", "\\2", final_answer)
        final_answer = re.sub(r"(\\overline\{)(.*?)(\})", "\\2", final_answer)
        final_answer = re.sub(r"(\\boxed\{)(.*)(\})", "\\2", final_answer)

        # Normalize shorthand TeX:
        #  \fracab -> \frac{a}{b}
        #  \frac{abc}{bef} -> \frac{abc}{bef}
        #  \fracabc -> \frac{a}{b}c
        #  \sqrta -> \sqrt{a}
        #  \sqrtab -> sqrt{a}b
        final_answer = re.sub(r"(frac)([^{])(.)", "frac{\\2}{\\3}", final_answer)
        final_answer = re.sub(r"(sqrt)([^{])", "sqrt{\\2}", final_answer)
        final_answer = final_answer.replace("$", "")

        # Normalize 100,000 -> 100000
        if final_answer.replace(",", "").isdigit():
            final_answer = final_answer.replace(",", "")

        return final_answer

    def last_boxed_only_string(string):
        idx = string.rfind("\\boxed")
        if "\\boxed " in string:
            return "\\boxed " + string.split("\\boxed ")[-1].split("$")[0]
        if idx < 0:
            idx = string.rfind("\\fbox")
            if idx < 0:
                return None

        i = idx
        right_brace_idx = None
        num_left_braces_open = 0
        while i < len(string):
            if string[i] == "{":
                num_left_braces_open += 1
            if string[i] == "}":
                num_left_braces_open -= 1
                if num_left_braces_open == 0:
                    right_brace_idx = i
                    break
            i += 1

        if right_brace_idx is None:
            retval = None
        else:
            retval = string[idx: right_brace_idx + 1]

        return retval

    def remove_boxed(s):
        if "\\boxed " in s:
            left = "\\boxed "
            assert s[: len(left)] == left
            return s[len(left):]

        left = "\\boxed{"

        assert s[: len(left)] == left
        assert s[-1] == "}"

        return s[len(left): -1]

    class timeout:
        # lm-eval's SIGALRM timeout; a no-op off the main thread (where
        # signal.signal would raise and is_equiv would answer False).
        def __init__(self, seconds=1, error_message="Timeout"):
            self.seconds = seconds
            self.error_message = error_message
            self.active = threading.current_thread() is main_thread()

        def handle_timeout(self, signum, frame):
            raise TimeoutError(self.error_message)

        def __enter__(self):
            if self.active:
                self.old = signal.signal(signal.SIGALRM, self.handle_timeout)
                signal.alarm(self.seconds)

        def __exit__(self, type, value, traceback):
            if self.active:
                signal.alarm(0)
                signal.signal(signal.SIGALRM, self.old)

    # sympy's parse_latex keeps the case of symbols, so latex2sympy is told to
    # as well. It also reads 2\frac{1}{2} as a product (1); latex2sympy 1.11
    # reads it as the mixed number 5/2 whatever interpret_as_mixed_fractions
    # says (the flag is unused), a known difference from lm-eval.
    MINERVA_CONVERSION = ConversionConfig(interpret_as_mixed_fractions=False,
                                          lowercase_symbols=False)

    def parse_latex(s):
        # stands in for sympy.parsing.latex.parse_latex (see above)
        return latex2sympy(s, normalization_config=None,
                           conversion_config=MINERVA_CONVERSION)

    def is_equiv(x1, x2):
        """
        x1 and x2 are normalized latex string
        """
        try:
            with timeout(seconds=5):
                try:
                    parsed_x1 = parse_latex(x1)
                    parsed_x2 = parse_latex(x2)
                except Exception:
                    # lm-eval: LaTeXParsingError, SympifyError, TypeError
                    return False

                try:
                    diff = parsed_x1 - parsed_x2
                except TypeError:
                    return False

                try:
                    if sympy.simplify(diff) == 0:
                        return True
                    else:
                        return False
                except ValueError:
                    pass
        except TimeoutError:
            return False
        except ImportError:
            raise
        except Exception:
            return False

    def minerva_rule(expected, answer):
        out, kind, t = published_pred(answer)
        if kind is None:
            return out
        if kind == "str" and ("\\boxed" in t or "\\fbox" in t):
            boxed = last_boxed_only_string(t)
            if boxed is not None:
                try:
                    t = remove_boxed(boxed)
                except AssertionError:
                    pass
        if not t.strip():
            out["note"] = "no answer"
            return out
        if POWER_TOWER.search(t) or POWER_TOWER.search(expected) or \
                len(t) > MAX_LATEX_CHARS or max_depth(t) > MAX_NESTING:
            out["note"] = "refused: answer too large for the parser"
            return out
        gold = normalize_final_answer(expected)
        pred = normalize_final_answer(t)
        if gold == pred:
            out["correct"] = True
            out["note"] = "normalized strings equal"
            return out
        out["correct"] = bool(is_equiv(pred, gold))
        return out

    # ---- entry point ---------------------------------------------------------
    def error_verdicts(exc_name, expected_parsed=False, expected_normalized=None):
        note = "checker_error: " + exc_name
        return {
            "expected_parsed": expected_parsed,
            "expected_normalized": expected_normalized,
            "retrace": {"correct": False, "parsed": False, "rule": "math:checker_error",
                        "extracted": None, "normalized": note, "tolerance": None},
            "math_verify": {"correct": False, "note": note},
            "minerva": {"correct": False, "note": note},
        }

    def guarded(fn_, fallback, *args):
        try:
            with budget(RULE_BUDGET_S):
                return fn_(*args)
        except BudgetExceeded:
            return fallback("budget", "time budget of %gs exceeded" % RULE_BUDGET_S)
        except (Exception, RecursionError) as e:
            return fallback("error", "checker_error: " + type(e).__name__)

    def retrace_fallback(kind, note):
        return {"correct": False, "parsed": False,
                "rule": "math:rule_timeout" if kind == "budget" else "math:checker_error",
                "extracted": None, "normalized": note, "tolerance": None}

    def verdict_fallback(kind, note):
        return {"correct": False, "note": note}

    def unguarded(fn_, fallback, *args):
        # Math-Verify and Minerva carry their own SIGALRM timeouts
        try:
            return fn_(*args)
        except BudgetExceeded:
            return fallback("budget", "time budget exceeded")
        except (Exception, RecursionError) as e:
            return fallback("error", "checker_error: " + type(e).__name__)

    def run(b64):
        try:
            req = json.loads(base64.b64decode(b64, validate=True).decode("utf-8"))
            expected = req["expected"]
            answer = req.get("answer")
            tol = float(req.get("rel_tol", 1e-6))
            if not isinstance(expected, str) or not (answer is None or isinstance(answer, str)):
                raise TypeError("expected must be a string, answer a string or null")
            if not (tol >= 0 and math.isfinite(tol)):
                raise ValueError("rel_tol")
        except (Exception, RecursionError) as e:
            return error_verdicts(type(e).__name__)
        exp_parsed, exp_norm = False, None
        try:
            with budget(RULE_BUDGET_S):
                er = read_expected(expected)
            exp_parsed, exp_norm = True, show(er.value)
        except BudgetExceeded:
            exp_norm = None
        except (Exception, RecursionError):
            pass
        result = {"expected_parsed": exp_parsed, "expected_normalized": exp_norm}
        if answer is None:
            result["retrace"] = {"correct": False, "parsed": False, "rule": "math:no_answer",
                                 "extracted": None, "normalized": None, "tolerance": None}
            result["math_verify"] = {"correct": False, "note": "no answer"}
            result["minerva"] = {"correct": False, "note": "no answer"}
            return result
        result["retrace"] = guarded(retrace_rule, retrace_fallback, expected, answer, tol)
        result["math_verify"] = unguarded(math_verify_rule, verdict_fallback, expected, answer)
        result["minerva"] = unguarded(minerva_rule, verdict_fallback, expected, answer)
        return result

    dumps = json.dumps
    StringIO = io.StringIO
    redirect_stdout = contextlib.redirect_stdout
    redirect_stderr = contextlib.redirect_stderr
    catch_warnings = warnings.catch_warnings
    simplefilter = warnings.simplefilter
    disable_logging = logging.disable

    def __retrace_math_check__(b64):
        sink = StringIO()
        with redirect_stdout(sink), redirect_stderr(sink), catch_warnings():
            simplefilter("ignore")
            disable_logging(logging.CRITICAL)
            try:
                result = run(b64)
            finally:
                disable_logging(logging.NOTSET)
        line = PREFIX + dumps(result, ensure_ascii=True)
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    return __retrace_math_check__


import builtins as _retrace_builtins  # noqa: E402

_retrace_builtins.__retrace_math_check__ = _retrace_math_setup()
del _retrace_math_setup, _retrace_builtins
