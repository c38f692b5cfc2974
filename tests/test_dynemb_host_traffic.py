"""The host rows a training step moves (``tables.host_stats()``), against a count made by brute force from the
batch's ids, the cache's capacity and what each tier held before the step.

Runs on the torch path as it is, and on the CUDA code path through the Triton interpreter:

    TRITON_INTERPRET=1 PYTHONPATH=tests python -m pytest -p cuda_path tests/test_dynemb_host_traffic.py
"""

from __future__ import annotations

import pytest
import torch
from devices import DEVICES

from dynemb import (
    BatchedDynamicEmbeddingTables,
    DynamicEmbInitializerArgs,
    DynamicEmbInitializerMode,
    DynamicEmbTableOptions,
    EmbOptimType,
    PoolingMode,
)
from dynemb.optimizers import state_width

DIM = 4
CACHE_ROWS = 8  # one bucket: an insert's victims are the bucket's ids the batch does not use


def _tables(device: str, optimizer: EmbOptimType, storage: str, drawn: bool = True, count: bool = True) -> BatchedDynamicEmbeddingTables:
    """One table, counting its host traffic unless ``count`` is False; ``drawn`` False: a NORMAL initializer, which
    kernels cannot draw inline (the path that syncs)."""
    width = DIM + state_width(optimizer, DIM)
    hbm = {"gpu": None, "caching": CACHE_ROWS * width * 4, "host": 0}[storage]
    options = DynamicEmbTableOptions(
        dim=DIM, max_capacity=1024, bucket_capacity=CACHE_ROWS, caching=storage == "caching", local_hbm_for_values=hbm, seed=3,
        initializer_args=DynamicEmbInitializerArgs() if drawn else DynamicEmbInitializerArgs(mode=DynamicEmbInitializerMode.NORMAL),
    )
    tables = BatchedDynamicEmbeddingTables([options], optimizer, PoolingMode.NONE, device=device, learning_rate=0.1)
    assert tables.storage_mode(0).value == storage
    if count:
        tables.count_host_traffic()
    return tables


def _batches(device: str, count: int = 8, size: int = 14, id_range: int = 30) -> list[torch.Tensor]:
    """Ids that repeat within and across batches; some batches bring more new ids than the cache holds."""
    generator = torch.Generator().manual_seed(7)
    return [torch.randint(0, id_range + 4 * step, (size,), generator=generator).to(device) for step in range(count)]


def _step(tables: BatchedDynamicEmbeddingTables, ids: torch.Tensor) -> None:
    offsets = torch.arange(ids.numel() + 1, device=ids.device)
    out = tables(ids, offsets)
    out.backward(torch.ones_like(out))


def _held(tables: BatchedDynamicEmbeddingTables) -> tuple[set[int], set[int]]:
    """(cached ids, stored ids) of the one table, as the tiers hold them now."""
    group = tables.engine.groups[0][0]
    cached = set() if group.cache is None else set(group.cache.ids(0).tolist())
    return cached, set(group.storage.ids(0).tolist())


def _expected(storage: str, ids: list[int], cached: set[int], stored: set[int], width: int, drawn: bool) -> tuple[int, int, int, int]:
    """(rows in, rows out, bytes in, bytes out) of one training step of ``ids``, by brute force (``drawn`` False:
    the path that syncs, whose cache reads every stored miss whole and writes back every id it could not place)."""
    unique = set(ids)
    row, emb = width * 4, DIM * 4
    if storage == "host":  # forward reads each stored id's embedding; new ids are written; backward steps every id
        known, new = len(unique & stored), len(unique - stored)
        return known + len(unique), new + len(unique), known * emb + len(unique) * row, (new + len(unique)) * row
    misses = sorted(unique - cached)
    free = CACHE_ROWS - len(cached)
    room = free + len(cached - unique)  # the batch's own ids are never evicted
    placed, spilled = misses[:room], misses[room:]  # a bucket's new ids take its slots in id order
    evicted = max(0, len(placed) - free)
    if not drawn:  # backward steps the spilled ids' rows in storage too
        rows_in, rows_out = len(set(misses) & stored) + len(spilled), evicted + 2 * len(spilled)
        return rows_in, rows_out, rows_in * row, rows_out * row
    brought = len(set(placed) & stored)  # a missed id's stored row comes in whole
    new_stored = len(set(spilled) - stored)  # an id the cache could not place is stored (its drawn row)
    read = sum(1 for i in ids if i in spilled)  # each of its indices reads its embedding in storage (a new one's just drawn there)
    rows_in = brought + read + len(spilled)  # backward reads and writes the spilled ids' rows in storage
    rows_out = evicted + new_stored + len(spilled)
    return rows_in, rows_out, (brought + len(spilled)) * row + read * emb, rows_out * row


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("drawn", [True, False], ids=["no-sync", "normal-init"])
@pytest.mark.parametrize("storage", ["caching", "host"])
@pytest.mark.parametrize("optimizer", [EmbOptimType.EXACT_SGD, EmbOptimType.ADAM])
def test_each_step_counts_the_rows_it_moves(device: str, storage: str, optimizer: EmbOptimType, drawn: bool) -> None:
    tables = _tables(device, optimizer, storage, drawn)
    assert tables.engine.groups[0][0].on_device is drawn
    width = DIM + state_width(optimizer, DIM)
    totals = [0, 0, 0, 0]
    spilled = evicted = 0
    for ids in _batches(device):
        cached, stored = _held(tables)
        before = tables.cache_stats()["evictions"]
        expected = _expected(storage, ids.tolist(), cached, stored, width, drawn)
        _step(tables, ids)
        totals = [a + b for a, b in zip(totals, expected, strict=True)]
        stats = tables.host_stats()
        assert [stats["rows_in"], stats["rows_out"], stats["bytes_in"], stats["bytes_out"]] == totals
        if storage == "caching":
            evicted += tables.cache_stats()["evictions"] - before
            spilled += len(set(ids.tolist()) - cached) > CACHE_ROWS - len(cached & set(ids.tolist()))
    if storage == "caching":
        assert evicted > 0 and spilled > 0, "the case must evict and spill"
    tables.reset_host_stats()
    assert tables.host_stats() == dict.fromkeys(("rows_in", "rows_out", "bytes_in", "bytes_out"), 0)


@pytest.mark.parametrize("device", DEVICES)
def test_rows_on_the_device_move_nothing(device: str) -> None:
    tables = _tables(device, EmbOptimType.ADAM, "gpu")
    for ids in _batches(device, count=3):
        _step(tables, ids)
    assert set(tables.host_stats().values()) == {0}


@pytest.mark.parametrize("device", DEVICES)
def test_a_prefetch_counts_what_the_step_then_does_not(device: str) -> None:
    """A prefetched batch's misses come in during the prefetch; the step finds them all cached: the same rows."""
    eager, prefetching = _tables(device, EmbOptimType.EXACT_SGD, "caching"), _tables(device, EmbOptimType.EXACT_SGD, "caching")
    for ids in _batches(device, size=6, id_range=12):  # never more new ids than the cache holds
        _step(eager, ids)
        prefetching.prefetch(ids, torch.arange(ids.numel() + 1, device=ids.device))
        _step(prefetching, ids)
    assert eager.host_stats() == prefetching.host_stats() and eager.host_stats()["rows_out"] > 0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("storage", ["caching", "host"])
def test_steps_count_nothing_and_launch_nothing_for_it_unless_asked(device: str, storage: str) -> None:
    """Counting is a few launches per step: off by default, so a training step pays for it only when asked."""
    from dynemb.kernels.launches import counting

    silent, counted = (_tables(device, EmbOptimType.EXACT_SGD, storage, count=False) for _ in range(2))
    batches = _batches(device, count=4)
    for ids in batches[:-1]:
        _step(silent, ids)
        _step(counted, ids)
    counted.count_host_traffic()
    with counting() as off:
        _step(silent, batches[-1])
    with counting() as on:
        _step(counted, batches[-1])
    assert set(silent.host_stats().values()) == {0} and counted.host_stats()["rows_in"] > 0
    assert on.total > off.total and on.triton == off.triton
    counted.count_host_traffic(False)
    counted.reset_host_stats()
    _step(counted, batches[0])
    assert set(counted.host_stats().values()) == {0}
