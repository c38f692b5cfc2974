"""The fused Triton kernels against the torch path, on random inputs with duplicates and hash collisions.

With CUDA the kernels run compiled on the GPU, and the tables are also trained
both ways. Without CUDA they run on CPU tensors through Triton's interpreter,
which must be switched on (``TRITON_INTERPRET=1``) before Triton is first
imported; since other tests of the same process may import it first, the
interpreted kernel tests run in a child pytest of this file with the variable
set, and the parent only checks that child. The child loads ``triton_bounds``: every address
a kernel touches must lie inside one of its tensors, and each launch's programs run in a
shuffled order, as a GPU may run them.
"""

from __future__ import annotations

import inspect
import os
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
from dynemb.errors import PartialUpdateError
from dynemb.hash_table import BucketedHashTable, BucketMap
from dynemb.hashing import seed_word
from dynemb.kernels import kernel_path, torch_ops
from dynemb.kernels.operands import Access, DrawTables, OptimizerArgs, RowParts, Source
from dynemb.optimizers import OptimizerParams, initial_state, state_width

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
    """The child pytest of this file with the interpreter on (started when collection ended: ``interpreted_kernels``)."""
    pytest.importorskip("triton")
    import interpreted_kernels

    returncode, output = interpreted_kernels.result()
    assert returncode == 0, output[-6000:]
    assert " passed" in output and " failed" not in output, output[-2000:]


@pytest.mark.skipif("triton_bounds" not in sys.modules, reason="checks the interpreter's address check (-p triton_bounds)")
def test_an_access_past_a_tensor_is_caught_under_the_interpreter() -> None:
    import triton
    import triton.language as tl

    @triton.jit
    def fill(out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, offs.to(tl.float32), mask=offs < n)

    out = torch.zeros(8)
    fill[(1,)](out, 8, BLOCK=16)
    assert out.tolist() == [float(i) for i in range(8)]
    with pytest.raises(Exception, match="fill: store of 4 lanes outside every tensor argument"):
        fill[(1,)](out, 12, BLOCK=16)


def _first_per_bucket(table: BucketedHashTable, keys: torch.Tensor, most: int) -> torch.Tensor:
    """The first ``most`` of ``keys`` in each bucket, in their order."""
    _, buckets = table.find(keys)
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
        keys = _first_per_bucket(table, keys[table.find(keys)[0] < 0], bucket_capacity)
        table.insert(keys, torch.full_like(keys, step))
        tried.append(keys)
    return table, torch.cat(tried + [torch.tensor([0, -1, 7, 10**12, -(2**63)], device=DEVICE)])


@kernels_here
@pytest.mark.parametrize(("dim", "seed"), [(12, 0), (130, (3 << 32) + 1), (1, 1)])
def test_uniform_rows_match_torch(dim: int, seed: int) -> None:
    keys = torch.tensor([0, 1, -5, 2**62, 123_456_789, 1], device=DEVICE)  # a repeated id gets the same row
    expected = torch_ops.uniform_rows(keys, dim, seed_word(seed), -0.25, 0.75)
    actual = triton_ops.uniform_rows(keys, dim, seed_word(seed), -0.25, 0.75)
    torch.testing.assert_close(actual, expected, rtol=1e-6, atol=1e-7)
    assert torch.equal(actual[1], actual[5]) and not torch.equal(actual[0], actual[1])
    # One seed word and one pair of bounds per key (tables sharing storage): each row is its own table's row.
    words = torch.tensor([seed_word(seed + k) for k in range(keys.numel())], device=DEVICE)
    lower = torch.tensor([-0.25, -0.25, 0.0, 1.0, -0.25, 2.0], device=DEVICE)
    span = torch.tensor([0.75, 0.75, 0.5, 0.1, 0.75, 1.0], device=DEVICE)
    per_key = triton_ops.uniform_rows(keys, dim, words, lower, span)
    torch.testing.assert_close(per_key, torch_ops.uniform_rows(keys, dim, words, lower, span), rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(per_key[0], expected[0], rtol=1e-6, atol=1e-7)
    assert not torch.equal(per_key[1], per_key[5])
    assert (per_key[3] >= 1.0).all() and (per_key[3] <= 1.1).all()


def _map_table(num_buckets: tuple[int, ...], device_buckets: tuple[int, ...], cap: int, seed: int) -> tuple[BucketedHashTable, torch.Tensor, torch.Tensor]:
    """Tables of different bucket counts in one set of slot arrays, some buckets of each in the device region,
    filled with what fits in one insert per table (an empty slot left to end probes); and the keys with their table."""
    table = BucketedHashTable(BucketMap(num_buckets, device_buckets), cap, DEVICE)
    generator = torch.Generator().manual_seed(seed)
    stored, owners = [], []
    for t, buckets in enumerate(num_buckets):
        keys = torch.unique(torch.randint(-40, 40, (buckets * cap,), generator=generator)).to(DEVICE)
        keys = keys[torch.randperm(keys.numel(), generator=generator).to(DEVICE)]
        _, key_buckets = table.find(keys, torch.full_like(keys, t))
        rank = torch.zeros_like(key_buckets)
        for b in torch.unique(key_buckets).tolist():
            where = torch.nonzero(key_buckets == b).squeeze(1)
            rank[where] = torch.arange(where.numel(), device=DEVICE)
        keys = keys[rank < cap - 1]
        table.insert(keys, torch.full_like(keys, 3), table=torch.full_like(keys, t))
        stored.append(keys)
        owners.append(torch.full_like(keys, t))
    return table, torch.cat(stored), torch.cat(owners)


def test_bucket_map_places_device_buckets_first() -> None:
    buckets = BucketMap((4, 1, 3, 2), (1, 1, 0, 2))
    assert buckets.device_region == 4 and buckets.device_base == [0, 1, 2, 2] and buckets.host_base == [4, 7, 7, 10]
    assert buckets.ranges(0) == [(0, 1), (4, 3)] and buckets.ranges(2) == [(7, 3)] and buckets.ranges(3) == [(2, 2)]
    keys = torch.arange(-500, 500)
    for t in range(4):
        placed = torch_ops.table_buckets(keys, torch.full_like(keys, t), buckets.tensors(torch.device("cpu")))
        local = torch.remainder(hashing.mix64(keys), buckets.num_buckets[t])
        owned = torch.cat([torch.arange(start, start + count) for start, count in buckets.ranges(t)])
        assert torch.equal(placed, owned[local]), t  # local bucket b is the table's b-th bucket, device range first


@kernels_here
@pytest.mark.parametrize(("num_buckets", "bucket_capacity"), [(4, 8), (3, 5), (2, 40), (16, 1)])
def test_find_matches_torch_with_collisions_and_evictions(num_buckets: int, bucket_capacity: int) -> None:
    table, queries = _filled_table(num_buckets, bucket_capacity, seed=num_buckets * 100 + bucket_capacity)
    assert table.occupied.all(dim=1).any(), "some bucket must be full for the probe to run past it"
    args = (table.arrays, queries, None, None, 0, None)
    expected = torch_ops.find(*args)
    assert (expected[0] >= 0).any() and (expected[0] < 0).any()
    for ours, reference in zip(triton_ops.find(*args), expected, strict=True):
        assert torch.equal(ours, reference)


@kernels_here
@pytest.mark.parametrize("add_counts", [False, True])
def test_batch_find_over_tables_matches_torch(add_counts: bool) -> None:
    """Tables of different bucket counts, split between the device and host regions; a batch with repeats and an
    empty table (each index's table from the offsets), and the same keys with their table given."""
    cap = 8
    table, stored, owners = _map_table((4, 1, 3, 2), (1, 1, 0, 2), cap, seed=int(add_counts))
    assert torch.equal(table.find(stored, owners)[0] >= 0, torch.ones_like(stored, dtype=torch.bool))
    generator = torch.Generator().manual_seed(int(add_counts) + 10)
    sizes = [30, 0, 25, 41]
    offsets = torch.tensor([0, 5, 30, 30, 30, 40, 55, 55, 96], device=DEVICE)  # batch size 2, bags of the 4 tables
    indices = torch.randint(-50, 50, (sum(sizes),), generator=generator).to(DEVICE)
    owner = torch.tensor([0] * 30 + [2] * 25 + [3] * 41, device=DEVICE)
    results = []
    for ops in (torch_ops, triton_ops):
        scores = table.arrays.scores.clone()
        hits, misses = torch.zeros(4, dtype=torch.int64, device=DEVICE), torch.zeros(4, dtype=torch.int64, device=DEVICE)
        slots, buckets = ops.find(table.arrays._replace(scores=scores), indices, None, offsets, 2, Access(torch.tensor([42], device=DEVICE), add_counts, hits, misses))
        keyed = ops.find(table.arrays, indices, owner, None, 0, None)
        results.append((slots, buckets, *keyed, scores[:-1], hits, misses))
    slots, buckets = results[0][:2]
    assert (slots >= 0).any() and (slots < 0).any()
    assert torch.equal(buckets, torch_ops.table_buckets(indices, owner, table.arrays.maps))
    assert torch.equal(results[0][2], slots) and torch.equal(results[0][3], buckets), "a given table finds what the offsets find"
    assert torch.equal(results[0][5] + results[0][6], torch.tensor([30, 0, 25, 41], device=DEVICE))
    for ours, reference in zip(results[1], results[0], strict=True):
        assert torch.equal(ours, reference)


def _split(rows: torch.Tensor, split: int) -> RowParts:
    """``rows`` as a row store split at ``split``: rows from there on in a second tensor (as mapped host rows are)."""
    if split >= rows.shape[0]:
        device = rows.clone()
        return RowParts(device, device, rows.shape[0], rows.shape[0] - 1)
    host = rows[split:].clone()
    return RowParts(rows[:split].clone() if split else host, host, split, rows.shape[0] - 1)


def _joined(parts: RowParts) -> torch.Tensor:
    if parts.on_device:
        return parts.device
    return torch.cat([parts.device[: parts.split], parts.host]) if parts.split else parts.host


def _grouped_case(optimizer: EmbOptimType, slots: torch.Tensor, counts: torch.Tensor, dim: int, capacity: int, generator: torch.Generator) -> dict:
    """Rows of a table (random embeddings, optimizer state off its initial values) and a batch of index
    gradients in which id ``slots[i]`` has ``counts[i]`` indices, grouped by id as the update takes them."""
    params = OptimizerParams(learning_rate=0.05, weight_decay=0.01 if optimizer is EmbOptimType.ADAM else 0.0, initial_accumulator_value=0.1)
    rows = torch.cat([
        torch.randn(capacity + 1, dim, generator=generator),
        initial_state(optimizer, capacity + 1, dim, params, torch.device("cpu")) + torch.rand(capacity + 1, state_width(optimizer, dim), generator=generator),
    ], dim=1)
    grouped = torch.repeat_interleave(slots, counts)
    order = torch.randperm(grouped.numel(), generator=generator)  # index j of the batch carries position order[j]'s id
    index_grads = torch.randn(grouped.numel(), dim, generator=generator)
    case = dict(rows=rows, grouped_slots=grouped, order=order, index_grads=index_grads)
    return {k: v.to(DEVICE) for k, v in case.items()} | dict(params=params)


def _random_update_case(optimizer: EmbOptimType, seed: int) -> dict:
    """Rows of a table, and a batch of index gradients grouped by id: ids of one row to hot ids spanning many blocks."""
    generator = torch.Generator().manual_seed(seed)
    capacity, n_unique = 200, 120
    counts = torch.randint(1, 5, (n_unique,), generator=generator)
    counts[7] = 300  # a hot id: crosses several blocks of 64 positions
    counts[20] = 64
    counts[21] = 32
    slots = torch.randperm(capacity, generator=generator)[:n_unique]
    slots[3] = -1  # ids that found no slot: -1, the spare row
    slots[50] = -1
    return _grouped_case(optimizer, slots, counts, 12, capacity, generator)


@kernels_here
@pytest.mark.parametrize("optimizer", list(EmbOptimType))
def test_reduce_and_update_matches_torch(optimizer: EmbOptimType) -> None:
    case = _random_update_case(optimizer, seed=list(EmbOptimType).index(optimizer))
    args = (case["grouped_slots"], case["order"], case["index_grads"], OptimizerArgs.of(optimizer, case["params"], 3, DEVICE))
    total = case["rows"].shape[0]
    results = {}
    for split in (total, 0, 57):  # every row on the device, every row in host memory, split
        expected, actual = _split(case["rows"], split), _split(case["rows"], split)
        torch_ops.reduce_and_update(expected, *args)
        triton_ops.reduce_and_update(actual, *args)
        results[split] = (_joined(expected), _joined(actual))
    expected, actual = results[total]
    assert not torch.equal(expected[:-1], case["rows"][:-1]), "the update must change rows"
    # The spare row is a sink for slot -1 (torch steps it, the kernels leave it) and is never read: compare the real rows.
    torch.testing.assert_close(actual[:-1], expected[:-1], rtol=1e-5, atol=1e-5)
    for split in (0, 57):  # wherever the rows live, the same update
        assert torch.equal(results[split][0][:-1], expected[:-1]), split
        torch.testing.assert_close(results[split][1][:-1], actual[:-1], rtol=0, atol=0)
    # Sorted int32 slots, as the groups pass them, give the same rows.
    int32_rows = _split(case["rows"], 57)
    triton_ops.reduce_and_update(int32_rows, case["grouped_slots"].to(torch.int32), *args[1:])
    torch.testing.assert_close(_joined(int32_rows)[:-1], actual[:-1], rtol=0, atol=0)


def _edge_runs(block: int, chunk: int, generator: torch.Generator) -> list[int]:
    """Indices per id of a batch laid out against blocks of ``block`` positions and crossing steps of ``chunk``
    blocks: the spare's run over two block edges, cold ids, two hot ids over more than 64 blocks each, runs back
    to back from one block edge to another (one covering exactly a step's blocks past its own), two long ones
    off the edges."""
    counts = [2 * block + 3, *torch.randint(1, 5, (20,), generator=generator).tolist(), 64 * block + 5, 64 * block + 3]
    counts.append(block - sum(counts) % block)  # ends on a block edge
    counts += [3 * block, (chunk + 1) * block, chunk * block, 2 * block + 1, 5 * block - 1]
    return counts + torch.randint(1, 5, (10,), generator=generator).tolist()


# Positions per block, runs the scan splits a block in, and blocks per crossing step that the runs are laid out
# against: small ones put every kind of edge in few positions (all the interpreter can afford); on a GPU the
# kernels' own too (None), for rows of 128 floats.
BLOCKINGS = [(8, 2, 4)] + ([None] if CUDA else [])


@kernels_here
@pytest.mark.parametrize("blocking", BLOCKINGS)
@pytest.mark.parametrize("optimizer", list(EmbOptimType))
def test_reduce_and_update_over_block_edges_matches_torch(
    monkeypatch: pytest.MonkeyPatch, optimizer: EmbOptimType, blocking: tuple[int, int, int] | None,
) -> None:
    """Runs over many blocks and many crossing steps, back to back, ending on block edges, after the spare's
    prefix, and a batch smaller than a block: int64 slots with every row on the device, and int32 slots with
    the rows split among the batch's (the hot ids' rows in host memory)."""
    if blocking is None:
        dim, block, chunk = 128, triton_ops._segment_shape(128)[0], triton_ops._CROSSING_CHUNK
    else:
        dim, (block, groups, chunk) = 6, blocking
        monkeypatch.setattr(triton_ops, "_segment_shape", lambda block_d: (block, groups))
        monkeypatch.setattr(triton_ops, "_CROSSING_CHUNK", chunk)
    generator = torch.Generator().manual_seed(list(EmbOptimType).index(optimizer))
    capacity = 200
    runs = torch.tensor(_edge_runs(block, chunk, generator))
    ends = torch.cumsum(runs, 0)
    assert (runs > 64 * block).sum() >= 2 and (ends[:-1] % block == 0).sum() >= 4, "the case must cross and meet block edges"
    for counts in (runs, torch.tensor([2, 1, 3])):
        slots = torch.sort(torch.randperm(capacity, generator=generator)[: counts.numel()]).values
        slots[0] = -1  # ids that found no slot come first
        case = _grouped_case(optimizer, slots, counts, dim, capacity, generator)
        args = (case["order"], case["index_grads"], OptimizerArgs.of(optimizer, case["params"], 3, DEVICE))
        expected = _split(case["rows"], capacity + 1)
        torch_ops.reduce_and_update(expected, case["grouped_slots"], *args)
        assert not torch.equal(expected.device[:-1], case["rows"][:-1]), "the update must change rows"
        split = int(slots[counts.numel() // 2])
        for dtype, rows in ((torch.int64, _split(case["rows"], capacity + 1)), (torch.int32, _split(case["rows"], split))):
            triton_ops.reduce_and_update(rows, case["grouped_slots"].to(dtype), *args)
            # A hot id sums hundreds of rows in another order than torch's (whose sum errs more, by float64): its
            # squares in the Adagrad state differ by ~1e-5.
            torch.testing.assert_close(_joined(rows)[:-1], expected.device[:-1], rtol=1e-4, atol=1e-4)


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
@pytest.mark.parametrize("split", [51, 0, 20])
def test_row_gathers_and_scatter_match_torch_wherever_rows_live(split: int) -> None:
    generator = torch.Generator().manual_seed(6)
    rows = torch.randn(51, 3 * 12, generator=generator).to(DEVICE)  # embedding and ADAM state side by side; the last: spare
    parts = _split(rows, split)
    slots = torch.randint(-1, 50, (37,), generator=generator).to(DEVICE)  # -1: the spare row
    expected = rows[torch.where(slots >= 0, slots, 50), :12]
    assert torch.equal(triton_ops.gather_rows(parts, slots, 12), expected)
    assert torch.equal(torch_ops.gather_rows(parts, slots, 12), expected)
    # Sorted slots (a hot id repeats across blocks of positions): each index gets its row back in index order.
    repeated = torch.cat([slots, torch.full((70,), 9, device=DEVICE), torch.full((5,), -1, device=DEVICE)])
    ordered, order = torch.sort(repeated.to(torch.int32))
    expected = rows[torch.where(repeated >= 0, repeated, 50), :12]
    assert torch.equal(triton_ops.gather_unique(parts, ordered, order, 12), expected)
    assert torch.equal(torch_ops.gather_unique(parts, ordered, order, 12), expected)
    # A scatter writes full rows where they live.
    targets = torch.randperm(50, generator=generator)[:20].to(DEVICE)
    values = torch.randn(20, 36, generator=generator).to(DEVICE)
    written = {}
    for ops in (torch_ops, triton_ops):
        copy = _split(rows, split)
        ops.scatter_rows(copy, targets, values)
        written[ops] = _joined(copy)
    assert torch.equal(written[triton_ops], written[torch_ops])
    assert torch.equal(written[torch_ops][targets], values)


TRAINING_CASES = [
    (optimizer, pooling, storage)
    for optimizer in (EmbOptimType.EXACT_SGD, EmbOptimType.ADAM, EmbOptimType.EXACT_ROWWISE_ADAGRAD)
    for pooling in (PoolingMode.NONE, PoolingMode.MEAN)
    for storage in ("gpu", "caching", "hybrid", "host")
]
# The interpreter runs each program in Python: four cases cover every step there.
INTERPRETED_CASES = [
    (EmbOptimType.EXACT_SGD, PoolingMode.NONE, "gpu"),
    (EmbOptimType.ADAM, PoolingMode.MEAN, "caching"),
    (EmbOptimType.EXACT_ROWWISE_ADAGRAD, PoolingMode.SUM, "hybrid"),
    (EmbOptimType.ADAM, PoolingMode.NONE, "host"),
]
# Device rows per table of each storage mode (None: all); the tables hold 8192 rows, the batches some 2000 ids.
DEVICE_ROWS = {"gpu": None, "caching": 150, "hybrid": 1024, "host": 0}


@kernels_here
@pytest.mark.parametrize(("optimizer", "pooling", "storage"), TRAINING_CASES if CUDA else INTERPRETED_CASES)
def test_tables_train_the_same_with_kernels_and_torch(monkeypatch: pytest.MonkeyPatch, optimizer: EmbOptimType, pooling: PoolingMode, storage: str) -> None:
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
        rows = DEVICE_ROWS[storage]  # a cache smaller than the ids seen: evictions
        hbm = None if rows is None else rows * (16 + state_width(optimizer, 16)) * 4
        options = [
            DynamicEmbTableOptions(dim=16, max_capacity=8192, bucket_capacity=64, caching=storage == "caching", local_hbm_for_values=hbm, seed=t)
            for t in range(2)
        ]
        tables = BatchedDynamicEmbeddingTables(options, optimizer, pooling, device=DEVICE, learning_rate=0.1)
        assert tables.storage_mode(0).value == storage
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


# A graphed step in each storage mode: HBM (the sgd step graphs are for), a cache whose misses spill and whose
# batch is prefetched between a forward and its backward, host rows pooled.
GRAPH_CASES = [
    (EmbOptimType.EXACT_SGD, PoolingMode.NONE, "gpu"),
    (EmbOptimType.ADAM, PoolingMode.NONE, "caching"),
    (EmbOptimType.EXACT_ROWWISE_ADAGRAD, PoolingMode.SUM, "host"),
]


@kernels_here
@pytest.mark.skipif(CUDA and kernel_path("cuda") == "torch", reason="a step is graphed with the Triton kernels only")
@pytest.mark.parametrize(("optimizer", "pooling", "storage"), GRAPH_CASES)
def test_a_graphed_step_trains_as_the_eager_one(monkeypatch: pytest.MonkeyPatch, optimizer: EmbOptimType, pooling: PoolingMode, storage: str) -> None:
    """Steps of one batch shape replayed from graphs (CUDA graphs on a GPU; recorded launches and ops replayed on
    the CPU, ``recorded_graph``) train exactly as the same steps run eagerly: every clock, batch number and ADAM
    step a replay needs comes from device memory. With evictions, a bad batch among them (its check raised
    later, the same), and a cache's prefetch between a forward and its backward (that backward runs eagerly)."""
    from recorded_graph import RecordedGraph

    import dynemb.kernels as kernels
    import dynemb.validation as validation
    from dynemb.graphs import StepGraphs

    if not CUDA:  # the CUDA code path on CPU tensors: Triton kernels run by the interpreter, checks deferred
        monkeypatch.setattr(kernels, "_triton_for", lambda is_cuda: True)
        monkeypatch.setattr(validation, "DEFERRED_DEVICE_TYPES", frozenset({"cuda", "cpu"}))
    monkeypatch.setattr(kernels, "_FAILED", set())
    batch, dim = (256, 16) if CUDA else (48, 4)
    generator = torch.Generator().manual_seed(4)
    batches = []
    for step in range(7):
        ids = (torch.randint(0, 600, (2 * batch,), generator=generator) ** 2 % (700 + 50 * step)).to(DEVICE)
        offsets = torch.arange(0, 2 * batch + 1, 1 if pooling is PoolingMode.NONE else 2)  # bags of one id, or of two
        batches.append((ids, offsets.to(DEVICE)))
    bad = batches[4][1].clone()
    bad[[5, 6]] = bad[[6, 5]]  # not non-decreasing: the step runs on safe offsets, the check raises at the next read
    batches[4] = (batches[4][0], bad)
    row_bytes = (dim + state_width(optimizer, dim)) * 4
    hbm = {"gpu": None, "caching": 40 * row_bytes, "host": 0}[storage]

    def build(**graphs: object) -> BatchedDynamicEmbeddingTables:
        options = [
            DynamicEmbTableOptions(dim=dim, max_capacity=256, bucket_capacity=16, caching=storage == "caching", local_hbm_for_values=hbm, seed=t)
            for t in range(2)
        ]
        return BatchedDynamicEmbeddingTables(options, optimizer, pooling, device=DEVICE, learning_rate=0.1, **graphs)

    eager, graphed = build(), build(cuda_graphs=True)
    if not CUDA:
        graphed.graphs = StepGraphs(graphed, RecordedGraph)
    assert graphed.graphs.usable and graphed.storage_mode(0).value == storage
    for step, (ids, offsets) in enumerate(batches):
        outputs = []
        for tables in (eager, graphed):
            out = tables(ids, offsets)
            if storage == "caching" and step == 3:  # the next batch brought in before this one's backward
                tables.prefetch(*batches[step + 1])
            outputs.append(out.detach().clone())
            out.backward(torch.ones_like(out) * 0.5 + out.detach() * 0.1)
        torch.testing.assert_close(outputs[1], outputs[0], rtol=1e-5, atol=1e-6)
    (shape,) = graphed.graphs._shapes.values()
    assert shape.grad is not None, "a forward and a backward were captured and replayed"
    for tables in (eager, graphed):
        with pytest.raises(ValueError, match="non-decreasing"):
            tables.check_inputs()
    assert graphed.step == eager.step == len(batches) and graphed.cache_stats() == eager.cache_stats()
    assert eager.cache_stats()["evictions"] > 0
    for t in range(2):
        (keys_a, rows_a, state_a), (keys_b, rows_b, state_b) = eager.export_table(t), graphed.export_table(t)
        assert torch.equal(keys_a, keys_b)
        torch.testing.assert_close(rows_b, rows_a, rtol=1e-5, atol=1e-6)
        for name in state_a:
            torch.testing.assert_close(state_b[name], state_a[name], rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(RUNS_KERNELS, reason="needs a Triton kernel that cannot run: CPU tensors without the interpreter")
def test_a_kernel_that_cannot_run_falls_back_to_torch_once(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("triton")
    import dynemb.kernels as kernels

    monkeypatch.setattr(kernels, "use_triton", lambda tensor: True)
    monkeypatch.setattr(kernels, "_FAILED", set())
    keys = torch.tensor([3, -9, 2**40])
    with pytest.warns(RuntimeWarning, match="Triton kernel for uniform_rows failed"):
        rows = kernels.uniform_rows(keys, 4, 7, -0.5, 1.0)
    assert torch.equal(rows, torch_ops.uniform_rows(keys, 4, 7, -0.5, 1.0))
    assert kernels._FAILED == {"uniform_rows"}


@pytest.mark.skipif(RUNS_KERNELS, reason="patches the Triton module of a process that does not run it")
def test_a_step_that_failed_after_writing_is_not_rerun(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("triton")
    import dynemb.kernels as kernels
    from dynemb.kernels import triton_ops as compiled_ops

    def half_done(*args: object) -> None:
        raise kernels.PartialUpdateError("second kernel failed")

    monkeypatch.setattr(kernels, "use_triton", lambda tensor: True)
    monkeypatch.setattr(kernels, "_FAILED", set())
    monkeypatch.setattr(compiled_ops, "reduce_and_update", half_done)
    case = _random_update_case(EmbOptimType.EXACT_SGD, seed=0)
    rows = case["rows"].clone()
    with pytest.raises(kernels.PartialUpdateError):
        parts = RowParts(rows, rows, rows.shape[0], rows.shape[0] - 1)
        kernels.reduce_and_update(parts, case["grouped_slots"], case["order"], case["index_grads"], OptimizerArgs.of(EmbOptimType.EXACT_SGD, case["params"], 1, DEVICE))
    assert torch.equal(rows, case["rows"]), "the torch path must not run after a partial update"


@kernels_here
def test_a_later_kernel_that_fails_raises_a_partial_update(monkeypatch: pytest.MonkeyPatch) -> None:
    """A step's second kernel that cannot run (say, its Triton version cannot compile it) comes after the first
    wrote: the step raises ``PartialUpdateError``, so the dispatcher never reruns it in torch (which would claim
    the batch's slots, or fold its offset checks, twice)."""
    from dynemb.kernels.operands import RECORD_FIRST, RECORD_LAST

    launch = triton_ops._launch

    def failing(kernel, grid, *args, **meta):  # noqa: ANN001, ANN202 - _launch's own signature
        if kernel in (triton_ops._locate_kernel, triton_ops._safe_offsets_kernel):
            raise RuntimeError("PassManager::run failed")
        launch(kernel, grid, *args, **meta)

    monkeypatch.setattr(triton_ops, "_launch", failing)
    table, stored, _ = _map_table((3, 5), (3, 2), 4, seed=4)
    indices = torch.cat([stored[:3], torch.arange(500, 506, device=DEVICE)])
    offsets = torch.tensor([0, 4, 6, 8, indices.numel()], device=DEVICE)
    access = Access(torch.tensor([7], device=DEVICE), False, *(torch.zeros(2, dtype=torch.int64, device=DEVICE) for _ in range(2)))
    with pytest.raises(PartialUpdateError, match="_locate_kernel failed after the find claimed"):
        triton_ops.find_or_claim(table.arrays.with_pending(), indices, None, offsets, 2, access, True, None, 0, None)
    record = torch.zeros(RECORD_LAST + 1, dtype=torch.int64, device=DEVICE)
    record[RECORD_FIRST], record[RECORD_LAST] = torch.iinfo(torch.int64).max, -1
    with pytest.raises(PartialUpdateError, match="_safe_offsets_kernel failed after"):
        triton_ops.check_offsets(offsets, indices.numel(), record, torch.tensor([1], device=DEVICE), True)


def test_each_step_has_one_signature_on_both_paths() -> None:
    """The dispatcher runs a step's Triton function with the arguments of its torch function: they must agree."""
    pytest.importorskip("triton")
    import dynemb.kernels as kernels
    from dynemb.kernels import triton_ops as compiled_ops

    for name in kernels.STEPS:
        reference = inspect.signature(getattr(torch_ops, name))
        assert inspect.signature(getattr(compiled_ops, name)) == reference, name
        assert inspect.signature(getattr(kernels, name)) == reference, name
        first = next(iter(reference.parameters.values()))
        assert first.annotation in ("torch.Tensor", "SlotArrays", "RowParts"), f"{name}: the dispatcher reads the device of its first argument"


def test_insert_reads_per_key_or_per_bucket_rows_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    outcomes = []
    for limit in (1 << 24, 0):  # per-key rows (no host sync), then one row per touched bucket
        monkeypatch.setattr(torch_ops, "_ROWS_PER_KEY_LIMIT", limit)
        table, _ = _filled_table(3, 5, seed=9)  # full buckets, so inserts evict and refuse
        keys = torch.arange(1000, 1012, device=DEVICE)
        protect = table.find(torch.arange(-50, 150, device=DEVICE))[0]  # some of the stored ids
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
        sorted_buckets, order = torch.sort(table.find(keys)[1], stable=True)
        rank = torch.arange(keys.numel(), device=DEVICE) - torch.searchsorted(sorted_buckets, sorted_buckets)
        protected = table.arrays.protected.clone()
        protected[torch.randperm(table.capacity, generator=generator)[: table.capacity // 3].to(DEVICE)] = True
        slots, mask, evicted_keys, evicted_scores = ops.place_keys(table.arrays._replace(protected=protected), sorted_buckets, rank, order, keys, scores)
        results.append((slots, mask, evicted_keys[mask], evicted_scores[mask], table.keys.clone(), table.scores.clone(), table.occupied.clone()))
    expected_slots, expected_mask = results[0][:2]
    assert (expected_slots < 0).any() and expected_mask.any(), "the case must refuse and evict"
    for ours, reference in zip(results[1], results[0], strict=True):
        assert torch.equal(ours, reference)


def _draws(dim: int) -> DrawTables:
    """A UNIFORM table and a CONSTANT one, as kernels draw them."""
    return DrawTables(
        torch.tensor([seed_word(1), seed_word(2)], device=DEVICE), torch.tensor([-0.5, 1.0], device=DEVICE), torch.tensor([1.0, 0.0], device=DEVICE), dim,
    )


def _insert_new_with(ops, table: BucketedHashTable, rows: torch.Tensor, split: int, indices: torch.Tensor, offsets: torch.Tensor, lfu: bool):
    """One training lookup's find and insert of new ids through ``ops``, as ``TableGroup`` runs them; what it
    left: (slots, entry, found rows, the table's arrays, the rows, the pending keys after the insert)."""
    parts = _split(rows, split)
    hits = torch.zeros(table.map.num_tables, dtype=torch.int64, device=DEVICE)
    misses, evictions = torch.zeros_like(hits), torch.zeros_like(hits)
    index = table.arrays.with_pending()
    access = Access(torch.tensor([7], device=DEVICE), lfu, hits, misses)
    device_rows = parts if split > parts.spare else None
    found = ops.find_or_claim(index, indices, None, offsets, (offsets.numel() - 1) // table.map.num_tables, access, True, device_rows, 4, None)
    claimed = index.pending.keys.clone()
    protected = index.protected.clone()
    ops.place_new(index, found, evictions)
    draws = _draws(4)
    fresh = torch.zeros(indices.numel(), 4, device=DEVICE)
    ops.fresh_rows(indices, found.slots, found.table, draws, fresh, None)  # before the write, as the table runs it
    ops.write_new(index, found, indices, access, parts, draws, 0.25, None)
    assert protected[:-1].sum() > 0 and not index.protected.any(), "the find protects the batch's slots, the write releases them"
    state = (index.keys.clone(), index.scores.clone(), index.occupied.clone(), hits, misses, evictions)
    return found.slots, found.entry, found.read, fresh, claimed, state, _joined(parts), index.pending


@kernels_here
@pytest.mark.parametrize("lfu", [False, True])
@pytest.mark.parametrize("split", [None, 0, 9])
def test_insert_of_new_ids_without_a_count_matches_torch(lfu: bool, split: int | None) -> None:
    """Find, carry-in, locate, elect, plan, write and fill in, kernels against torch: two tables in one set of
    slot arrays with full buckets (evictions), repeated new ids, and a batch that brings one bucket more new
    ids than it has slots."""
    cap = 4
    results = {}
    for ops in (torch_ops, triton_ops):
        table, stored, owners = _map_table((3, 5), (3, 2), cap, seed=4)
        table.insert(*(lambda k: (k, torch.full_like(k, 1)))(torch.tensor([1000, 1001], device=DEVICE)))  # some buckets fuller
        total = table.capacity + 1
        rows = torch.randn(total, 4 + 2, generator=torch.Generator().manual_seed(3)).to(DEVICE)
        generator = torch.Generator().manual_seed(8)
        first = torch.cat([stored[owners == 0][:5], torch.randint(-300, 300, (9,), generator=generator).to(DEVICE)])
        second = torch.cat([stored[owners == 1][:3], torch.arange(500, 530, device=DEVICE)])  # 30 new ids: buckets overfill
        indices = torch.cat([first, first[:4], second, second[-6:]])
        offsets = torch.tensor([0, 9, 18, 40, indices.numel()], device=DEVICE)
        results[ops] = _insert_new_with(ops, table, rows, table.capacity + 1 if split is None else split, indices, offsets, lfu)
    ours, reference = results[triton_ops], results[torch_ops]
    for name, a, b in zip(("slots", "entry", "out", "fresh", "claimed"), ours[:5], reference[:5], strict=True):
        if a is None or b is None:
            assert a is None and b is None, name
        elif a.dtype.is_floating_point:
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7, msg=name)
        else:
            assert torch.equal(a, b), name
    for a, b in zip(ours[5][:3], reference[5][:3], strict=True):  # the spare entry (absent ids' touches) aside
        assert torch.equal(a[:-1], b[:-1])
    for a, b in zip(ours[5][3:], reference[5][3:], strict=True):
        assert torch.equal(a, b)
    torch.testing.assert_close(ours[6][:-1], reference[6][:-1], rtol=1e-6, atol=1e-7)
    assert (reference[1] == -1).any() and (reference[0] == -1).any(), "some ids found no entry or no slot"
    assert reference[5][5].sum() > 0, "some inserts evicted"
    for pending in (ours[7], reference[7]):  # reset for the next batch
        assert (pending.keys == torch.iinfo(torch.int64).max).all() and (pending.owner == 0).all() and (pending.uses == 0).all()


def _cached_insert_with(ops, lfu: bool, seed: int) -> dict:
    """One training lookup of a cache over storage through ``ops``, the steps ``dynemb.tier.CachedTier`` runs: the
    find through both tiers, the cache's plan, what it sends to storage, storage's claiming find, plan and write
    (rows from the cache slots they leave), the cache's write (rows from storage), as two tables in one set of
    slot arrays per tier. What it left, and what it sent."""
    generator = torch.Generator().manual_seed(seed)
    cap, dim, width = 4, 4, 6
    cache, _, _ = _map_table((2, 3), (2, 3), cap, seed=seed)  # some ids of each table cached, buckets nearly full
    storage = BucketedHashTable(BucketMap((3, 4), (0, 0)), cap, DEVICE)  # every row in host memory
    stored_keys = torch.cat([torch.arange(-40, 40), torch.arange(600, 640)]).to(DEVICE)
    stored_keys = stored_keys[torch.randperm(stored_keys.numel(), generator=generator).to(DEVICE)]
    for t in range(2):  # storage: some of those of each table, some buckets full
        keys = _first_per_bucket_of(storage, stored_keys, t, cap)
        storage.insert(keys, torch.randint(0, 9, keys.shape, generator=generator).to(DEVICE), table=torch.full_like(keys, t))
    cache.scores.copy_(torch.randint(0, 5, cache.scores.shape, generator=generator).to(DEVICE))
    cache_rows = torch.randn(cache.capacity + 1, width, generator=generator).to(DEVICE)
    storage_rows = torch.randn(storage.capacity + 1, width, generator=generator).to(DEVICE)
    cache_parts, storage_parts = _split(cache_rows, cache.capacity + 1), _split(storage_rows, 0)
    cached, stored = (cache.items(0)[0], cache.items(1)[0]), (storage.items(0)[0], storage.items(1)[0])
    first = torch.cat([cached[0][:3], stored[0][:6], torch.arange(-12, 6, device=DEVICE)])
    second = torch.cat([cached[1][:2], stored[1][:4], torch.arange(700, 730, device=DEVICE)])  # more new ids than a bucket holds
    indices = torch.cat([first, first[3:9], second, second[-5:]])
    offsets = torch.tensor([0, 14, first.numel() + 6, first.numel() + 6 + 20, indices.numel()], device=DEVICE)  # batch size 2
    front, behind = cache.arrays.with_pending(), storage.arrays.with_pending()
    counters = [torch.zeros(2, dtype=torch.int64, device=DEVICE) for _ in range(6)]
    clock = torch.tensor([7], device=DEVICE)
    access, there = Access(clock, lfu, *counters[:2]), Access(clock, lfu, *counters[2:4])
    draws = _draws(dim)
    found = ops.find_or_claim(front, indices, None, offsets, 2, access, True, cache_parts, dim, behind)
    outer, read = found.outer.clone(), found.read.clone()
    ops.place_new(front, found, counters[4])
    sent = ops.outgoing(front, found, indices)
    stored = ops.find_or_claim(behind, sent[0], sent[1], None, 0, there, True, None, 0, None)
    found_there = stored.slots.clone()
    ops.place_new(behind, stored, counters[5])
    ops.write_new(behind, stored, sent[0], there, storage_parts, draws, 0.25, Source(front, cache_parts, sent[2], True))
    fresh = torch.zeros(indices.numel(), dim, device=DEVICE)
    base = cache.capacity + 1
    absent = found.slots.clone()
    ops.write_new(front, found, indices, access, cache_parts, draws, 0.25, Source(behind, storage_parts, found.outer, False, stored.slots, base))
    # after the write, from the group's one address space (the cache's rows, then the storage's from base on)
    addressed = RowParts(cache_parts.device, storage_parts.host, base, base + storage_parts.spare)
    ops.fresh_rows(indices, absent, found.table, draws, fresh, Source(None, addressed, found.slots, False))
    return dict(
        slots=found.slots, outer=outer, read=read, fresh=fresh, sent=sent, found_there=found_there, counters=counters, base=base,
        cache=(front.keys[:-1], front.scores[:-1], front.occupied[:-1]), storage=(behind.keys[:-1], behind.scores[:-1], behind.occupied[:-1]),
        cache_rows=_joined(cache_parts)[:-1], storage_rows=_joined(storage_parts)[:-1], arrays=(front, behind),
    )


def _first_per_bucket_of(table: BucketedHashTable, keys: torch.Tensor, t: int, most: int) -> torch.Tensor:
    """The first ``most`` of ``keys`` in each of table ``t``'s buckets, in their order."""
    _, buckets = table.find(keys, torch.full_like(keys, t))
    rank = torch.zeros_like(buckets)
    for b in torch.unique(buckets).tolist():
        where = torch.nonzero(buckets == b).squeeze(1)
        rank[where] = torch.arange(where.numel(), device=DEVICE)
    return keys[rank < most]


def _evictees(sent: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> set[tuple[int, int, int]]:
    """(id, table, cache slot) of each evictee a cache's insert sends to storage."""
    keys, table, leaving = sent
    carried = leaving >= 0
    return set(zip(keys[carried].tolist(), table[carried].tolist(), leaving[carried].tolist(), strict=True))


@kernels_here
@pytest.mark.parametrize("lfu", [False, True])
def test_a_cache_insert_through_storage_matches_torch(lfu: bool) -> None:
    """A cache's misses brought in from storage and its evictees written back, in the kernels and in torch: the
    same tiers, rows and addresses, with every case present (hits; misses stored and new; evictees stored and
    not; ids past a bucket's pending row and ids no cache slot was left for, which go to storage)."""
    ours, reference = _cached_insert_with(triton_ops, lfu, seed=3), _cached_insert_with(torch_ops, lfu, seed=3)
    for name in ("slots", "outer"):
        assert torch.equal(ours[name], reference[name]), name
    for name in ("read", "fresh", "cache_rows", "storage_rows"):
        torch.testing.assert_close(ours[name], reference[name], rtol=1e-6, atol=1e-7, msg=name)
    for tier in ("cache", "storage"):
        for a, b in zip(ours[tier], reference[tier], strict=True):
            assert torch.equal(a, b), tier
    for a, b in zip(ours["counters"][:2] + ours["counters"][4:5], reference["counters"][:2] + reference["counters"][4:5], strict=True):
        assert torch.equal(a, b)
    # Each path picks its own index to carry an evictee: the same ids are sent, an index's own key at the same index.
    keys, table, leaving = reference["sent"]
    own = (table >= 0) & (leaving < 0)
    assert torch.equal((ours["sent"][1] >= 0) & (ours["sent"][2] < 0), own) and torch.equal(ours["sent"][0][own], keys[own])
    assert _evictees(ours["sent"]) == _evictees(reference["sent"])
    slots, outer, base = reference["slots"], reference["outer"], reference["base"]
    assert (outer >= 0).any(), "some misses were read from storage"
    assert (slots >= base).any() and (slots == -1).any(), "some indices went to storage, some found no slot anywhere"
    stored_before = reference["found_there"][leaving >= 0]
    assert (stored_before >= 0).any() and (stored_before < 0).any(), "some evictees were stored before, some were not"
    assert int(reference["counters"][4].sum()) == len(_evictees(reference["sent"])), "each eviction sends its evictee"
    for arrays in (*ours["arrays"], *reference["arrays"]):  # released and reset for the next batch
        assert not arrays.protected.any()
        assert (arrays.pending.keys == torch.iinfo(torch.int64).max).all() and (arrays.pending.uses == 0).all()


@kernels_here
def test_pooling_reads_fresh_rows_for_indices_without_a_slot() -> None:
    generator = torch.Generator().manual_seed(5)
    emb = torch.randn(30, 6, generator=generator).to(DEVICE)
    offsets = torch.tensor([0, 3, 3, 9, 10], device=DEVICE)
    inverse = torch.randint(0, 30, (10,), generator=generator).to(DEVICE)
    inverse[[1, 4, 9]] = -1
    inverse[[2, 6]] = torch.tensor([30, 1000], device=DEVICE)  # rows of a storage behind a cache (addresses past the cache's rows)
    fresh = torch.randn(10, 6, generator=generator).to(DEVICE)
    inside = ((inverse >= 0) & (inverse < 30)).unsqueeze(1)
    rows = torch.where(inside, emb[inverse.clamp(0, 29)], fresh)
    expected = torch.stack([rows[a:b].sum(0) for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)])
    for ops in (torch_ops, triton_ops):
        out = torch.zeros(4, 6, device=DEVICE)
        ops.pool_rows(emb, inverse, offsets, PoolingMode.SUM, out, fresh)
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)


@kernels_here
def test_fresh_rows_read_the_tier_behind_where_it_holds_the_id() -> None:
    """An eval lookup of a cache: an index absent from the cache takes its stored row, else its draw."""
    generator = torch.Generator().manual_seed(8)
    keys = torch.randint(-50, 50, (40,), generator=generator).to(DEVICE)
    slots = torch.where(torch.rand(40, generator=generator).to(DEVICE) < 0.5, -1, 3)
    table = torch.randint(0, 2, (40,), generator=generator).to(DEVICE)
    outer = torch.where(torch.rand(40, generator=generator).to(DEVICE) < 0.5, torch.randint(0, 20, (40,), generator=generator).to(DEVICE), -1)
    storage = _split(torch.randn(21, 6, generator=generator).to(DEVICE), 0)
    source = Source(BucketedHashTable(5, 4, DEVICE).arrays, storage, outer, False)
    results = []
    for ops in (torch_ops, triton_ops):
        dst = torch.full((40, 4), 9.0, device=DEVICE)
        ops.fresh_rows(keys, slots, table, _draws(4), dst, source)
        results.append(dst)
    torch.testing.assert_close(results[1], results[0], rtol=1e-6, atol=1e-7)
    absent, stored = slots < 0, outer >= 0
    assert torch.equal(results[0][absent & stored], storage.host[outer[absent & stored], :4])
    assert (results[0][~absent] == 9.0).all() and not (results[0][absent & ~stored] == 9.0).any()


@kernels_here
def test_offset_checks_fold_into_the_record_as_torch_does() -> None:
    """Batches checked one after another, good and bad (decreasing, wrong ends, both; over several blocks): the
    kernels keep the first failure and give the same safe offsets as torch."""
    from dynemb.kernels.operands import RECORD_FIRST, RECORD_LAST

    long = torch.arange(0, 3000, 1)
    batches = [
        (torch.tensor([0, 1, 3, 3]), 3), (torch.tensor([0, 2, 1, 3]), 3), (torch.tensor([1, 2, 3, 4]), 4),
        (torch.cat([long[:2000], long[1990:2999]]), 2998), (torch.tensor([0, 5, 4, 9]), 7), (torch.tensor([0, 1, 2]), 2),
    ]
    records = {}
    for ops in (torch_ops, triton_ops):
        record = torch.zeros(RECORD_LAST + 1, dtype=torch.int64, device=DEVICE)
        record[RECORD_FIRST], record[RECORD_LAST] = torch.iinfo(torch.int64).max, -1
        numbers = [torch.tensor([seq], device=DEVICE) for seq in range(1, len(batches) + 1)]
        safe = [ops.check_offsets(offsets.to(DEVICE), n, record, seq, True) for seq, (offsets, n) in zip(numbers, batches, strict=True)]
        records[ops] = (record.cpu(), safe)
    assert torch.equal(records[triton_ops][0], records[torch_ops][0])
    for ours, theirs in zip(records[triton_ops][1], records[torch_ops][1], strict=True):
        assert torch.equal(ours, theirs)
    assert records[torch_ops][0][:2].tolist() == [2, 2], "the first failure (batch 2, decreasing) is kept"
    assert torch.equal(records[torch_ops][1][0].cpu(), batches[0][0]), "a good batch keeps its offsets"
