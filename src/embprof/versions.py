"""Installed package versions, as records and the environment file report them."""

from __future__ import annotations

from importlib import metadata

# fbgemm ships as the CUDA build or the CPU build; either answers for "fbgemm_gpu".
FBGEMM_DISTRIBUTIONS = ("fbgemm-gpu", "fbgemm-gpu-cpu", "fbgemm-gpu-nightly")


def package_version(*distributions: str) -> str | None:
    """The installed version of the first of ``distributions`` found; ``None`` when none is."""
    for name in distributions:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None
