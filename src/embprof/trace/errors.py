"""The one exception the breakdown raises for bad input."""

from __future__ import annotations

from pathlib import Path

from embprof.errors import EmbprofError


class TraceError(EmbprofError):
    """Bad or unusable input; ``str()`` is one line naming the file and the problem."""

    def __init__(self, path: Path | str, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"{path}: {problem}")
