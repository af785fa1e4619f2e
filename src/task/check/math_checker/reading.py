# The math checker's readers (after base.py): Python-ish text through the
# AST whitelist, LaTeX the way Math-Verify reads it, the answer's kernel text.

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
            return self.float_call(n, kw, d)
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
        return self.construct(name, kind, f, [self.value(a, d) for a in n.args])

    def float_call(self, n, kw, d):
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

    def construct(self, name, kind, f, args):
        """A call whose arguments are read: collections, intervals,
        relations, matrices and plain sympy constructors."""
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
