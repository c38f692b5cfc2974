"""Export one nsys report to SQLite (``nsys export --type sqlite``), atomically.

    python workflow/scripts/export.py --nsys PATH results/traces/LABEL.nsys-rep \
        --out results/sqlite/LABEL.sqlite
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from embprof.workflow.benchcli import nsys_export_command  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", help=".nsys-rep file")
    parser.add_argument("--nsys", default="nsys", help="nsys binary")
    parser.add_argument("--out", required=True, help=".sqlite file to write")
    args = parser.parse_args(argv)

    report, out = Path(args.report), Path(args.out)
    if not report.is_file() or report.stat().st_size == 0:
        print(f"export: error: {report} is missing or empty", file=sys.stderr)
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.stem}.tmp.sqlite")
    command = nsys_export_command(args.nsys, str(report), str(tmp))
    print("+", " ".join(command), flush=True)
    try:
        done = subprocess.run(command, check=False)
    except OSError as exc:
        print(f"export: error: cannot run {args.nsys}: {exc}", file=sys.stderr)
        return 1
    if done.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        print(f"export: error: nsys export exited with {done.returncode}", file=sys.stderr)
        return 1
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
