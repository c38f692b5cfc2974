"""envs/*.yaml are complete: every module that the code of a rule's job imports is a package the
rule's conda env lists, by name (never left to arrive as another package's dependency).

A rule's code is the `embprof` subcommand its shell runs, with that module's import
closure (tests/imports.py), plus the benchmark suite for the subcommands that run it.
The rules, their envs and their shell commands come from Snakemake's own parse of
the workflow.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from imports import REPO, distributions_of, normalize, third_party_imports

# The subcommands that run the benchmark suite in a child process (pytest on suite/).
SUITE_FILES = (REPO / "suite" / "benchmark_batched_dynamicemb_tables.py", REPO / "suite" / "conftest.py")
RUN_THE_SUITE = {"collect", "profile", "timing"}
EC_LAUNCHER = "benchmark_embedding_collection.sh"
EC_ENTRY = REPO / "suite" / "embedding_collection" / "__main__.py"
_RULES = """
import json
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings
with SnakemakeApi(OutputSettings()) as api:
    workflow = api.workflow(
        resource_settings=ResourceSettings(cores=1),
        config_settings=ConfigSettings(configfiles=[Path({config!r})]),
        snakefile=Path({snakefile!r}), workdir=Path({workdir!r}),
    )._workflow
    envs = {{r.name: Path(str(r.basedir), str(r.conda_env)).resolve() if r.conda_env else None
             for r in workflow.rules}}
    print(json.dumps({{r.name: [envs[r.name] and str(envs[r.name]), r.shellcmd or ""]
                      for r in workflow.rules}}))
"""


def workflow_rules(tmp_path: Path) -> dict[str, tuple[str | None, str]]:
    """rule -> (its conda env file, its shell command), as Snakemake parses the workflow."""
    script = _RULES.format(config=str(REPO / ".test" / "config_tiny" / "config.yaml"),
                           snakefile=str(REPO / "Snakefile"), workdir=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True, cwd=tmp_path)
    return {name: (env, cmd) for name, (env, cmd) in json.loads(done.stdout.splitlines()[-1]).items()}


def code_of(shell: str) -> list[str | Path]:
    """The modules and files a rule's shell command runs."""
    code: list[str | Path] = []
    for command in re.findall(r"\bembprof ([a-z-]+)", shell):
        code.append(f"embprof.cli.{command.replace('-', '_')}")
        if command in RUN_THE_SUITE:
            code += SUITE_FILES
    if EC_LAUNCHER in shell:
        code.append(EC_ENTRY)
    return code


def env_packages(env_file: Path) -> tuple[set[str], list[str]]:
    """The env's pip packages (normalized names) and its other pip entries (paths, options)."""
    spec = yaml.safe_load(env_file.read_text())
    pip = next(d["pip"] for d in spec["dependencies"] if isinstance(d, dict) and "pip" in d)
    names = {normalize(re.split(r"[=<>!~\[ ]", entry, maxsplit=1)[0]) for entry in pip
             if not entry.startswith(("-", "."))}
    return names, [entry for entry in pip if entry.startswith(("-", "."))]


@pytest.fixture(scope="module")
def rules(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str | None, str]]:
    return workflow_rules(tmp_path_factory.mktemp("parse"))


def test_every_rule_that_runs_code_has_an_env(rules) -> None:
    running = {name for name, (_, shell) in rules.items() if code_of(shell)}
    assert running, "no rule runs the embprof command"
    assert {name for name in running if rules[name][0] is None} == set()


def test_each_env_lists_every_package_its_rules_import(rules) -> None:
    missing: dict[str, dict[str, set[str]]] = {}
    for name, (env, shell) in sorted(rules.items()):
        code = code_of(shell)
        if not code:
            continue
        listed, _ = env_packages(Path(env))
        for module in sorted(third_party_imports(*code)):
            providers = distributions_of(module)
            assert providers, f"{name}: no installed distribution provides {module}; add it to tests/imports.py"
            if not providers & listed:
                missing.setdefault(Path(env).name, {}).setdefault(module, set()).add(name)
    assert missing == {}, f"env -> module -> rules importing it, not listed: {missing}"


def test_each_env_installs_this_project_from_the_checkout(rules) -> None:
    """Rules call `embprof`: each env installs it, editable, from the checkout beside envs/."""
    for env in {env for env, _ in rules.values() if env}:
        _, entries = env_packages(Path(env))
        assert "-e .." in entries, f"{env}: no `-e ..` entry"
        assert (Path(env).parent / ".." / "pyproject.toml").resolve() == REPO / "pyproject.toml"


def test_the_check_sees_a_missing_package(tmp_path: Path) -> None:
    """The env check fails for an env that lacks one of its rules' imports (Jinja2 here)."""
    report = yaml.safe_load((REPO / "envs" / "report.yaml").read_text())
    pip = next(d for d in report["dependencies"] if isinstance(d, dict))["pip"]
    pip[:] = [p for p in pip if not p.startswith("Jinja2")]
    broken = tmp_path / "report.yaml"
    broken.write_text(yaml.safe_dump(report))
    listed, _ = env_packages(broken)
    needed = third_party_imports("embprof.cli.report")
    assert "jinja2" in needed and not distributions_of("jinja2") & listed
