# IPython kernel configuration for retrace images.
#
# retrace launches every kernel with `--config=<image>/kernel_config.py` (the path
# must be absolute: ipykernel silently ignores a relative one). Everything here is
# about making kernel output machine-friendly and the kernel cheap to start.
import os

c = get_config()  # noqa: F821 (injected by traitlets when this file is loaded)

# Plain tracebacks: retrace parses them and feeds them back to the model, so no
# ANSI escapes. IPython 9 spells the scheme in lowercase ("NoColor" is still
# accepted but warns); this also covers SyntaxError tracebacks.
c.InteractiveShell.colors = "nocolor"

# No SQLite history database: kernels are one-shot, and the file would be written
# into a HOME that may be read-only or shared. Caveat (ipykernel 7.4): this makes
# the kernel's exit faster, which exposes a shutdown race in ipykernel (the
# control thread flushes stdout after the iopub thread has stopped, then waits
# out a 10 s flush timeout); about half of all shutdown_requests hit it. Kernels
# are killed after a short grace anyway, so retrace does not wait for it.
c.HistoryManager.enabled = False

# No banner in kernel_info replies (IPython 9 appends a random "Tip:" unless
# enable_tip is off).
c.InteractiveShell.banner1 = ""
c.InteractiveShell.banner2 = ""
c.InteractiveShell.enable_tip = False

# Inline matplotlib, selected lazily: ipykernel honours MPLBACKEND when pyplot is
# first imported, so kernels without matplotlib (slim) start cleanly and pay
# nothing, and a matplotlib installed later (dynamic strategy) still renders
# inline. `IPKernelApp.matplotlib = "inline"` would import matplotlib at startup
# (about +0.35 s per kernel) and warn on images without it. Assigned, not
# defaulted, so a stray MPLBACKEND in the launcher's environment cannot make
# figures silently vanish.
os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"

# Figures still open when a cell ends are sent as display_data (image/png) and
# closed, so a model that forgets plt.show() still produces its artifact and
# figures do not accumulate across rounds.
c.InlineBackend.close_figures = True
