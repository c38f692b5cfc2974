"""What the kernels take: the operands a kernel family shares, bundled as named tuples (as TBE's ``CommonArgs``
and ``OptimizerArgs``), so that a kernel's signature is written once per implementation and a new operand is
one field.

Every kernel's first argument is a tensor on the compute device or a bundle whose first field is one: the
dispatcher (``dynemb.kernels``) picks the Triton or the torch path from it. Bundles hold arrays the library
allocates (dense by construction); a batch's own tensors (ids, offsets, slots) stay loose, where the
dispatcher makes 1-D ones dense for the kernels.

- ``SlotArrays``: a hash index as the find and insert kernels address it (``find``, ``find_or_claim``,
  ``place_keys``, ``place_new``, ``write_new``).
- ``Access``: how a training lookup records what it touched (scores, hit and miss counters).
- ``Found``: a TBE batch as ``find_or_claim`` leaves it, what ``place_new``, ``outgoing`` and ``write_new`` read.
- ``Source``: where a tier's new rows come from when another tier holds them (a cache's misses, its write-backs).
- ``RowParts``: a row store as the row kernels address it (gathers, scatter, the update, ``write_new``).
- ``OptimizerArgs``: the update's optimizer, hyper-parameters and step.
- ``DrawTables``: an initializer that kernels draw inline.

``RowParts``: rows ``[0, split)`` are in device memory (``device[r]``), rows ``[split, spare]`` in host memory
(``host[r - split]``): one comparison per row decides the address, as TBE's kernels pick a placement per
table. With every row on the device, ``split`` is past the spare row and ``host`` is the device tensor (never
read); with none, ``split`` is 0 and ``device`` is the host tensor (never read), so no kernel is ever handed an
empty tensor. Both parts have the same row width. Row ``spare`` (the last) is where reads and writes for slot
-1 go.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from dynemb.optimizers import OptimizerParams
from dynemb.options import EmbOptimType


class RowParts(NamedTuple):
    device: torch.Tensor
    host: torch.Tensor
    split: int
    spare: int

    @property
    def width(self) -> int:
        return self.device.shape[1]

    @property
    def on_device(self) -> bool:
        """Every row (the spare too) is in device memory."""
        return self.split > self.spare


class BucketTensors(NamedTuple):
    """A ``dynemb.hash_table.BucketMap`` as the kernels read it: one int64 entry per table each."""

    num_buckets: torch.Tensor
    device_buckets: torch.Tensor
    device_base: torch.Tensor
    host_base: torch.Tensor


class PendingArrays(NamedTuple):
    """Scratch per slot of a hash table where one training lookup collects the ids it did not find.

    Row ``bucket`` (entries ``bucket * capacity + j``) holds that bucket's new ids of
    the batch in ascending order, the smallest ``capacity`` of them (``keys``; the
    int64 maximum where unused): entry ``j`` is the bucket's ``j``-th new id, the rank
    the insert places it by. ``owner`` is the batch position (plus one) that carries
    the id into the table (0: none yet), ``uses`` its count in the batch, ``target``
    the slot the insert gave it (-1: none). Every array has a spare last entry; all
    but ``target`` are reset after each insert.
    """

    keys: torch.Tensor  # int64
    owner: torch.Tensor  # int32
    uses: torch.Tensor  # int64
    target: torch.Tensor  # int64


class SlotArrays(NamedTuple):
    """A hash index (``dynemb.hash_table.BucketedHashTable``) as its kernels address it.

    Slot ``b * bucket_capacity + p`` is position ``p`` of bucket ``b``; each per-slot array is one entry longer
    than the slots (the spare, where writes for slot -1 land). ``protected`` marks the slots an insert must not
    evict; ``maps`` places each table's buckets; ``pending`` is the scratch where a training lookup collects its
    new ids (None until the index first claims).
    """

    keys: torch.Tensor  # int64
    scores: torch.Tensor  # int64
    occupied: torch.Tensor  # bool
    protected: torch.Tensor  # bool
    maps: BucketTensors
    bucket_capacity: int
    pending: PendingArrays | None

    @classmethod
    def allocate(cls, slots: int, maps: BucketTensors, bucket_capacity: int, device: torch.device) -> SlotArrays:
        """Empty arrays for ``slots`` slots (plus the spare)."""
        length = slots + 1
        return cls(
            torch.zeros(length, dtype=torch.int64, device=device),
            torch.zeros(length, dtype=torch.int64, device=device),
            torch.zeros(length, dtype=torch.bool, device=device),
            torch.zeros(length, dtype=torch.bool, device=device),
            maps, bucket_capacity, None,
        )

    def with_pending(self) -> SlotArrays:
        """These arrays with the pending scratch, allocated if not yet."""
        if self.pending is not None:
            return self
        length, device = self.keys.numel(), self.keys.device
        return self._replace(pending=PendingArrays(
            torch.full((length,), torch.iinfo(torch.int64).max, dtype=torch.int64, device=device),
            torch.zeros(length, dtype=torch.int32, device=device),
            torch.zeros(length, dtype=torch.int64, device=device),
            torch.full((length,), -1, dtype=torch.int64, device=device),
        ))


class Access(NamedTuple):
    """How a training lookup records its accesses: a found slot's score becomes ``clock`` (``add_counts``: grows
    by one per index), ``hits[t]``/``misses[t]`` count table ``t``'s indices; a new id's score is ``clock``
    (``add_counts``: its uses in the batch). A lookup without one touches nothing. ``clock`` is a one-entry int64
    tensor the kernels read (a step's own clock when a CUDA graph replays the step)."""

    clock: torch.Tensor
    add_counts: bool
    hits: torch.Tensor  # int64, one per table
    misses: torch.Tensor


class Found(NamedTuple):
    """A TBE batch (or a list of keys) as ``find_or_claim`` leaves it, one entry per index: its slot (-1: absent, or
    no key: table -1), bucket and table, and its first columns where the find read them (``read``, else None). A
    claiming find adds each absent index's pending entry (``entry``, -1: none) and the new ids: one batch position
    each, in no particular order, in the first ``count`` entries of ``reps`` (``count`` a one-entry tensor only the
    device reads); without a claim these three are None. A find through a cache into the tier behind it adds
    ``outer``: each index absent here, its slot there (-1: absent there too, or found here). ``write_new`` fills
    in ``slots``."""

    slots: torch.Tensor
    buckets: torch.Tensor
    table: torch.Tensor
    read: torch.Tensor | None
    entry: torch.Tensor | None
    reps: torch.Tensor | None
    count: torch.Tensor | None
    outer: torch.Tensor | None = None


class Source(NamedTuple):
    """Where ``write_new`` takes a tier's new rows from, index by index: the row at ``slots[i]`` of another tier
    (``index``'s scores, ``rows``' rows; -1: none, the row is drawn), whose protection there it releases.

    ``carry`` (a write-back): a new id takes that slot's score as it is, and an id found here has its row and
    score overwritten from there. Else (a cache's misses) a new id's score is an access's (LFU: its uses plus that
    slot's score). ``spill``: each index this tier could not place, its slot in the tier behind (-1: none), which
    it then gets as ``base`` plus that slot, its address in the group's one address space (the cache's rows, its
    spare included, then the storage's). ``fresh_rows`` reads ``rows`` and ``slots`` only: a source of values,
    not of new ids, has no ``index`` (a cache's group reads its one address space so)."""

    index: SlotArrays | None
    rows: RowParts
    slots: torch.Tensor
    carry: bool
    spill: torch.Tensor | None = None
    base: int = 0


class OptimizerArgs(NamedTuple):
    """The update's optimizer, its hyper-parameters and the module's step (ADAM's bias correction): ``step`` as
    the host counts it (the torch path), ``at`` the same step in device memory and ``betas`` (float64) where the
    kernels compute the corrections, so that a CUDA graph's replay of a step uses its own step."""

    optimizer: EmbOptimType
    params: OptimizerParams
    step: int
    at: torch.Tensor  # int64, one entry
    betas: torch.Tensor  # float64: beta1, beta2

    @classmethod
    def of(cls, optimizer: EmbOptimType, params: OptimizerParams, step: int, device: torch.device) -> OptimizerArgs:
        """Arguments of a step taken on its own (not a module's): the step in device memory too."""
        at = torch.tensor([step], dtype=torch.int64, device=device)
        return cls(optimizer, params, step, at, torch.tensor([params.beta1, params.beta2], dtype=torch.float64, device=device))


class DrawTables(NamedTuple):
    """A group's UNIFORM or CONSTANT initializer as kernels draw it, one entry per table: a value is
    ``lower + span * u`` with ``u`` the uniform of (seed, id, column) (CONSTANT: ``span`` 0); a row's first ``dim``
    columns (its embedding) are drawn."""

    seed_words: torch.Tensor  # int64
    lower: torch.Tensor  # float32
    span: torch.Tensor  # float32
    dim: int


# A batch check's outcome, the higher winning where a batch fails both (as the eager checks order them).
CHECK_PASSED, CHECK_WRONG_ENDS, CHECK_DECREASING = 0, 1, 2
# The record of a module's deferred batch checks (``dynemb.validation.DeferredChecks``), six int64:
# the sequence number of the first failed batch since the last read (int64 max: none), its failed check,
# first offset, last offset and len(indices); and the sequence number of the last failed batch.
RECORD_FIRST, RECORD_CHECK, RECORD_LOW, RECORD_HIGH, RECORD_INDICES, RECORD_LAST = range(6)
