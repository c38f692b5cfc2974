"""On a GPU: which Triton step makes a CACHING table train unlike the all-in-GPU one (tests/test_dynemb_storage.py's
``test_mode_trains_like_all_in_gpu[cuda-*-caching]``, which fails on an H200 with Triton 3.6 and passes on the CPU).

    python tools/gpu_host/bisect_caching.py [--optimizer adam] [--pooling sum] [--steps 14]

Trains the reference (all rows on the device, Triton kernels) and the cached tables on the same batches: twice with
every step in Triton (the second against the first: a run that differs from itself is a race), once with one program
per grid-stride kernel (a difference that goes away there is a race between programs), once with the device
synchronized after every launch (one that goes away there is an ordering between streams or with the host), once
with the cached tables' steps all in torch (``DYNEMB_KERNELS=torch``) and once with each dispatched step alone in torch.
One line per run: the first batch whose output differs (beyond 1e-5) and by how much, and the final rows' largest
difference. The steps whose torch run alone trains like the reference are where to look.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator

import torch

import dynemb.kernels as kernels
import dynemb.kernels.torch_ops as torch_ops
import dynemb.kernels.triton_ops as triton_ops
from dynemb import BatchedDynamicEmbeddingTables, DynamicEmbTableOptions, EmbOptimType, PoolingMode
from dynemb.optimizers import state_width
from dynemb.tier import CachedTier

DIM = 4


@contextlib.contextmanager
def torch_for(steps: set[str] | None) -> Iterator[None]:
    """The dispatched ``steps`` in torch (None: every step) while inside."""
    saved, env = kernels._FAILED, os.environ.get("DYNEMB_KERNELS")
    if steps is None:
        os.environ["DYNEMB_KERNELS"] = "torch"
    else:
        kernels._FAILED = set(steps)
    try:
        yield
    finally:
        kernels._FAILED = saved
        if env is None:
            os.environ.pop("DYNEMB_KERNELS", None)
        else:
            os.environ["DYNEMB_KERNELS"] = env


@contextlib.contextmanager
def patched(name: str, value: object) -> Iterator[None]:
    """``triton_ops.<name>`` set to ``value`` while inside."""
    saved = getattr(triton_ops, name)
    setattr(triton_ops, name, value)
    try:
        yield
    finally:
        setattr(triton_ops, name, saved)


def synchronized_launches() -> contextlib.AbstractContextManager:
    """Every Triton launch followed by a device-wide synchronize."""
    launch = triton_ops._launch

    def launch_and_wait(*args: object, **meta: object) -> None:
        launch(*args, **meta)
        torch.cuda.synchronize()

    return patched("_launch", launch_and_wait)


@contextlib.contextmanager
def checked_fills(limit: int = 12, replace: bool = False) -> Iterator[None]:
    """After each cache insert of a lookup (``CachedTier.insert_new`` with a ``fresh`` target), one line per index
    (the first ``limit``) whose fresh values differ from those at the address it got (a cache or storage slot),
    or from its draw where it got none: the insert's number, its place in the batch, key, entry, whether it
    carried its new id (won the entry's owner), the address it had and got, its storage slot, and how far its
    fresh values are from those at its address, from its draw and from what ``fresh_rows`` (the eval path's
    fill) gives it before the insert. ``replace``: the insert's fresh values are then those of ``fresh_rows``."""
    insert = CachedTier.insert_new
    printed, inserts = 0, 0

    def insert_and_check(self: CachedTier, found, keys, access, evictions, draws, state_fill, fresh) -> None:  # noqa: ANN001
        nonlocal printed, inserts
        if fresh is None:
            return insert(self, found, keys, access, evictions, draws, state_fill, fresh)
        inserts += 1
        before = found.slots.clone()
        owner = self.cache._index.arrays.pending.owner
        positions = torch.arange(keys.numel(), device=keys.device)
        carried = (found.entry >= 0) & (owner[found.entry.clamp(min=0)] == positions + 1)
        filled = fresh.clone()
        kernels.fresh_rows(keys, found.slots, found.table, draws, filled, self.storage.source(found.outer, False))
        insert(self, found, keys, access, evictions, draws, state_fill, fresh)
        absent = torch.nonzero(before < 0).squeeze(1)
        given = found.slots[absent]
        stored = torch_ops.gather_rows(self.parts, given, draws.dim)
        table = found.table[absent]
        drawn = torch_ops.uniform_rows(keys[absent], draws.dim, draws.seed_words[table], draws.lower[table], draws.span[table])
        expected = torch.where((given >= 0).unsqueeze(1), stored, drawn)
        got = fresh[absent]
        wrong = (got - expected).abs().amax(1)
        for k in torch.nonzero(wrong > 1e-6).squeeze(1).tolist()[: max(limit - printed, 0)]:
            i = int(absent[k])
            print(f"  insert {inserts} index {i} key {int(keys[i])} entry {int(found.entry[i])} carrier {bool(carried[i])} slot {int(before[i])} -> "
                  f"{int(given[k])} (base {self.base}) outer {int(found.outer[i])}: off by {float(wrong[k]):.3g} from its address, "
                  f"{float((got[k] - drawn[k]).abs().max()):.3g} from its draw, {float((got[k] - filled[i]).abs().max()):.3g} from fresh_rows'",
                  flush=True)
            printed += 1
        if replace:
            fresh[absent] = filled[absent]
        return None

    CachedTier.insert_new = insert_and_check
    try:
        yield
    finally:
        CachedTier.insert_new = insert


def make(optimizer: EmbOptimType, pooling: PoolingMode, device: str, **overrides: object) -> BatchedDynamicEmbeddingTables:
    options = DynamicEmbTableOptions(dim=DIM, max_capacity=1024, bucket_capacity=8, seed=5, **overrides)
    return BatchedDynamicEmbeddingTables([options] * 2, optimizer, pooling, device=device, learning_rate=0.05)


def batches(count: int, device: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    result = []
    for _ in range(count):
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(torch.randint(0, 4, (32,), generator=generator), 0)])
        ids = torch.randint(-40, 40, (int(offsets[-1]),), generator=generator) * 7919
        result.append((ids.to(device), offsets.to(device)))
    return result


def train(tables: BatchedDynamicEmbeddingTables, data: list) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Each batch's output (trained with the same seeded gradients) and each table's final rows and state."""
    generator = torch.Generator().manual_seed(1)
    outputs = []
    for ids, offsets in data:
        out = tables(ids, offsets)
        outputs.append(out.detach().clone())
        out.backward(torch.randn(out.shape, generator=generator).to(out.device))
    exported = [tables.export_table(t) for t in range(2)]
    return outputs, [torch.cat([rows, *[s.reshape(s.shape[0], -1) for s in state.values()]], 1) for _, rows, state in exported]


def report(name: str, got: tuple, expected: tuple) -> None:
    first = next((k for k, (a, b) in enumerate(zip(got[0], expected[0], strict=True)) if not torch.allclose(a, b, atol=1e-5, rtol=1e-5)), None)
    worst = max(float((a - b).abs().max()) for a, b in zip(got[0], expected[0], strict=True))
    rows = max(float((a - b).abs().max()) if a.shape == b.shape else float("inf") for a, b in zip(got[1], expected[1], strict=True))
    print(f"{name:24s} first differing batch {first}, largest output difference {worst:.3g}, final rows {rows:.3g}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--optimizer", default="adam", choices=[o.value for o in EmbOptimType])
    parser.add_argument("--pooling", default="sum", choices=["sum", "mean", "none"])
    parser.add_argument("--steps", type=int, default=14)
    parser.add_argument("--device", default="cuda", help="cpu: a smoke test of this script (torch everywhere)")
    args = parser.parse_args()
    optimizer, pooling = EmbOptimType(args.optimizer), PoolingMode[args.pooling.upper()]
    data = batches(args.steps, args.device)
    hbm = 16 * (DIM + state_width(optimizer, DIM)) * 4

    def cached(scope: contextlib.AbstractContextManager) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        with scope:
            return train(make(optimizer, pooling, args.device, caching=True, local_hbm_for_values=hbm), data)

    expected = train(make(optimizer, pooling, args.device), data)
    first = cached(contextlib.nullcontext())
    report("triton", first, expected)
    report("triton again (vs first)", cached(contextlib.nullcontext()), first)
    if args.device == "cuda":
        report("triton, one program", cached(patched("_PENDING_PROGRAMS", 1)), expected)
        report("triton, synchronized", cached(synchronized_launches()), expected)
    report("torch", cached(torch_for(None)), expected)
    report("triton, fills checked", cached(checked_fills()), expected)
    report("triton, fresh_rows' fills", cached(checked_fills(0, replace=True)), expected)
    # find_or_claim's torch version elects no owner, which Triton's outgoing and write_new read: those three go together.
    claim = ("find_or_claim", "outgoing", "write_new")
    for steps in [(step,) for step in kernels.STEPS if step != "find_or_claim"] + [claim]:
        report(f"torch for {'+'.join(steps)}", cached(torch_for(set(steps))), expected)


if __name__ == "__main__":
    main()
