"""Compile, for a CUDA GPU and with no GPU here, every Triton kernel variant the kernel tests launch.

    python tools/gpu_host/compile_kernels.py [--triton-site SITE] [--arch 90] [--tests FILE ...]

Why: Triton's compiler differs between versions, and its interpreter (the CI path) compiles nothing, so a
kernel the interpreter and one Triton accept can still fail to compile with the GPU host's. Triton 3.6
(torch 2.11's) rejected ``_locate_kernel`` in its layout pass; the library then fell back to torch for
``find_or_claim`` after the step's first kernel had written, and 123 CUDA tests failed, which was found only
on the GPU, after a lease's install. This runs the kernel tests under this environment's interpreter,
records each launch's kernel, argument types, constexprs and launch options, then compiles each variant
to a cubin for ``sm_<arch>`` in a child process whose Triton is SITE's (the GPU host's version, its wheel
unpacked with ``pip install --no-deps --target SITE triton==X``; default: this environment's). It prints
one line per kernel and exits non-zero when any variant fails to compile.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TESTS = ["tests/test_dynemb_kernels.py"]
_TORCH_TYPES = {"int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "i1", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64"}
_LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas")


def _type_of(value: Any) -> str | None:
    """The Triton signature type of a runtime argument, or None for one Triton takes as a constexpr (None)."""
    import torch

    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        return "*" + _TORCH_TYPES[str(value.dtype).removeprefix("torch.")]
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -(2**31) <= value < 2**31 else "i64"
    if isinstance(value, float):
        return "fp32"
    raise TypeError(f"no Triton type for an argument of type {type(value).__name__}")


class Recorder:
    """A pytest plugin that wraps ``triton_ops._launch`` and keeps each distinct variant as a JSON-able dict."""

    def __init__(self) -> None:
        self.variants: dict[str, dict[str, Any]] = {}

    def pytest_configure(self, config: Any) -> None:
        from dynemb.kernels import triton_ops

        launch = triton_ops._launch

        def recording(kernel: Any, grid: tuple[int, ...], *args: Any, **meta: Any) -> None:
            types = {name: _type_of(value) for name, value in zip(kernel.arg_names, args, strict=False)}  # the rest come by name
            variant = {
                "module": kernel.fn.__module__, "kernel": kernel.fn.__name__,
                "signature": {name: kind for name, kind in types.items() if kind is not None},
                "constexprs": {**{name: value for name, value in meta.items() if name not in _LAUNCH_OPTIONS}, **{name: None for name, kind in types.items() if kind is None}},
                "options": {name: meta[name] for name in _LAUNCH_OPTIONS if name in meta},
            }
            self.variants.setdefault(json.dumps(variant, sort_keys=True), variant)
            launch(kernel, grid, *args, **meta)

        triton_ops._launch = recording


def record(tests: list[str]) -> list[dict[str, Any]] | None:
    """The variants the tests launch under the interpreter, or None when the tests fail."""
    os.environ["TRITON_INTERPRET"] = "1"  # before Triton is first imported: the tests run on CPU tensors
    import pytest

    recorder = Recorder()
    status = pytest.main(["-q", "-p", "no:cacheprovider", "-x", *tests], plugins=[recorder])
    return list(recorder.variants.values()) if status == 0 else None


def compile_all(variants: list[dict[str, Any]], arch: int) -> int:
    """Compile each variant to a cubin for ``sm_<arch>`` with the Triton importable here; one line per kernel."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    failed: dict[str, str] = {}
    counts: dict[str, int] = {}
    for variant in variants:
        name = variant["kernel"]
        counts[name] = counts.get(name, 0) + 1
        if name in failed:
            continue
        kernel = getattr(importlib.import_module(variant["module"]), name)
        names = kernel.arg_names
        signature = {arg: variant["signature"].get(arg, "constexpr") for arg in names}
        constexprs = {(names.index(arg),): value for arg, value in variant["constexprs"].items()}
        try:
            triton.compile(ASTSource(fn=kernel, signature=signature, constexprs=constexprs), target=GPUTarget("cuda", arch, 32), options=variant["options"])
        except Exception as error:  # noqa: BLE001 - every compiler failure is reported, one line per kernel
            lines = [line for line in str(error).splitlines() if "error:" in line] or [f"{type(error).__name__}: {error}"]
            failed[name] = lines[0].strip()
    for name in sorted(counts):
        print(f"{name}: {counts[name]} variants, {'FAILED: ' + failed[name] if name in failed else 'compiled'}")
    print(f"compile_kernels: Triton {triton.__version__}, sm_{arch}: {len(variants)} variants of {len(counts)} kernels, {len(failed)} kernels failed")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--triton-site", default=None, help="a folder holding the Triton to compile with (default: this environment's)")
    parser.add_argument("--arch", type=int, default=90, help="compute capability to compile for (default 90: Hopper)")
    parser.add_argument("--tests", nargs="+", default=DEFAULT_TESTS, help="test files whose launches are recorded")
    parser.add_argument("--compile", default=None, help=argparse.SUPPRESS)  # the child: a JSON file of variants to compile
    args = parser.parse_args(argv)
    if args.compile:
        return compile_all(json.loads(Path(args.compile).read_text()), args.arch)
    os.chdir(ROOT)
    variants = record(args.tests)
    if variants is None:
        print("compile_kernels: the kernel tests failed under the interpreter; nothing compiled", file=sys.stderr)
        return 1
    with tempfile.NamedTemporaryFile("w", suffix=".json") as listing:
        json.dump(variants, listing)
        listing.flush()
        env = dict(os.environ)
        env.pop("TRITON_INTERPRET", None)
        if args.triton_site:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [args.triton_site, env.get("PYTHONPATH")]))
        return subprocess.run([sys.executable, __file__, "--arch", str(args.arch), "--compile", listing.name], env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
