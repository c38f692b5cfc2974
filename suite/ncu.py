"""``--profile ncu-gen``: the exact Nsight Compute command that profiles one config.

ncu replays every kernel many times, so it runs on one config and on chosen
iterations only. The benchmark run under ncu (``--profile ncu``) runs every
iteration inside ``<label> > ncu_iter > iter_<i>`` ranges; the command's
``--nvtx-include 'ncu_iter/iter_<i>/'`` filters keep the selected ones.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence

from embprof.labels import sanitize_label

BENCHMARK_FILE = "suite/benchmark_batched_dynamicemb_tables.py"


def parse_iterations(spec: str, num_iterations: int) -> list[int]:
    """``'0,3,7'`` or a Python slice ``'begin:end:step'`` (parts optional) -> sorted iteration indices.

    Raises ``ValueError`` for a malformed spec or when nothing falls in ``[0, num_iterations)``.
    """
    spec = spec.strip()
    try:
        if ":" in spec:
            parts = spec.split(":")
            if len(parts) > 3:
                raise ValueError
            bounds = [int(p) if p.strip() else None for p in parts] + [None] * (3 - len(parts))
            if bounds[2] is not None and bounds[2] <= 0:
                raise ValueError
            chosen = range(num_iterations)[slice(*bounds)]
        else:
            chosen = [int(tok) for tok in spec.split(",") if tok.strip()]
    except ValueError:
        raise ValueError(
            f"--ncu-iterations {spec!r}: expected a comma list ('0,3,7') or begin:end:step with a positive step"
        ) from None
    outside = [i for i in chosen if not 0 <= i < num_iterations]
    if outside:
        raise ValueError(f"--ncu-iterations {spec!r}: {outside} outside 0..{num_iterations - 1}")
    if not chosen:
        raise ValueError(f"--ncu-iterations {spec!r} selects no iteration of {num_iterations}")
    return sorted(set(chosen))


def keyword_expression(suite: str, label: str) -> str:
    """A ``-k`` expression matching exactly one config: the suite and every '='-free part of the label.

    pytest's ``-k`` grammar rejects '='; the parts between them, ANDed, still pin the label.
    """
    return " and ".join([suite, *(part for part in label.split("=") if part)])


def ncu_command(
    *,
    suite: str,
    label: str,
    preset: str,
    iterations: Sequence[int],
    num_iterations: int,
    kernel_regex: str | None,
    passthrough: Sequence[str] = (),
    python: str = sys.executable,
) -> str:
    """The shell command: ncu around one pytest run of ``label`` in ``--profile ncu`` mode."""
    ncu = [
        "ncu",
        "-f",
        "--target-processes",
        "all",
        "--profile-from-start",
        "off",
        "--nvtx",
    ]
    for i in iterations:
        ncu += ["--nvtx-include", f"ncu_iter/iter_{i}/"]
    if kernel_regex:
        ncu += ["--kernel-name", f"regex:{kernel_regex}"]
    ncu += ["--set", "full", "-o", f"ncu_{sanitize_label(label)}"]
    inner = [
        python,
        "-m",
        "pytest",
        BENCHMARK_FILE,
        "-q",
        "-o",
        "timeout=0",
        "-k",
        keyword_expression(suite, label),
        "--label",
        label,
        "--preset",
        preset,
        "--profile",
        "ncu",
        "--num-iterations",
        str(num_iterations),
        *passthrough,
    ]
    return shlex.join(ncu + inner)
