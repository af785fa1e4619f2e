"""Writes datasets/benign/*.toml from public notebooks and scripts.

Each source is read from a bare git mirror of its repository at a named
commit; its code cells are kept as published, in order. A cell is dropped
(never edited) when it needs the network, a data file it does not make
itself, a terminal or a debugger; every dropped cell is listed in the
notebook's file with the reason. Usage:

    python3 datasets/build_benign.py MIRRORS_DIR

where MIRRORS_DIR holds one bare mirror per repository, named
`owner+name/repo` (as `git clone --mirror` under that name gives).
"""

import json
import re
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "benign"

PDSH = ("jakevdp/PythonDataScienceHandbook", "MIT (code)")
LECTURES = ("scipy-lectures/scientific-python-lectures", "CC-BY-4.0")
PYDATA = ("wesm/pydata-book", "MIT")
SEABORN = ("mwaskom/seaborn", "BSD-3-Clause")
STATSMODELS = ("statsmodels/statsmodels", "BSD-3-Clause")

# (id, repository, path, description)
SOURCES = [
    ("pdsh_01_07_timing", PDSH, "notebooks/01.07-Timing-and-Profiling.ipynb", "%timeit, %time, %prun"),
    ("pdsh_02_01_data_types", PDSH, "notebooks/02.01-Understanding-Data-Types.ipynb", "numpy arrays and Python types"),
    ("pdsh_02_02_numpy_basics", PDSH, "notebooks/02.02-The-Basics-Of-NumPy-Arrays.ipynb", "numpy indexing, slicing, reshaping"),
    ("pdsh_02_03_ufuncs", PDSH, "notebooks/02.03-Computation-on-arrays-ufuncs.ipynb", "numpy ufuncs, scipy.special, %timeit"),
    ("pdsh_02_05_broadcasting", PDSH, "notebooks/02.05-Computation-on-arrays-broadcasting.ipynb", "broadcasting, matplotlib imshow"),
    ("pdsh_02_06_boolean_masks", PDSH, "notebooks/02.06-Boolean-Arrays-and-Masks.ipynb", "comparisons and masks"),
    ("pdsh_02_08_sorting", PDSH, "notebooks/02.08-Sorting.ipynb", "sorting, k nearest neighbours"),
    ("pdsh_02_09_structured", PDSH, "notebooks/02.09-Structured-Data-NumPy.ipynb", "structured arrays"),
    ("pdsh_03_01_pandas_objects", PDSH, "notebooks/03.01-Introducing-Pandas-Objects.ipynb", "Series, DataFrame, Index"),
    ("pdsh_03_02_indexing", PDSH, "notebooks/03.02-Data-Indexing-and-Selection.ipynb", "loc, iloc, selection"),
    ("pdsh_03_03_operations", PDSH, "notebooks/03.03-Operations-in-Pandas.ipynb", "index alignment"),
    ("pdsh_03_04_missing_values", PDSH, "notebooks/03.04-Missing-Values.ipynb", "NaN, None, %timeit"),
    ("pdsh_03_05_hierarchical", PDSH, "notebooks/03.05-Hierarchical-Indexing.ipynb", "MultiIndex"),
    ("pdsh_03_06_concat", PDSH, "notebooks/03.06-Concat-And-Append.ipynb", "concat"),
    ("pdsh_03_07_merge", PDSH, "notebooks/03.07-Merge-and-Join.ipynb", "merge and join"),
    ("pdsh_03_10_strings", PDSH, "notebooks/03.10-Working-With-Strings.ipynb", "vectorised string methods"),
    ("pdsh_04_01_line_plots", PDSH, "notebooks/04.01-Simple-Line-Plots.ipynb", "matplotlib line plots"),
    ("pdsh_04_02_scatter", PDSH, "notebooks/04.02-Simple-Scatter-Plots.ipynb", "scatter plots, sklearn's iris"),
    ("pdsh_04_04_contours", PDSH, "notebooks/04.04-Density-and-Contour-Plots.ipynb", "contour plots"),
    ("pdsh_04_05_histograms", PDSH, "notebooks/04.05-Histograms-and-Binnings.ipynb", "histograms, hexbin, KDE"),
    ("pdsh_04_08_subplots", PDSH, "notebooks/04.08-Multiple-Subplots.ipynb", "subplots and gridspec"),
    ("pdsh_04_12_3d", PDSH, "notebooks/04.12-Three-Dimensional-Plotting.ipynb", "mplot3d"),
    ("pdsh_05_06_linear_regression", PDSH, "notebooks/05.06-Linear-Regression.ipynb", "scikit-learn linear models, basis functions"),
    ("pdsh_05_09_pca", PDSH, "notebooks/05.09-Principal-Component-Analysis.ipynb", "scikit-learn PCA on digits"),
    ("lectures_numpy_array_object", LECTURES, "intro/numpy/array_object.md", "numpy arrays, %timeit, file writes"),
    ("lectures_numpy_operations", LECTURES, "intro/numpy/operations.md", "numpy operations"),
    ("lectures_matplotlib", LECTURES, "intro/matplotlib/index.md", "matplotlib tutorial"),
    ("lectures_scipy", LECTURES, "intro/scipy/index.md", "scipy: io, linalg, optimize, stats, interpolate, integrate, signal, ndimage"),
    ("lectures_sympy", LECTURES, "packages/sympy.md", "sympy tutorial"),
    ("lectures_advanced_numpy", LECTURES, "advanced/advanced_numpy/index.md", "numpy internals, strides"),
    ("lectures_scipy_sparse_solvers", LECTURES, "advanced/scipy_sparse/solvers.md", "scipy.sparse solvers"),
    ("pydata_appa_advanced_numpy", PYDATA, "appa.ipynb", "advanced numpy: a memory-mapped file of 800 MB apparent size"),
    ("pydata_ch06_sqlite_io", PYDATA, "ch06.ipynb", "data loading and storage: files written and read back, sqlite"),
    ("seaborn_many_pairwise_correlations", SEABORN, "examples/many_pairwise_correlations.py", "seaborn heatmap"),
    ("seaborn_hexbin_marginals", SEABORN, "examples/hexbin_marginals.py", "seaborn jointplot"),
    ("seaborn_kde_ridgeplot", SEABORN, "examples/kde_ridgeplot.py", "seaborn FacetGrid, kdeplot"),
    ("seaborn_many_facets", SEABORN, "examples/many_facets.py", "seaborn FacetGrid"),
    ("seaborn_wide_data_lineplot", SEABORN, "examples/wide_data_lineplot.py", "seaborn lineplot"),
    ("seaborn_residplot", SEABORN, "examples/residplot.py", "seaborn residplot"),
    ("statsmodels_ols", STATSMODELS, "examples/notebooks/ols.ipynb", "statsmodels OLS"),
    ("statsmodels_wls", STATSMODELS, "examples/notebooks/wls.ipynb", "statsmodels WLS"),
    ("statsmodels_glm", STATSMODELS, "examples/notebooks/glm.ipynb", "statsmodels GLM on a bundled dataset"),
    ("statsmodels_robust_models", STATSMODELS, "examples/notebooks/robust_models_0.ipynb", "statsmodels RLM on a bundled dataset"),
]

# What a dropped cell needs, as a pattern of its source; first match wins.
DROP = [
    (r"load_dataset\(|fetch_[a-z]|urlopen|urlretrieve|requests\.get|\bcurl\b|\bwget\b|pandas_datareader|datareader|scipy\.datasets|datasets\.(face|ascent|electrocardiogram)|misc\.face|get_rdataset|webuse|pooch", "needs the network"),
    (r"""['"](\.\./)?(data|examples|datasets|figures)/|(^|\s)!\S+.*\s(data|examples)/|read_csv\(['"][^'"]*\.csv|np\.loadtxt\(['"]|load\(['"]data|'moonlanding|brain_size|\.wav['"]|president_heights|Seattle|births|FremontBridge|recipe|BicycleWeather|california_cities|marathon""", "reads a data file it does not make"),
    (r"(^|\n)\s*%(debug|pdb)\b|\binput\(|%paste|%cpaste|%load\b|%run\b|%lprun|%mprun|%memit|%load_ext", "needs a terminal, a debugger, a file of the book or an extension the image lacks"),
    (r"%matplotlib (notebook|widget|qt|tk|osx)", "needs an interactive matplotlib backend"),
]
# Cells dropped by hand, by notebook id and the cell's index in the source
# (0-based, counting code cells only), with the reason.
MANUAL = {}
# Cells whose text legitimately differs between two runs in a way a second
# run may not show, by notebook id and source index, with the reason: only
# the kinds of their outputs are compared.
VARIES = {
    ("lectures_sympy", 48): "a dict of symbols prints in hash order, which changes with each process's string hash seed",
}


def git_show(mirrors: Path, repo: str, commit: str, path: str) -> str:
    git_dir = mirrors / repo.replace("/", "+") / "repo"
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"{commit}:{path}"],
        check=True, capture_output=True, text=True,
    ).stdout


def head(mirrors: Path, repo: str) -> str:
    git_dir = mirrors / repo.replace("/", "+") / "repo"
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", "rev-parse", "HEAD"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()


def cells_of(path: str, text: str) -> list[str]:
    if path.endswith(".ipynb"):
        nb = json.loads(text)
        return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    if path.endswith(".md"):
        # MyST code cells: ```{code-cell} ... ```; leading `:key: value`
        # option lines belong to the directive, not the code.
        out = []
        for m in re.finditer(r"^```\{code-cell\}[^\n]*\n(.*?)^```", text, re.S | re.M):
            lines = m.group(1).split("\n")
            while lines and re.match(r"^:[a-z_-]+:", lines[0]):
                lines.pop(0)
            while lines and lines[0].strip() == "" and len(lines) > 1:
                lines.pop(0)
            out.append("\n".join(lines).rstrip("\n"))
        return out
    if path.endswith(".py"):
        # A gallery script is one cell, its docstring included.
        return [text.rstrip("\n")]
    raise ValueError(path)


def toml_string(s: str) -> str:
    if "'''" not in s and not s.endswith("'") and "\r" not in s:
        return "'''\n" + s + "'''"
    return json.dumps(s, ensure_ascii=False)


def main() -> None:
    mirrors = Path(sys.argv[1])
    commits = {}
    total = 0
    for ident, (repo, licence), path, description in SOURCES:
        commit = commits.setdefault(repo, head(mirrors, repo))
        cells = cells_of(path, git_show(mirrors, repo, commit, path))
        kept, dropped, varies = [], [], []
        for i, cell in enumerate(cells):
            if not cell.strip():
                continue
            why = MANUAL.get((ident, i))
            if why is None:
                why = next((w for p, w in DROP if re.search(p, cell)), None)
            if why:
                dropped.append((i, why))
            else:
                if (ident, i) in VARIES:
                    varies.append((len(kept), VARIES[(ident, i)]))
                kept.append(cell)
        total += len(kept)
        lines = [
            f"id = {json.dumps(ident)}",
            f"description = {json.dumps(description)}",
            "cells = [",
        ]
        lines += [toml_string(c) + "," for c in kept]
        lines += ["]"]
        if varies:
            lines += ["varies = ["]
            lines += [f"  {{ cell = {i}, why = {json.dumps(w)} }}," for i, w in varies]
            lines += ["]"]
        lines += [
            "",
            "[source]",
            f"repository = {json.dumps(repo)}",
            f"path = {json.dumps(path)}",
            f"commit = {json.dumps(commit)}",
            f"licence = {json.dumps(licence)}",
            "dropped = [",
        ]
        lines += [f"  {{ cell = {i}, why = {json.dumps(w)} }}," for i, w in dropped]
        lines += ["]", ""]
        (OUT / f"{ident}.toml").write_text("\n".join(lines))
        print(f"{ident}: {len(kept)} cells kept, {len(dropped)} dropped")
    print(f"{len(SOURCES)} notebooks, {total} cells")


if __name__ == "__main__":
    main()
