"""A stand-in for ``nvidia-smi`` that answers ``--query-gpu`` from a real capture.

    python tests/fake_nvidia_smi.py CAPTURE.csv --query-gpu=F1,F2,... --format=csv[,noheader]

``CAPTURE.csv`` is what a real ``nvidia-smi --query-gpu=<every field> --format=csv``
printed (tests/data/nvidia-smi/); the queried columns are printed as it printed
them, header and units included. :func:`install` puts it on a PATH as
``nvidia-smi``, so code under test runs the command it would run on a GPU host.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DATA = Path(__file__).parent / "data" / "nvidia-smi"
H200_LOAD = DATA / "h200_590.48.01_load_query_gpu.csv"


def answer(capture: Path, args: list[str]) -> tuple[int, str]:
    """(exit code, output) of ``nvidia-smi *args`` on the captured machine."""
    options = dict(arg.split("=", 1) for arg in args if "=" in arg)
    if "--query-gpu" not in options or not options.get("--format", "").startswith("csv"):
        return 2, "fake nvidia-smi: only --query-gpu=... --format=csv[,noheader] was captured\n"
    header, *rows = [line.split(", ") for line in capture.read_text().splitlines() if line.strip()]
    names = [cell.split(" [")[0] for cell in header]  # "clocks.current.sm [MHz]" -> its field
    wanted = options["--query-gpu"].split(",")
    unknown = [field for field in wanted if field not in names]
    if unknown:
        return 2, f'Field "{unknown[0]}" is not a valid field to query.\n\n'
    if "nounits" in options["--format"]:
        return 2, "fake nvidia-smi: the capture keeps its units; nounits was not captured\n"
    columns = [names.index(field) for field in wanted]
    lines = [] if "noheader" in options["--format"] else [", ".join(header[c] for c in columns)]
    lines += [", ".join(row[c] for c in columns) for row in rows]
    return 0, "\n".join(lines) + "\n"


def install(bin_dir: Path, capture: Path = H200_LOAD) -> dict[str, str]:
    """An ``nvidia-smi`` in ``bin_dir`` that answers from ``capture``; returns an environment
    with ``bin_dir`` first on PATH."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "nvidia-smi"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).resolve()}" "{capture}" "$@"\n')
    script.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


if __name__ == "__main__":
    code, out = answer(Path(sys.argv[1]), sys.argv[2:])
    (sys.stdout if code == 0 else sys.stderr).write(out)
    sys.exit(code)
