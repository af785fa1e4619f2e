"""``python -m retrace ARGS``: replaces this process with the retrace binary."""

import os
import sys

from retrace import find_retrace_bin


def main() -> None:
    try:
        retrace = find_retrace_bin()
    except FileNotFoundError as e:
        print(f"retrace: {e}", file=sys.stderr)
        sys.exit(3)
    os.execv(retrace, [retrace, *sys.argv[1:]])


if __name__ == "__main__":
    main()
