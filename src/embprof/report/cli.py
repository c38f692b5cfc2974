"""What every workflow script shares: bad input ends in one line on stderr and exit code 1."""

from __future__ import annotations

import sys
from collections.abc import Callable

from embprof.plots.export import ExportError
from embprof.report.load import InputError

EXPECTED_ERRORS = (InputError, ExportError, OSError)


def run_guarded(prog: str, action: Callable[[], object]) -> int:
    """Run ``action``; known failures print ``prog: error: ...`` and return 1, never a traceback."""
    try:
        action()
    except EXPECTED_ERRORS as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"{prog}: error: {message}", file=sys.stderr)
        return 1
    return 0
