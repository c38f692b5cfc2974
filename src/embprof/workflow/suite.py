"""The pytest benchmark suite a run measures, and how its processes start.

This project's suite (``suite/`` of the workflow's checkout), or another
that keeps the reference system's contract (the README of recsys-examples'
``corelib/dynamicemb/benchmark``; docs/workflow.md, "Another suite"):

- its test ids end in the config label, ``...::test_gpu[T10_totalB..._cap=1677721]``;
- ``--profile nsys`` runs the profiled iterations inside one
  ``cudaProfilerStart``/``Stop`` window, in the range layout of DESIGN.md;
- a timing run (no ``--profile``) appends one record per config, with the
  seed's fields, to the JSON list named by ``$BENCHMARK_RESULTS_FILE``;
- ``--num-iterations N`` and ``--no-torchrec`` are understood.

Another suite runs in the folder that holds its file (its ``conftest.py`` is
there, and its test ids are relative to it), with ``suite_env`` set and, for
runs, through ``suite_launcher`` (e.g. ``torch.distributed.run``). Nothing of
it is imported here: :func:`suite_problems` reads its source as text.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from embprof.errors import SuiteError

# This project's suite: its folder (the measured code beside src/dynemb) and its file, relative to
# its checkout (its test ids are relative to the same root). `benchmark/` before issue 33.
OWN_FOLDER = "suite"
OWN_SUITE = f"{OWN_FOLDER}/benchmark_batched_dynamicemb_tables.py"
# Where the seed's contract has a timing run append its record.
RESULTS_ENV = "BENCHMARK_RESULTS_FILE"
# A variable named in a suite_env value: $NAME or ${NAME}.
_VARIABLE = re.compile(r"\$(?:(\w+)|\{(\w+)\})")
# What every record of a suite that keeps the seed's contract carries (its reference records do).
SEED_RECORD_FIELDS = (
    "label", "gpu_name", "num_tables", "batch_size", "embedding_dim", "optimizer_type",
    "avg_n_unique", "avg_n_total", "dyn_forward_ms", "dyn_backward_ms", "dyn_train_ms", "dyn_eval_ms",
    "trc_forward_ms", "trc_backward_ms", "trc_train_ms", "trc_eval_ms",
)


@dataclass(frozen=True)
class Suite:
    """A benchmark suite: its file, the folder its commands run in, and what they run with.

    ``own``: this project's suite, which also takes ``--preset``, ``--total-cap``,
    ``--repeats``, ``--results-file`` and the torch profiler's ``--trace-dir``.
    ``launcher``: the command that runs a Python module, ``-m pytest ...`` appended
    (empty: this interpreter; one that starts with ``-m``: a module this interpreter
    runs, e.g. ``-m torch.distributed.run --nproc_per_node 1``); collection never
    goes through it.
    """

    file: Path
    root: Path
    own: bool
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    launcher: tuple[str, ...] = ()

    @property
    def target(self) -> str:
        """The suite's file as pytest is given it: relative to the folder commands run in."""
        return self.file.relative_to(self.root).as_posix()

    def environment(self) -> dict[str, str]:
        """This process's environment for the suite's processes: this project's suite measures its
        checkout's code (``src/`` and the checkout first on PYTHONPATH, installed or not); then
        ``suite_env``, which wins; its values may name this environment's variables
        (``$PYTHONPATH``, ``${HOME}``; empty where unset)."""
        env = dict(os.environ)
        if self.own:
            parts = (str(self.root / "src"), str(self.root), env.get("PYTHONPATH"))
            env["PYTHONPATH"] = os.pathsep.join(p for p in parts if p)
        base = dict(env)
        env.update({name: _VARIABLE.sub(lambda m: base.get(m[1] or m[2], ""), value) for name, value in self.env})
        return env

    def pytest(self, launched: bool = True) -> list[str]:
        """The command up to pytest's arguments: through the launcher for a run, plain for a
        collection. Another suite's pytest gets its folder as root dir, where its commands run, so
        that its test ids are relative to it whatever ini file lies above it."""
        runner = list(self.launcher)
        if runner[:1] == ["-m"]:
            runner.insert(0, sys.executable)
        command = [*(runner if launched and runner else [sys.executable]), "-m", "pytest"]
        return command if self.own else [*command, "--rootdir=."]

    def options(self, relative_to: str | os.PathLike[str] | None = None) -> list[str]:
        """The ``embprof`` options that name this suite (what the rules pass to collect, profile,
        timing and environment); paths relative to ``relative_to`` where given, so that a checkout
        elsewhere with its results beside it gives the same command."""
        def where(path: Path) -> str:
            return os.path.relpath(path, relative_to) if relative_to is not None else str(path)

        out = (["--suite-root", where(self.root)] if self.own else ["--suite", where(self.file)])
        out += [f"--suite-arg={arg}" for arg in self.args]
        out += [f"--suite-env={name}={value}" for name, value in self.env]
        if self.launcher:
            out += ["--launcher", shlex.join(self.launcher)]
        return out


def make_suite(
    checkout: str | os.PathLike[str], file: str | os.PathLike[str] | None = None,
    args: Sequence[str] = (), env: Mapping[str, str] | None = None, launcher: str | Sequence[str] | None = None,
    check: bool = True,
) -> Suite:
    """This project's suite in ``checkout`` (``file`` None), or the suite in ``file``; with ``check``,
    checked to exist (a step that only names its folder, or a host that draws a copied results
    folder, need not have it).

    ``launcher``: a command line (split as a shell would) or its words.
    """
    words = tuple(shlex.split(launcher) if isinstance(launcher, str) else (launcher or ()))
    pairs = tuple(sorted((str(k), str(v)) for k, v in (env or {}).items()))
    if file is None:
        root = Path(checkout).resolve()
        if check and not (root / OWN_SUITE).is_file():
            raise SuiteError(f"{root}: no benchmark suite ({OWN_SUITE}); pass --suite-root CHECKOUT or --suite FILE")
        return Suite(root / OWN_SUITE, root, True, tuple(args), pairs, words)
    path = Path(file).resolve()
    if check and not path.is_file():
        raise SuiteError(f"suite {file}: no such file")
    own = path == (Path(checkout).resolve() / OWN_SUITE)
    return Suite(path, Path(checkout).resolve() if own else path.parent, own, tuple(args), pairs, words)


def suite_digest(suite: Suite) -> str | None:
    """The measured code of another suite: its file and the ``.py`` files beside it (its conftest,
    its helpers); None where its folder is not on this host (one that draws a copied results
    folder: its records keep the digest they were measured with)."""
    from embprof.workflow.configs import code_digest

    if not suite.root.is_dir():
        return None
    return code_digest(sorted(p.name for p in suite.root.glob("*.py")), root=suite.root)


def suite_problems(file: str | os.PathLike[str]) -> list[str]:
    """Why the pytest file ``file`` cannot be run as a suite of the seed's contract, one line each
    (empty: it can); from its source alone, nothing imported: a missing file, one Python cannot
    parse, one that defines no test, records that lack the seed's fields."""
    path = Path(file)
    if not path.is_file():
        return [f"suite: {file}: no such file"]
    if path.suffix != ".py":
        return [f"suite: {file}: not a pytest file (a .py file of tests)"]
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError) as exc:
        return [f"suite: {file}: not a pytest file (Python cannot parse it: {exc.msg if isinstance(exc, SyntaxError) else exc})"]
    if not _defines_tests(tree):
        return [f"suite: {file}: collects no tests (no test_* function, no Test* class with test_* methods)"]
    words = _string_constants(tree)
    for conftest in (path.parent / "conftest.py",):
        if conftest.is_file():
            try:
                words |= _string_constants(ast.parse(conftest.read_bytes()))
            except (SyntaxError, ValueError):
                pass  # pytest names a broken conftest itself, at collection
    problems = []
    if RESULTS_ENV not in words:
        problems.append(f"suite: {file}: writes no records to ${RESULTS_ENV} (the seed's contract)")
    missing = [f for f in SEED_RECORD_FIELDS if f not in words]
    if missing:
        problems.append(f"suite: {file}: its records lack the seed's fields {', '.join(missing)}")
    return problems


def _defines_tests(tree: ast.Module) -> bool:
    """pytest's default rules: a module-level ``test*`` function, or a ``Test*`` class with one."""
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    for node in tree.body:
        if isinstance(node, functions) and node.name.startswith("test"):
            return True
        if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            if any(isinstance(item, functions) and item.name.startswith("test") for item in node.body):
                return True
    return False


def _string_constants(tree: ast.AST) -> set[str]:
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
