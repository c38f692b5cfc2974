"""What machine and software a results folder came from (``environment.json``)."""

from __future__ import annotations

import os
from typing import Any

from embprof.atomic import write_json
from embprof.results.jsonfile import read_object

# The fields the environment step writes (docs/DESIGN.md, "Outputs"); None where unknown.
# ``provenance`` is the records' (embprof.results.provenance); files from before it read without.
FIELDS = (
    "device", "gpu_name", "driver", "cpu_name", "python", "torch", "fbgemm_gpu", "torchrec",
    "snakemake", "profiler", "nsys_version", "preset", "date", "hostname", "provenance",
)


def write_environment(path: str | os.PathLike[str], env: dict[str, Any]) -> None:
    write_json(path, env)


def read_environment(path: str | os.PathLike[str]) -> dict[str, Any]:
    return read_object(path, "an environment description")
