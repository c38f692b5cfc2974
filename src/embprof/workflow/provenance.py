"""Collecting the provenance of a measurement (fields: :mod:`embprof.results.provenance`).

The benchmark calls :func:`collect_provenance` when a timing run starts, on
the machine that runs it; the environment step merges what the records hold.
Everything comes from the real source (git, ``torch.version``, ``nvidia-smi``,
the kernel's load average); where a source is missing the field is null and
``null_reasons`` says why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from embprof.results.provenance import CLOCK_KEYS, FIELDS
from embprof.versions import package_version

TIMEOUT_S = 30
# nvidia-smi --query-gpu fields, in the order the clocks' keys name them.
_SMI_FIELDS = ("index", "uuid", "driver_version", "clocks.current.sm", "clocks.current.memory",
               "clocks.max.sm", "clocks.max.memory")


def command_output(command: Sequence[str], cwd: str | os.PathLike[str] | None = None) -> tuple[str | None, str]:
    """(stdout, "") when ``command`` exits 0, else (None, why not), in one line."""
    try:
        done = subprocess.run(
            list(command), cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    except FileNotFoundError:
        return None, f"{command[0]} is not on PATH"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{command[0]} failed: {exc}"
    if done.returncode != 0:
        lines = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        return None, f"{' '.join(command[:2])} exited {done.returncode}" + (f": {lines[0]}" if lines else "")
    return done.stdout, ""


# A copy of a checkout (a GPU host's copy of the working tree) names the commit it was copied from
# here, and in COPY_DIRTY_ENV whether its tracked files differed from it (0 or 1). The stamp wins
# over git: a copy may carry no .git, or a stale one whose HEAD is not what was copied.
COPY_COMMIT_ENV, COPY_DIRTY_ENV = "EMBPROF_GIT_COMMIT", "EMBPROF_GIT_DIRTY"


def git_state(root: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The checkout's commit and whether tracked files differ from it (untracked files do not count,
    as in ``git describe --dirty``); a copy's stamp (:data:`COPY_COMMIT_ENV`) first."""
    stamped = _stamped_state()
    if stamped is not None:
        return stamped
    commit, why = command_output(["git", "rev-parse", "HEAD"], cwd=root)
    if commit is None:
        return {"git_commit": None, "git_dirty": None}, {"git_commit": why, "git_dirty": why}
    status, why = command_output(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root)
    state = {"git_commit": commit.strip(), "git_dirty": None if status is None else bool(status.strip())}
    return state, ({"git_dirty": why} if status is None else {})


def _stamped_state() -> tuple[dict[str, Any], dict[str, str]] | None:
    """The commit a copied checkout was stamped with (:data:`COPY_COMMIT_ENV`); None when unstamped."""
    commit = os.environ.get(COPY_COMMIT_ENV, "").strip()
    if not commit:
        return None
    dirty = os.environ.get(COPY_DIRTY_ENV, "").strip()
    if dirty in ("0", "1"):
        return {"git_commit": commit, "git_dirty": dirty == "1"}, {}
    return {"git_commit": commit, "git_dirty": None}, {"git_dirty": f"a copied checkout ({COPY_COMMIT_ENV}) without {COPY_DIRTY_ENV}=0|1"}


def _mhz(text: str) -> int | None:
    """'1980 MHz' -> 1980; nvidia-smi's '[N/A]' and '[Requested functionality ...]' -> None."""
    number = text.strip().removesuffix("MHz").strip()
    return int(number) if number.isdigit() else None


def gpu_state(device_index: int | None, uuid: str | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """The driver version and the clocks of the GPU that ran, from ``nvidia-smi`` where it is on PATH.

    ``device_index`` is the CUDA device the benchmark used (None: it ran on the
    CPU, so no clocks are its); ``uuid`` (torch's, without the ``GPU-`` prefix)
    finds its row when CUDA_VISIBLE_DEVICES renumbers the devices.
    """
    if shutil.which("nvidia-smi") is None:
        why = "nvidia-smi is not on PATH"
        return {"driver": None, "gpu_clocks": None}, {"driver": why, "gpu_clocks": why}
    out, why = command_output(["nvidia-smi", f"--query-gpu={','.join(_SMI_FIELDS)}", "--format=csv,noheader"])
    rows = [[cell.strip() for cell in line.split(",")] for line in (out or "").splitlines() if line.strip()]
    rows = [row for row in rows if len(row) == len(_SMI_FIELDS)]
    if not rows:
        why = why or "nvidia-smi listed no GPU"
        return {"driver": None, "gpu_clocks": None}, {"driver": why, "gpu_clocks": why}
    state: dict[str, Any] = {"driver": rows[0][2], "gpu_clocks": None}
    if device_index is None:
        return state, {"gpu_clocks": "the benchmark ran on the CPU"}
    row = _row_of(rows, device_index, uuid)
    if row is None:
        return state, {"gpu_clocks": f"cannot tell which of nvidia-smi's {len(rows)} GPUs is CUDA device {device_index}"}
    clocks = dict(zip(CLOCK_KEYS, (_mhz(cell) for cell in row[3:]), strict=True))
    state["gpu_clocks"] = clocks
    return state, {}


def _row_of(rows: list[list[str]], device_index: int, uuid: str | None) -> list[str] | None:
    if uuid:
        for row in rows:
            if row[1].removeprefix("GPU-") == uuid.removeprefix("GPU-"):
                return row
    if len(rows) == 1:
        return rows[0]
    if "CUDA_VISIBLE_DEVICES" not in os.environ:
        return next((row for row in rows if row[0] == str(device_index)), None)
    return None


def _torch_state(device: Any) -> tuple[dict[str, Any], dict[str, str], int | None, str | None]:
    """CUDA version and torch's threads; the CUDA device index and uuid, where ``device`` is one."""
    try:
        import torch  # here: the workflow imports this package where torch may be missing
    except ImportError:
        why = "torch is not installed here"
        return {"cuda": None, "torch_threads": None}, {"cuda": why, "torch_threads": why}, None, None
    state = {"cuda": torch.version.cuda, "torch_threads": torch.get_num_threads()}
    reasons = {} if torch.version.cuda else {"cuda": f"torch {torch.__version__} is a CPU build"}
    index = uuid = None
    if device is not None and torch.device(device).type == "cuda":
        index = torch.device(device).index
        index = torch.cuda.current_device() if index is None else index
        uuid = str(getattr(torch.cuda.get_device_properties(index), "uuid", "") or "") or None
    return state, reasons, index, uuid


def host_load() -> tuple[dict[str, Any], dict[str, str]]:
    """The 1-minute load average and the CPUs this process may run on."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        load = round(os.getloadavg()[0], 2)
    except OSError:
        return {"host_load_1m": None, "cpu_count": cpus}, {"host_load_1m": "no load average on this system"}
    return {"host_load_1m": load, "cpu_count": cpus}, {}


def collect_provenance(
    root: str | os.PathLike[str], device: Any = None, kernel_path: str | None = None,
    kernel_path_reason: str = "no benchmark ran here (dynemb's kernel path is the benchmark's to record)",
) -> dict[str, Any]:
    """Every provenance field for a run of the checkout at ``root`` on ``device`` (a torch device,
    None where no benchmark runs here); ``kernel_path`` from ``dynemb.kernels.kernel_path``, else
    why there is none."""
    values: dict[str, Any] = {"started_at": datetime.now(UTC).isoformat(timespec="seconds")}
    reasons: dict[str, str] = {}
    torch_values, torch_reasons, index, uuid = _torch_state(device)
    for part, why in (git_state(Path(root)), gpu_state(index, uuid), host_load(), (torch_values, torch_reasons)):
        values.update(part)
        reasons.update(why)
    values["kernel_path"] = kernel_path
    if kernel_path is None:
        reasons["kernel_path"] = kernel_path_reason
    values["triton"] = package_version("triton", "pytorch-triton")
    if values["triton"] is None:
        reasons["triton"] = "triton is not installed"
    provenance = {field: values.get(field) for field in FIELDS}
    provenance["null_reasons"] = {f: reasons.get(f, "unknown") for f in FIELDS if provenance[f] is None}
    return provenance
