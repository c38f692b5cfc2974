"""Failure as data: a benchmark that crashes becomes a record, not a broken DAG.

A per-config step (profile, timing) runs the benchmark as a child process,
streams its output into the rule's log, and writes a *step record*
(:mod:`embprof.results.steps`): whether it
worked, its return code, and the last lines of its output. The per-config
status (``results/status/<label>.json``) merges the step records, so the report
can list a failed config with its log tail while every other config goes on.
Errors of the workflow itself (bad arguments, a missing tool) are not caught:
they fail the job loudly.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import BinaryIO

from embprof.atomic import write_bytes

TAIL_LINES = 40
_TAIL_BYTES = 256 * 1024


def log_tail(data: bytes, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of terminal output, progress-bar redraws collapsed.

    A progress bar rewrites its line with carriage returns; only what the
    terminal would finally show (the text after the last ``\\r``) is kept.
    """
    text = data.decode("utf-8", errors="replace")
    shown = []
    for line in text.split("\n"):
        parts = [p for p in line.split("\r") if p.strip()]
        if parts:
            shown.append(parts[-1].rstrip())
    return "\n".join(shown[-lines:])


def run_streaming(
    command: Sequence[str],
    env: Mapping[str, str] | None = None,
    sink: BinaryIO | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> tuple[int, str]:
    """Run ``command``, copy its stdout and stderr to ``sink`` as they come, return (rc, tail).

    The sink is the rule's log (the command's stdout), so progress bars show in
    the log while the benchmark runs.
    """
    out = sink if sink is not None else sys.stdout.buffer
    sys.stdout.flush()
    kept = bytearray()
    with subprocess.Popen(
        list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(env or os.environ),
        cwd=cwd,
    ) as proc:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        while chunk := os.read(fd, 65536):
            out.write(chunk)
            out.flush()
            kept += chunk
            if len(kept) > 2 * _TAIL_BYTES:
                del kept[:-_TAIL_BYTES]
        returncode = proc.wait()
    return returncode, log_tail(bytes(kept))


def mark_failed_output(path: str | os.PathLike[str]) -> None:
    """Leave an empty file where a failed step's output belongs (its record says why)."""
    write_bytes(path, b"")
