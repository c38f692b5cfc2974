"""Per-iteration samples of the per-op rows (``opcalls__<label>.samples.csv``), in long format.

One line per row of the per-op CSV and profiled iteration: ``backend, phase,
parent_stages, op`` (the row's key), ``iteration`` (0-based: a label's iterations
numbered by start within each trace, the traces in the order given) and ``ns``, the
row's device time in that iteration in whole nanoseconds, as the trace counts it (0
where it ran nothing). Their mean is the row's ``avg_ms_per_iter``; they are the
samples a per-op comparison tests. Readers get them as ``ms`` (:data:`FRAME_COLUMNS`).

The breakdown writes the file beside the per-op CSV and its busy sidecar (all three
renamed into place together). Per-op CSVs written before issue 33 hold the samples in
their ``ms_by_iter`` column instead, ``;``-joined; :func:`read_op_samples` gives
both the same way, and nothing for a CSV older still.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from embprof.atomic import atomic_path
from embprof.errors import ContractError
from embprof.results.csvfile import read_table
from embprof.results.paths import samples_beside

if TYPE_CHECKING:
    import pandas as pd

KEY = ("backend", "phase", "parent_stages", "op")
COLUMNS = (*KEY, "iteration", "ns")
# What the readers give: the samples in ms, as every other time of a run.
FRAME_COLUMNS = (*KEY, "iteration", "ms")
_KEY_SLOT = "\x00"  # where a row's key goes in the format of its lines (never in the format otherwise)


def write_samples(keys: Mapping[str, Any], ns: np.ndarray, path: str | os.PathLike[str]) -> Path:
    """Rows x iterations of whole nanoseconds (``ns``) under the rows' :data:`KEY` columns (``keys``:
    a DataFrame or columns by name, one value per row), one line per row and iteration."""
    ns = np.asarray(ns).reshape(len(keys[KEY[0]]), -1)
    if not np.issubdtype(ns.dtype, np.integer):
        raise ValueError("samples must be whole nanoseconds")
    # One format for every row's lines, "<key>,<iteration>,%d\n" with the key a placeholder: a row's
    # lines are then one replace and one % in C, no Python call (nor a tuple and a join) per sample.
    template = "".join(f"{_KEY_SLOT}{i},%d\n" for i in range(ns.shape[1]))
    prefixes = io.StringIO()
    csv.writer(prefixes, lineterminator="\n").writerows(
        zip(*(np.asarray(keys[k], dtype=object).tolist() for k in KEY), [""] * len(ns), strict=True))
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as fh:
        fh.write(",".join(COLUMNS) + "\n")
        for prefix, row in zip(prefixes.getvalue().splitlines(), ns, strict=True):
            if template:
                fh.write(template.replace(_KEY_SLOT, prefix.replace("%", "%%")) % tuple(row.tolist()))
    return Path(path)


def empty_samples() -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame({c: pd.Series(dtype=object if c in KEY else np.int64 if c == "iteration" else float)
                         for c in FRAME_COLUMNS})


def read_samples(path: str | os.PathLike[str]) -> pd.DataFrame:
    """One config's samples file as :data:`FRAME_COLUMNS`: keys as str, ``iteration`` a whole number
    >= 0, ``ms`` (the file's ``ns`` / 10^6) finite >= 0, each (key, iteration) once."""
    frame = read_table(path, KEY)
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ContractError(f"{path}: missing column(s) {', '.join(missing)}")
    frame = frame[list(COLUMNS)]
    iteration, ns = (_whole(frame[c]) for c in ("iteration", "ns"))
    empty_key = (frame["backend"] == "").to_numpy() | (frame["phase"] == "").to_numpy() | (frame["op"] == "").to_numpy()
    for bad, what in ((np.isnan(iteration), "iteration must be a whole number >= 0"),
                      (np.isnan(ns), "ns must be a whole number >= 0"),
                      (empty_key, "backend, phase and op must not be empty")):
        if bad.any():
            at = int(np.flatnonzero(bad)[0])
            raise ContractError(f"{path}: line {at + 2}: {what}, got {frame.iloc[at].tolist()!r}")
    frame = frame[list(KEY)].assign(iteration=iteration.astype(np.int64), ms=ns / 1e6)
    repeated = frame.duplicated(["iteration", *KEY]).to_numpy()
    if repeated.any():
        at = int(np.flatnonzero(repeated)[0])
        raise ContractError(f"{path}: line {at + 2}: the row and iteration repeat an earlier line")
    return frame.reset_index(drop=True)


def _whole(column: pd.Series) -> np.ndarray:
    """A column as whole numbers >= 0 (floats, exact below 2^53), NaN where a cell is not one."""
    import pandas as pd

    values = pd.to_numeric(column.astype(str), errors="coerce").to_numpy(dtype=float)
    return np.where(np.isfinite(values) & (values >= 0) & (values == np.round(values)), values, np.nan)


def samples_of_rows(keys: pd.DataFrame, ms: np.ndarray) -> pd.DataFrame:
    """Rows x iterations of ms (NaN: no sample) under the rows' keys, as long samples
    (:data:`FRAME_COLUMNS`)."""
    ms = np.asarray(ms, dtype=float).reshape(len(keys), -1)
    row, iteration = np.nonzero(~np.isnan(ms))
    frame = keys[list(KEY)].iloc[row].reset_index(drop=True)
    return frame.assign(iteration=iteration.astype(np.int64), ms=ms[row, iteration].astype(float))


def read_op_samples(opcalls: str | os.PathLike[str]) -> pd.DataFrame:
    """The samples of the per-op CSV at ``opcalls``: its samples file beside it; for a CSV written
    before that file existed, its ``ms_by_iter`` column; none for a CSV older still."""
    from embprof.results.opcalls import read_legacy_samples

    path = samples_beside(opcalls)
    if path.is_file():
        return read_samples(path)
    legacy = read_legacy_samples(opcalls)
    return legacy if legacy is not None else empty_samples()


def sample_matrix(samples: pd.DataFrame, keys: Sequence[str]) -> tuple[pd.DataFrame, np.ndarray]:
    """Samples (ms) summed per ``keys`` (some of :data:`KEY`) and iteration: the distinct keys, sorted,
    and their samples as rows x iterations (NaN where a key has no sample of an iteration)."""
    keys = list(keys)
    if samples.empty:
        return samples[keys].drop_duplicates().reset_index(drop=True), np.zeros((0, 0))
    summed = samples.groupby([*keys, "iteration"], sort=True)["ms"].sum()
    table = summed.unstack("iteration")
    return table.index.to_frame(index=False), table.to_numpy(dtype=float)
