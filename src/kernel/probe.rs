//! retrace's code inside every kernel (`probe.py`): its source, where a
//! kernel finds it, the cells that install it, and the expression that
//! reads a cell's answer through it.

/// retrace's code inside every kernel: answer reader and state inspector
/// (`probe.py`, `probe_sympy.py`, `probe_cell.py`, `probe_install.py`),
/// then what a cell produces beyond its output: chart data (`chart.py`),
/// saved files, table schemas and `Image.show()` (`outputs.py`). One
/// source, run in one namespace.
pub(super) const PROBE_SOURCE: &str = concat!(
    include_str!("probe.py"),
    include_str!("probe_sympy.py"),
    include_str!("probe_cell.py"),
    include_str!("probe_install.py"),
    include_str!("chart.py"),
    include_str!("outputs.py")
);

/// Where the kernel finds it in its HOME (the installing cell removes it).
pub(super) const PROBE_FILE: &str = ".retrace-probe.py";

/// In the runtime directory: a forked kernel installed the probe itself
/// before it answered (zygote.py's `PROBE_MARKER`).
pub(super) const PROBE_MARKER: &str = "probe-installed";

/// Reads this cell's answer after every cell with retrace's own serializer
/// (`probe.py`, installed at kernel start): never a custom `__repr__`, never
/// an `answer` left by an earlier cell. First it publishes the files the
/// cell wrote (`outputs.py`), in at most `file_bytes` bytes: the output
/// cap, so that no file's message is larger than the cap allows on the wire.
pub(super) fn answer_expression(file_bytes: u64) -> String {
    format!("__retrace_answer__({file_bytes})")
}
/// The key of that expression in `user_expressions`.
pub(super) const ANSWER_KEY: &str = "retrace";

/// The cell that installs retrace's kernel-side code (`probe.py`) in a
/// kernel retrace laid out.
/// The source comes from a file in the kernel's HOME (written there with the
/// layout, removed by this cell): ipykernel hashes and tokenizes every cell
/// in pure Python, which took longer for the source sent inline than
/// running it. A zygote kernel finds that source already compiled by its
/// zygote (`sys._retrace_probe`, source → code, taken away here).
pub(super) fn probe_from_home() -> String {
    format!(
        "exec((lambda os, sys: (lambda src: sys.__dict__.pop('_retrace_probe', {{}}).get(src) \
         or compile(src, '<retrace>', 'exec'))((lambda p: (open(p, encoding='utf-8').read(), os.remove(p))[0])\
         (os.path.join(os.environ['HOME'], '{PROBE_FILE}'))))(__import__('os'), __import__('sys')), \
         {PROBE_GLOBALS})"
    )
}

/// The installing cell for a kernel retrace did not lay out (a gateway's):
/// the source travels in the cell. A JSON string is a Python string literal.
pub(super) fn probe_inline() -> String {
    let source = serde_json::to_string(PROBE_SOURCE).unwrap_or_default();
    format!("exec(compile({source}, '<retrace>', 'exec'), {PROBE_GLOBALS})")
}

/// The probe runs in a namespace of its own with a copy of the pristine
/// builtins, never in the user's.
const PROBE_GLOBALS: &str =
    "{'__name__': '_retrace', '__builtins__': dict(__import__('builtins').__dict__)}";
