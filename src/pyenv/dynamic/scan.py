# retrace: what a cell asks to install and imports, found with IPython's own
# input transformer and Python's parser (never by pattern matching on text).
# Reads the cell from the file named by its argument, writes one JSON object
# on stdout:
#   {"installs": [{"line", "tool", "args"}], "imports": [{"module", "line"}],
#    "code": <the cell with every install line replaced by `pass`>,
#    "syntax_error": null | "<message>"}
# Run with the slim image's interpreter (`python -I`), which has IPython.
import ast
import io
import json
import sys
import tokenize

from IPython.core.inputtransformer2 import TransformerManager

NEUTRAL = "pass  # retrace: install requests are handled outside the kernel"
INSTALLERS = {"pip", "pip3", "conda", "mamba", "uv"}


def install_args(words):
    """`pip install a b` / `python -m pip install a` / `uv pip install a` -> (tool, args)."""
    words = [w for w in words if w]
    if words and words[0].rsplit("/", 1)[-1].startswith("python") and words[1:3] == ["-m", "pip"]:
        words = words[2:]
    if words[:2] == ["uv", "pip"]:
        words = words[1:]
    if len(words) >= 2 and words[0] in INSTALLERS and words[1] == "install":
        return words[0], words[2:]
    return None


def shell_words(text):
    import shlex

    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def from_call(node):
    """get_ipython().run_line_magic('pip', 'install x') or .system('pip install x')."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    args = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if node.func.attr == "run_line_magic" and len(args) == 2:
        return install_args([args[0]] + shell_words(args[1]))
    if node.func.attr in ("system", "getoutput") and len(args) == 1:
        return install_args(shell_words(args[0]))
    return None


def bare_install(line):
    """A plain `pip install x` line: not Python; its tokens say what it is."""
    try:
        tokens = [t.string for t in tokenize.generate_tokens(io.StringIO(line.strip()).readline) if t.string.strip()]
    except (tokenize.TokenError, SyntaxError):
        return None
    if len(tokens) >= 2 and tokens[0] in INSTALLERS and tokens[1] == "install":
        return install_args(shell_words(line.strip()))
    return None


def scan(cell):
    lines = cell.split("\n")
    installs = {}
    transformed = TransformerManager().transform_cell(cell)
    tree, error = None, None
    for _ in range(len(lines) + 1):
        try:
            tree = ast.parse(transformed)
            break
        except SyntaxError as e:
            row = (e.lineno or 0) - 1
            t_lines = transformed.split("\n")
            found = bare_install(t_lines[row]) if 0 <= row < len(t_lines) else None
            if found is None:
                error = f"{type(e).__name__}: {e.msg} (line {e.lineno})"
                break
            installs[row + 1] = found
            indent = t_lines[row][: len(t_lines[row]) - len(t_lines[row].lstrip())]
            t_lines[row] = indent + NEUTRAL
            transformed = "\n".join(t_lines)
    imports = []
    if tree is not None:
        for node in ast.walk(tree):
            found = from_call(node)
            if found is not None:
                installs[node.lineno] = found
            if isinstance(node, ast.Import):
                imports += [{"module": a.name.split(".")[0], "line": node.lineno} for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imports.append({"module": node.module.split(".")[0], "line": node.lineno})
            elif (
                isinstance(node, ast.Call)
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
                and (
                    (isinstance(node.func, ast.Name) and node.func.id == "__import__")
                    or (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                )
            ):
                imports.append({"module": node.args[0].value.split(".")[0], "line": node.lineno})
    # Line magics and shell escapes keep their line in the transformed cell,
    # so the line numbers are the cell's own.
    for row in installs:
        if 0 < row <= len(lines):
            original = lines[row - 1]
            lines[row - 1] = original[: len(original) - len(original.lstrip())] + NEUTRAL
    imports.sort(key=lambda i: (i["line"], i["module"]))
    return {
        "installs": [{"line": row, "tool": tool, "args": args} for row, (tool, args) in sorted(installs.items())],
        "imports": imports,
        "code": "\n".join(lines),
        "syntax_error": error,
    }


with open(sys.argv[1], encoding="utf-8") as cell:
    json.dump(scan(cell.read()), sys.stdout)
