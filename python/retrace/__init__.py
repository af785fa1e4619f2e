"""The ``retrace`` command-line tool, installed as a binary beside this package.

The wheel carries the compiled ``retrace`` binary in its scripts directory;
this package only finds it (``python -m retrace`` runs it).
"""

import os
import sys
import sysconfig

__all__ = ["find_retrace_bin"]


def find_retrace_bin() -> str:
    """The path of the ``retrace`` binary installed with this package.

    The places pip puts a wheel's scripts, those of this package's own
    install first: ``<prefix>/bin`` beside ``<prefix>/lib/pythonX.Y/
    site-packages/retrace`` (a venv, ``--user``, ``--prefix``), ``T/bin``
    beside ``T/retrace`` (``--target``), then the interpreter's scripts
    directory and the user scheme's. Raises ``FileNotFoundError`` naming
    every place looked at.
    """
    exe = "retrace" + (sysconfig.get_config_var("EXE") or "")
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.version_info >= (3, 10):
        user_scheme = sysconfig.get_preferred_scheme("user")
    else:
        user_scheme = "posix_user"
    candidates = [
        os.path.join(here, os.pardir, os.pardir, os.pardir, os.pardir, "bin"),
        os.path.join(here, os.pardir, "bin"),
        sysconfig.get_path("scripts"),
        sysconfig.get_path("scripts", scheme=user_scheme),
    ]
    looked = []
    for directory in candidates:
        directory = os.path.normpath(directory)
        if directory in looked:
            continue
        looked.append(directory)
        path = os.path.join(directory, exe)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise FileNotFoundError(
        "the retrace binary is not installed beside the retrace package "
        f"(looked in {', '.join(looked)}); reinstall it: pip install --force-reinstall retrace"
    )
