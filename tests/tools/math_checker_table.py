"""Run the table in docs/math-checking.md through the real checker.

    python tests/tools/math_checker_table.py [docs/math-checking.md] [--print]

Needs a Python with the checker image's pins (images/checker.lock). Exits 1 and
lists the rows whose verdicts differ from the document; --print writes every
row back with the verdicts the checker returns (to regenerate the table).
"""
import base64
import builtins
import contextlib
import io
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
HEADER = "| expected | answer | retrace | rule | Math-Verify | Minerva |"


def rows(doc):
    lines = doc.splitlines()
    start = lines.index(HEADER)
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        yield line, cells


def checker_source():
    """The checker's files in the order its loader joins them."""
    loader = (ROOT / "src/harness/math_checker.rs").read_text()
    parts = re.findall(r'include_str!\("\.\./(task/check/math_checker/\w+\.py)"\)', loader)
    return "".join((ROOT / "src" / p).read_text() for p in parts)


def main(argv):
    path = pathlib.Path(next((a for a in argv if not a.startswith("--")),
                             ROOT / "docs" / "math-checking.md"))
    exec(compile(checker_source(), "<retrace-math>", "exec"), {"__name__": "_retrace_math"})
    check = builtins.__retrace_math_check__
    yn = {True: "yes", False: "no"}
    bad = 0
    for line, c in rows(path.read_text()):
        expected, answer = c[0].strip("`"), c[1].strip("`")
        req = {"expected": expected, "answer": answer, "rel_tol": 1e-6}
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            check(base64.b64encode(json.dumps(req).encode()).decode())
        out = json.loads(buf.getvalue().split(" ", 1)[1])
        got = [yn[out["retrace"]["correct"]], "`%s`" % out["retrace"]["rule"],
               yn[out["math_verify"]["correct"]], yn[out["minerva"]["correct"]]]
        if "--print" in argv:
            print("| `%s` | `%s` | %s |" % (expected, answer, " | ".join(got)))
        elif got != c[2:6]:
            bad += 1
            print("MISMATCH", line, "->", got)
    if "--print" not in argv:
        print("all rows agree" if not bad else "%d rows differ" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
