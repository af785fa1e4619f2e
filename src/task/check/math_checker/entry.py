# The math checker's entry point (after rules.py): one request in, one
# "RETRACE-MATH" line of verdicts out, whatever the rules raise.

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


builtins.__retrace_math_check__ = __retrace_math_check__
