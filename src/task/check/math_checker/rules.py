# The math checker's rules 2 and 3 (after compare.py): Math-Verify's and
# Minerva's (lm-evaluation-harness minerva_math).

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
