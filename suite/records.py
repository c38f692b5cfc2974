"""The benchmark's side of its result record: the library versions and the provenance it carries,
and the append through the results contract's writer (:mod:`embprof.results.records`, the
fields of DESIGN.md).

Many benchmark processes may finish at once (one per config on a cluster), all
appending to one JSON list; the contract's append takes an exclusive file lock,
reads the list, adds one record and writes it atomically, so a reader never
sees a half-written file and no writer loses another's record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from dynemb.kernels import kernel_path
from embprof.results.records import RESULT_FIELDS, append_record, read_records
from embprof.versions import FBGEMM_DISTRIBUTIONS, package_version
from embprof.workflow.provenance import collect_provenance

__all__ = ["RESULT_FIELDS", "append_record", "library_versions", "read_records", "run_provenance"]


def library_versions() -> dict[str, str | None]:
    return {
        "torch_version": package_version("torch"),
        "fbgemm_gpu_version": package_version(*FBGEMM_DISTRIBUTIONS),
        "torchrec_version": package_version("torchrec"),
    }


def run_provenance(checkout: Path, device: torch.device) -> dict[str, Any]:
    """Where this run's numbers come from (docs/DESIGN.md, "Provenance"), taken as it starts."""
    return collect_provenance(checkout, device, kernel_path(device))
