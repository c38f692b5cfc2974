"""The fused Triton kernels against the torch path, on random inputs with duplicates and hash collisions.

With CUDA the kernels run compiled on the GPU, and the tables are also trained
both ways. Without CUDA they run on CPU tensors through Triton's interpreter,
which must be switched on (``TRITON_INTERPRET=1``) before Triton is first
imported; since other tests of the same process may import it first, the
interpreted kernel tests run in a child pytest of this file with the variable
set, and the parent only checks that child.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from dynemb import (
    BatchedDynamicEmbeddingTables,
    DynamicEmbTableOptions,
    EmbOptimType,
    PoolingMode,
    hashing,
)
from dynemb.hash_table import BucketedHashTable, SlotArrays
from dynemb.hashing import seed_word
from dynemb.kernels import torch_ops
from dynemb.optimizers import OptimizerParams, initial_state, state_width
from dynemb.segments import segmented_unique, segmented_unique_per_table

CUDA = torch.cuda.is_available()
DEVICE = torch.device("cuda" if CUDA else "cpu")
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
RUNS_KERNELS = CUDA or INTERPRETED

triton_ops = None
if RUNS_KERNELS:
    pytest.importorskip("triton")
    from dynemb.kernels import triton_ops

kernels_here = pytest.mark.skipif(not RUNS_KERNELS, reason="run by test_kernels_under_the_triton_interpreter in a child process")


@pytest.mark.slow
@pytest.mark.skipif(RUNS_KERNELS, reason="the kernel tests run in this process")
def test_kernels_under_the_triton_interpreter() -> None:
    pytest.importorskip("triton")
    env = dict(os.environ, TRITON_INTERPRET="1")
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "not under_the_triton_interpreter", __file__],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert child.returncode == 0, child.stdout[-4000:] + child.stderr[-2000:]
    assert " passed" in child.stdout and " failed" not in child.stdout, child.stdout[-2000:]


def _first_per_bucket(table: BucketedHashTable, keys: torch.Tensor, most: int) -> torch.Tensor:
    """The first ``most`` of ``keys`` in each bucket, in their order."""
    buckets = table.buckets(keys)
    rank = torch.zeros_like(buckets)
    for b in torch.unique(buckets).tolist():
        where = torch.nonzero(buckets == b).squeeze(1)
        rank[where] = torch.arange(where.numel(), device=DEVICE)
    return keys[rank < most]


def _filled_table(num_buckets: int, bucket_capacity: int, seed: int) -> tuple[BucketedHashTable, torch.Tensor]:
    """A table with some buckets full (evictions happened), some partly filled, some empty; and the keys tried."""
    generator = torch.Generator().manual_seed(seed)
    table = BucketedHashTable(num_buckets, bucket_capacity, DEVICE)
    tried = []
    for step in range(4):
        keys = torch.unique(torch.randint(-50, 400, (bucket_capacity * num_buckets // 2,), generator=generator))
        keys = keys[torch.randperm(keys.numel(), generator=generator)].to(DEVICE)
        # Drop keys that would overfill a bucket in one insert (the tables check this before inserting).
        keys = _first_per_bucket(table, keys[table.find(keys) < 0], bucket_capacity)
        table.insert(keys, torch.full_like(keys, step))
        tried.append(keys)
    return table, torch.cat(tried + [torch.tensor([0, -1, 7, 10**12, -(2**63)], device=DEVICE)])


@kernels_here
@pytest.mark.parametrize("num_buckets", [1, 7, 13_108, 2**40 + 3])
def test_bucket_of_is_bit_for_bit_the_torch_hash(num_buckets: int) -> None:
    generator = torch.Generator().manual_seed(num_buckets % 1000)
    keys = torch.cat([
        torch.randint(-(2**63), 2**63 - 1, (3000,), generator=generator, dtype=torch.int64),
        torch.tensor([0, 1, -1, 2**63 - 1, -(2**63)]),
    ]).to(DEVICE)
    assert torch.equal(triton_ops.bucket_of(keys, num_buckets), torch_ops.bucket_of(keys, num_buckets))


@kernels_here
@pytest.mark.parametrize(("dim", "seed"), [(12, 0), (130, (3 << 32) + 1), (1, 1)])
def test_uniform_rows_match_torch(dim: int, seed: int) -> None:
    keys = torch.tensor([0, 1, -5, 2**62, 123_456_789, 1], device=DEVICE)  # a repeated id gets the same row
    expected = torch_ops.uniform_rows(keys, dim, seed_word(seed), -0.25, 0.5)
    actual = triton_ops.uniform_rows(keys, dim, seed_word(seed), -0.25, 0.5)
    torch.testing.assert_close(actual, expected, rtol=1e-6, atol=1e-7)
    assert torch.equal(actual[1], actual[5]) and not torch.equal(actual[0], actual[1])
    # One seed word per key (tables sharing storage): each row is its own seed's row.
    words = torch.tensor([seed_word(seed + k) for k in range(keys.numel())], device=DEVICE)
    per_key = triton_ops.uniform_rows(keys, dim, words, -0.25, 0.5)
    torch.testing.assert_close(per_key, torch_ops.uniform_rows(keys, dim, words, -0.25, 0.5), rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(per_key[0], expected[0], rtol=1e-6, atol=1e-7)
    assert not torch.equal(per_key[1], per_key[5])


@kernels_here
@pytest.mark.parametrize(("num_buckets", "bucket_capacity"), [(4, 8), (3, 5), (2, 40), (16, 1)])
def test_find_matches_torch_with_collisions_and_evictions(num_buckets: int, bucket_capacity: int) -> None:
    table, queries = _filled_table(num_buckets, bucket_capacity, seed=num_buckets * 100 + bucket_capacity)
    assert table.occupied.all(dim=1).any(), "some bucket must be full for the probe to run past it"
    args = (queries, table.buckets(queries), table._keys, table._occupied, bucket_capacity)
    expected = torch_ops.find_slots(*args)
    assert (expected >= 0).any() and (expected < 0).any()
    assert torch.equal(triton_ops.find_slots(*args), expected)


@kernels_here
@pytest.mark.parametrize("add_counts", [False, True])
def test_find_and_touch_matches_torch(add_counts: bool) -> None:
    results = []
    for ops in (torch_ops, triton_ops):
        table, queries = _filled_table(4, 8, seed=3)
        counts = torch.arange(1, queries.numel() + 1, device=DEVICE)
        hits, misses = torch.tensor(5, device=DEVICE), torch.tensor(7, device=DEVICE)
        slots = ops.find_and_touch(queries, table.buckets(queries), table._keys, table._occupied, table._scores, 8, counts, 42, add_counts, hits, misses)
        results.append((slots, table.scores.clone(), hits, misses))
    assert (results[0][0] >= 0).any() and (results[0][0] < 0).any()
    for ours, reference in zip(results[1], results[0], strict=True):
        assert torch.equal(ours, reference)


@kernels_here
@pytest.mark.parametrize("add_counts", [False, True])
def test_group_find_matches_torch(add_counts: bool) -> None:
    """Tables of different bucket counts in one set of slot arrays; a batch with repeats and an empty table."""
    cap = 8
    table_buckets = [4, 1, 3, 2]
    base = [0, 5, 7, 11]  # each table's buckets, then its spare bucket
    arrays = SlotArrays.allocate(13 * cap + 1, DEVICE)
    generator = torch.Generator().manual_seed(int(add_counts))
    for buckets, start in zip(table_buckets, base, strict=True):
        view = BucketedHashTable(buckets, cap, DEVICE, arrays.region(start * cap, buckets * cap + 1))
        keys = torch.unique(torch.randint(-40, 40, (buckets * cap,), generator=generator)).to(DEVICE)
        keys = keys[torch.randperm(keys.numel(), generator=generator).to(DEVICE)]
        keys = _first_per_bucket(view, keys, cap - 1)  # what fits in one insert, with an empty slot left to end probes
        view.insert(keys, torch.full_like(keys, 3))
    sizes = [30, 0, 25, 41]
    offsets = torch.tensor([0, 5, 30, 30, 30, 40, 55, 55, 96], device=DEVICE)  # batch size 2, bags of the 4 tables
    indices = torch.randint(-50, 50, (sum(sizes),), generator=generator).to(DEVICE)
    results = []
    for ops in (torch_ops, triton_ops):
        scores = arrays.scores.clone()
        hits, misses = torch.zeros(4, dtype=torch.int64, device=DEVICE), torch.zeros(4, dtype=torch.int64, device=DEVICE)
        slots, buckets = ops.group_find(
            indices, offsets, 2, torch.tensor(table_buckets, device=DEVICE), torch.tensor(base, device=DEVICE),
            arrays.keys, arrays.occupied, scores, cap, 42, add_counts, True, hits, misses,
        )
        results.append((slots, buckets, scores[:-1], hits, misses))
    slots, buckets = results[0][:2]
    assert (slots >= 0).any() and (slots < 0).any()
    table = torch.tensor([0] * 30 + [2] * 25 + [3] * 41, device=DEVICE)
    assert torch.equal(buckets, torch.tensor(base, device=DEVICE)[table] + torch.remainder(
        hashing.mix64(indices), torch.tensor(table_buckets, device=DEVICE)[table]))
    assert torch.equal(results[0][3] + results[0][4], torch.tensor([30, 0, 25, 41], device=DEVICE))
    for ours, reference in zip(results[1], results[0], strict=True):
        assert torch.equal(ours, reference)


def _random_update_case(optimizer: EmbOptimType, seed: int) -> dict:
    """Rows of a table, and a batch of index gradients grouped by id: ids of one row to hot ids spanning many blocks."""
    generator = torch.Generator().manual_seed(seed)
    dim, capacity = 12, 200
    params = OptimizerParams(learning_rate=0.05, weight_decay=0.01 if optimizer is EmbOptimType.ADAM else 0.0, initial_accumulator_value=0.1)
    rows = torch.cat([
        torch.randn(capacity + 1, dim, generator=generator),
        initial_state(optimizer, capacity + 1, dim, params, torch.device("cpu")) + torch.rand(capacity + 1, state_width(optimizer, dim), generator=generator),
    ], dim=1)
    n_unique = 120
    counts = torch.randint(1, 5, (n_unique,), generator=generator)
    counts[7] = 300  # a hot id: crosses ten blocks of 32 positions
    counts[20] = 64
    counts[21] = 32
    slots = torch.randperm(capacity, generator=generator)[:n_unique]
    slots[3] = -1  # ids that found no slot: their updates go to the spare row
    slots[50] = -1
    grouped = torch.repeat_interleave(slots, counts)
    order = torch.randperm(grouped.numel(), generator=generator)  # index j of the batch carries position order[j]'s id
    index_grads = torch.randn(grouped.numel(), dim, generator=generator)
    case = dict(rows=rows, grouped_slots=grouped, order=order, index_grads=index_grads)
    return {k: v.to(DEVICE) for k, v in case.items()} | dict(params=params)


@kernels_here
@pytest.mark.parametrize("optimizer", list(EmbOptimType))
def test_reduce_and_update_matches_torch(optimizer: EmbOptimType) -> None:
    case = _random_update_case(optimizer, seed=list(EmbOptimType).index(optimizer))
    expected, actual = case["rows"].clone(), case["rows"].clone()
    args = (case["grouped_slots"], case["order"], case["index_grads"], case["params"], 3)
    torch_ops.reduce_and_update(optimizer, expected, *args)
    triton_ops.reduce_and_update(optimizer, actual, *args)
    assert not torch.equal(expected[:-1], case["rows"][:-1]), "the update must change rows"
    # The spare row takes the updates of slot -1 and is never read: compare the real rows.
    torch.testing.assert_close(actual[:-1], expected[:-1], rtol=1e-5, atol=1e-5)
    # Sorted int32 slots, as the shared device storage passes them, give the same rows.
    grouped32 = case["grouped_slots"].to(torch.int32)
    int32_rows = case["rows"].clone()
    triton_ops.reduce_and_update(optimizer, int32_rows, grouped32, case["order"], case["index_grads"], case["params"], 3)
    torch.testing.assert_close(int32_rows[:-1], actual[:-1], rtol=0, atol=0)


@kernels_here
@pytest.mark.parametrize("mode", [PoolingMode.SUM, PoolingMode.MEAN])
def test_pool_rows_matches_torch(mode: PoolingMode) -> None:
    generator = torch.Generator().manual_seed(5)
    emb = torch.randn(30, 6, generator=generator).to(DEVICE)
    lengths = torch.tensor([0, 3, 1, 0, 40, 2, 5])  # empty bags and a bag longer than one block
    offsets = (17 + torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])).to(DEVICE)  # a later table's window
    inverse = torch.randint(0, 30, (int(lengths.sum()),), generator=generator).to(DEVICE)
    expected = torch.full((lengths.numel(), 20), 7.0, device=DEVICE)
    actual = expected.clone()
    torch_ops.pool_rows(emb, inverse, offsets, mode, expected[:, 4:10])
    triton_ops.pool_rows(emb, inverse, offsets, mode, actual[:, 4:10])
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6)
    assert torch.equal(actual[:, :4], torch.full((lengths.numel(), 4), 7.0, device=DEVICE)), "other columns untouched"


@kernels_here
def test_gather_rows_of_strided_rows_matches_torch() -> None:
    generator = torch.Generator().manual_seed(6)
    rows = torch.randn(50, 3 * 12, generator=generator).to(DEVICE)  # embedding and ADAM state side by side
    index = torch.randint(0, 50, (37,), generator=generator).to(DEVICE)
    values = rows[:, :12]
    assert torch.equal(triton_ops.gather_rows(values, index), torch_ops.gather_rows(values, index))


TRAINING_CASES = [
    (optimizer, pooling, caching)
    for optimizer in (EmbOptimType.EXACT_SGD, EmbOptimType.ADAM, EmbOptimType.EXACT_ROWWISE_ADAGRAD)
    for pooling in (PoolingMode.NONE, PoolingMode.MEAN)
    for caching in (False, True)
]
# The interpreter runs each program in Python: three cases cover every step there.
INTERPRETED_CASES = [
    (EmbOptimType.EXACT_SGD, PoolingMode.NONE, False),
    (EmbOptimType.ADAM, PoolingMode.MEAN, True),
    (EmbOptimType.EXACT_ROWWISE_ADAGRAD, PoolingMode.SUM, False),
]


@kernels_here
@pytest.mark.parametrize(("optimizer", "pooling", "caching"), TRAINING_CASES if CUDA else INTERPRETED_CASES)
def test_tables_train_the_same_with_kernels_and_torch(monkeypatch: pytest.MonkeyPatch, optimizer: EmbOptimType, pooling: PoolingMode, caching: bool) -> None:
    import dynemb.kernels as kernels

    if not CUDA:  # the tables send only CUDA tensors to Triton: let CPU tensors through to the interpreter
        monkeypatch.setattr(kernels, "use_triton", lambda tensor: os.environ.get("DYNEMB_KERNELS") != "torch")
    monkeypatch.setattr(kernels, "_FAILED", set())
    batch = 512 if CUDA else 128
    generator = torch.Generator().manual_seed(11)
    batches = []
    for _ in range(4 if CUDA else 3):
        ids = torch.randint(0, 3000, (2 * batch,), generator=generator) ** 2 % 5000  # many duplicates
        batches.append((ids.to(DEVICE), torch.arange(0, 2 * batch + 1, 2).to(DEVICE)))  # bags of two ids
    results = []
    for backend in ("torch", "triton"):
        monkeypatch.setenv("DYNEMB_KERNELS", backend)
        hbm = 150 * 16 * 4 * 3 if caching else None  # a cache smaller than the ids seen: evictions
        options = [
            DynamicEmbTableOptions(dim=16, max_capacity=8192, bucket_capacity=64, caching=caching, local_hbm_for_values=hbm, seed=t)
            for t in range(2)
        ]
        tables = BatchedDynamicEmbeddingTables(options, optimizer, pooling, device=DEVICE, learning_rate=0.1)
        for ids, offsets in batches:
            out = tables(ids, offsets)
            # Gradients kept away from zero: ADAM's m / sqrt(v) is ill-conditioned there, and
            # summation-order noise (kernels vs torch) would then move rows by whole steps.
            out.backward(torch.ones_like(out) * 0.5 + out.detach() * 0.1)
        results.append([tables.export_table(t) for t in range(2)])
    assert not kernels._FAILED, f"kernels fell back to torch: {kernels._FAILED}"
    for (keys_a, rows_a, state_a), (keys_b, rows_b, state_b) in zip(*results, strict=True):
        assert torch.equal(keys_a, keys_b)
        torch.testing.assert_close(rows_b, rows_a, rtol=1e-4, atol=1e-5)
        for name in state_a:
            torch.testing.assert_close(state_b[name], state_a[name], rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(RUNS_KERNELS, reason="needs a Triton kernel that cannot run: CPU tensors without the interpreter")
def test_a_kernel_that_cannot_run_falls_back_to_torch_once(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("triton")
    import dynemb.kernels as kernels

    monkeypatch.setattr(kernels, "use_triton", lambda tensor: True)
    monkeypatch.setattr(kernels, "_FAILED", set())
    keys = torch.tensor([3, -9, 2**40])
    with pytest.warns(RuntimeWarning, match="Triton kernel for bucket_of failed"):
        buckets = kernels.bucket_of(keys, 11)
    assert torch.equal(buckets, torch_ops.bucket_of(keys, 11))
    assert kernels._FAILED == {"bucket_of"}


@pytest.mark.skipif(RUNS_KERNELS, reason="patches the Triton module of a process that does not run it")
def test_a_step_that_failed_after_writing_is_not_rerun(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("triton")
    import dynemb.kernels as kernels
    from dynemb.kernels import triton_ops as compiled_ops

    def half_done(*args: object) -> None:
        raise compiled_ops.PartialUpdateError("second kernel failed")

    monkeypatch.setattr(kernels, "use_triton", lambda tensor: True)
    monkeypatch.setattr(kernels, "_FAILED", set())
    monkeypatch.setattr(compiled_ops, "reduce_and_update", half_done)
    case = _random_update_case(EmbOptimType.EXACT_SGD, seed=0)
    rows = case["rows"].clone()
    with pytest.raises(compiled_ops.PartialUpdateError):
        kernels.reduce_and_update(EmbOptimType.EXACT_SGD, rows, case["grouped_slots"], case["order"], case["index_grads"], case["params"], 1)
    assert torch.equal(rows, case["rows"]), "the torch path must not run after a partial update"


def test_unique_of_all_tables_at_once_equals_per_table_unique() -> None:
    generator = torch.Generator().manual_seed(0)
    for trial in range(60):
        sizes = torch.randint(0, 30, (int(torch.randint(2, 5, (1,), generator=generator)),), generator=generator).tolist()
        sizes[0] = 0 if trial % 5 == 0 else sizes[0]  # empty first and last tables
        sizes[-1] = 0 if trial % 7 == 0 else sizes[-1]
        bounds = [0, *torch.cumsum(torch.tensor(sizes), 0).tolist()]
        ids = torch.randint(-5, 10, (bounds[-1],), generator=generator).to(DEVICE)  # ids shared across tables
        batched = segmented_unique_per_table(ids, bounds)
        for t, unique in enumerate(batched):
            expected = segmented_unique(ids[bounds[t] : bounds[t + 1]])
            for field in ("keys", "counts", "inverse", "order"):
                assert torch.equal(getattr(unique, field), getattr(expected, field)), (trial, t, field)


def test_insert_reads_per_key_or_per_bucket_rows_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    outcomes = []
    for limit in (1 << 24, 0):  # per-key rows (no host sync), then one row per touched bucket
        monkeypatch.setattr(torch_ops, "_ROWS_PER_KEY_LIMIT", limit)
        table, _ = _filled_table(3, 5, seed=9)  # full buckets, so inserts evict and refuse
        keys = torch.arange(1000, 1012, device=DEVICE)
        protect = table.find(torch.arange(-50, 150, device=DEVICE))  # some of the stored ids
        slots, evicted = table.insert(keys, torch.full_like(keys, 99), protect=protect)
        outcomes.append((slots, evicted.mask, evicted.keys[evicted.mask], table.keys.clone(), table.scores.clone(), table.occupied.clone()))
    assert (outcomes[0][0] < 0).any() and outcomes[0][1].any(), "the case must refuse and evict"
    for per_key, per_bucket in zip(*outcomes, strict=True):
        assert torch.equal(per_key, per_bucket)



@kernels_here
@pytest.mark.parametrize(("num_buckets", "bucket_capacity"), [(3, 5), (2, 40), (4, 8)])
def test_place_keys_matches_torch(num_buckets: int, bucket_capacity: int) -> None:
    results = []
    for ops in (torch_ops, triton_ops):
        table, _ = _filled_table(num_buckets, bucket_capacity, seed=bucket_capacity)
        generator = torch.Generator().manual_seed(1)
        table.scores.copy_(torch.randint(0, 4, table.scores.shape, generator=generator).to(DEVICE))  # ties of scores
        keys = torch.arange(1000, 1000 + 3 * bucket_capacity, device=DEVICE)  # more than a bucket can take
        scores = torch.arange(keys.numel(), device=DEVICE) + 50
        sorted_buckets, order = torch.sort(table.buckets(keys), stable=True)
        rank = torch.arange(keys.numel(), device=DEVICE) - torch.searchsorted(sorted_buckets, sorted_buckets)
        protected = table._protected.clone()
        protected[torch.randperm(table.capacity, generator=generator)[: table.capacity // 3].to(DEVICE)] = True
        slots, mask, evicted_keys, evicted_scores = ops.place_keys(
            sorted_buckets, rank, order, keys, scores, table._keys, table._scores, table._occupied, protected, bucket_capacity,
        )
        results.append((slots, mask, evicted_keys[mask], evicted_scores[mask], table.keys.clone(), table.scores.clone(), table.occupied.clone()))
    expected_slots, expected_mask = results[0][:2]
    assert (expected_slots < 0).any() and expected_mask.any(), "the case must refuse and evict"
    for ours, reference in zip(results[1], results[0], strict=True):
        assert torch.equal(ours, reference)
