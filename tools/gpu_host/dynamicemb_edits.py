"""The edits that make a copy of NVIDIA's corelib/dynamicemb build and run on an offline GPU host.

    python3 tools/gpu_host/dynamicemb_edits.py COPY [--arch 90] [--cache-total-cap ROWS]

COPY is a copy of recsys-examples' ``corelib/dynamicemb`` (never the user's
checkout: the edits are made in place). Each edit must find exactly what it
expects, or the script stops with one line and changes nothing, so a newer
upstream that moved things is noticed, not half-edited:

- ``setup.py``: drop its two ``pip`` calls at import time (``pip uninstall
  dynamicemb``, ``pip install ordered-set``: no network there), drop the call
  ``check_torchrec_version()`` (not needed to compile), and keep only the
  ``-gencode`` pair of ``--arch`` (it hard-codes five architectures, which
  ignores TORCH_CUDA_ARCH_LIST and takes several times longer to build);
- ``benchmark/benchmark_batched_dynamicemb_tables.py`` (only with
  ``--cache-total-cap``): ``_CACHE_TOTAL_CAP``, the total rows of the suites that
  keep rows off the GPU (256M upstream: more host memory than a 128 GiB host has).

It prints what it changed, one line per edit, for the record of the run.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

SETUP = "setup.py"
SUITE = "benchmark/benchmark_batched_dynamicemb_tables.py"
_GENCODE = re.compile(r'\s*"-gencode",\s*"arch=compute_(?P<arch>\d+),code=sm_\d+",')
_CACHE_CAP = re.compile(r"^_CACHE_TOTAL_CAP = .*$", re.M)


class EditError(Exception):
    """The copy is not what the edits expect (another upstream version)."""


def _top_level_calls(tree: ast.Module, wanted) -> list[ast.stmt]:
    return [node for node in tree.body if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and wanted(node.value)]


def _drop_lines(text: str, nodes: list[ast.stmt]) -> str:
    lines = text.splitlines(keepends=True)
    for node in sorted(nodes, key=lambda n: n.lineno, reverse=True):
        del lines[node.lineno - 1:node.end_lineno]
    return "".join(lines)


def _is_pip_call(call: ast.Call) -> bool:
    func = call.func
    named = isinstance(func, ast.Attribute) and func.attr == "run" and getattr(func.value, "id", "") == "subprocess"
    return named and any(isinstance(n, ast.Constant) and n.value == "pip" for n in ast.walk(call))


def _is_version_check(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Name) and call.func.id == "check_torchrec_version"


def edit_setup(text: str, arch: str) -> tuple[str, list[str]]:
    tree = ast.parse(text)
    pip_calls = _top_level_calls(tree, _is_pip_call)
    checks = _top_level_calls(tree, _is_version_check)
    if len(pip_calls) != 2:
        raise EditError(f"{SETUP}: expected 2 pip calls at import time, found {len(pip_calls)}")
    if len(checks) != 1:
        raise EditError(f"{SETUP}: expected one call check_torchrec_version(), found {len(checks)}")
    text = _drop_lines(text, pip_calls + checks)
    archs = [m["arch"] for m in _GENCODE.finditer(text)]
    if arch not in archs:
        raise EditError(f"{SETUP}: no -gencode pair for compute_{arch} (found {', '.join(archs) or 'none'})")
    text = _GENCODE.sub(lambda m: m.group(0) if m["arch"] == arch else "", text)
    dropped = [a for a in archs if a != arch]
    return text, [
        f"{SETUP}: dropped the import-time pip calls (pip uninstall dynamicemb, pip install ordered-set)",
        f"{SETUP}: dropped the call check_torchrec_version()",
        f"{SETUP}: -gencode for sm_{arch} only (dropped sm_{', sm_'.join(dropped)})",
    ]


def edit_suite(text: str, rows: int) -> tuple[str, list[str]]:
    found = _CACHE_CAP.findall(text)
    if len(found) != 1:
        raise EditError(f"{SUITE}: expected one line '_CACHE_TOTAL_CAP = ...', found {len(found)}")
    return _CACHE_CAP.sub(f"_CACHE_TOTAL_CAP = {rows}", text), [
        f"{SUITE}: {found[0].strip()} -> _CACHE_TOTAL_CAP = {rows}"
    ]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("copy", type=Path, help="a copy of corelib/dynamicemb, edited in place")
    parser.add_argument("--arch", default="90", help="the one compute capability to build (default 90: H100, H200)")
    parser.add_argument("--cache-total-cap", type=int, default=None,
                        help="rows of the off-GPU suites in all (default: upstream's)")
    args = parser.parse_args(argv)
    try:
        edits: dict[Path, str] = {}
        notes: list[str] = []
        setup = args.copy / SETUP
        if not setup.is_file():
            raise EditError(f"{args.copy}: no {SETUP}: not a copy of corelib/dynamicemb")
        edits[setup], done = edit_setup(setup.read_text(), args.arch)
        notes += done
        if args.cache_total_cap is not None:
            suite = args.copy / SUITE
            if not suite.is_file():
                raise EditError(f"{args.copy}: no {SUITE}")
            edits[suite], done = edit_suite(suite.read_text(), args.cache_total_cap)
            notes += done
    except (EditError, OSError, SyntaxError) as error:
        print(f"dynamicemb_edits: {error}", file=sys.stderr)
        return 1
    for path, text in edits.items():  # every edit found what it expected: now write
        path.write_text(text)
    print("\n".join(notes))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
