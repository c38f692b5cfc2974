"""A training step replayed from CUDA graphs: one graph for its forward, one for its backward, per batch shape.

A step of the tables launches a dozen kernels and a few torch ops, and at the seed size the host,
not the GPU, bounds it: the GPU waits for the launches. Where a batch's shape (its numbers of
indices and offsets) repeats, the step's device work is captured once per phase into a CUDA graph
and replayed: the host copies the batch into the graph's inputs and launches one graph per phase.
Nothing that changes between steps is a launch argument (``dynemb.counters``), and what the step's
Python changes on the host (the checks' unread batch, the clocks, the tiers' versions, the step) is
applied again at each replay, as much as the capture changed it.

Off by default (``BatchedDynamicEmbeddingTables(cuda_graphs=True)`` or ``DYNEMB_CUDA_GRAPHS=1``).
Graphs need CUDA with the Triton kernels, one storage group and the sync-free path (UNIFORM or
CONSTANT initializers, host rows the GPU maps); other modules run every step eagerly. A shape is
captured the second time it comes (the first runs eagerly and compiles the kernels), at most
``MAX_SHAPES`` shapes, each in a memory pool of its own. A graph's output is its own memory, which
the next step of the same shape overwrites (as ``torch.cuda.make_graphed_callables``' outputs); a
forward of a shape whose last forward still waits for its backward runs eagerly, and so does a
backward whose tables changed since its forward (a prefetch between the two): it finds the batch's
ids again. Under a profiler a replayed step's kernels belong to its stage range (``DynamicEmbeddingFunction.*``),
not to its ``op:*`` ranges, which exist only at capture.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

import torch

from dynemb.kernels import kernel_path
from dynemb.ranges import emit_range
from dynemb.validation import batch_size_of

if TYPE_CHECKING:
    from dynemb.engine import EnginePlan
    from dynemb.tables import BatchedDynamicEmbeddingTables

ENV = "DYNEMB_CUDA_GRAPHS"
MAX_SHAPES = 4
FORWARD, BACKWARD = "DynamicEmbeddingFunction.forward", "DynamicEmbeddingFunction.backward"


def wanted(flag: bool | None) -> bool:
    """A module's ``cuda_graphs`` argument, or where it is None whether ``DYNEMB_CUDA_GRAPHS=1`` is set."""
    return os.environ.get(ENV, "0") == "1" if flag is None else bool(flag)


class Graph(Protocol):
    """What a step's phase is captured into: ``capture`` records ``work``'s device work and leaves it done once
    (this step's), ``replay`` does it again on the same memory."""

    def capture(self, work: Callable[[], Any]) -> Any: ...

    def replay(self) -> None: ...


class CudaGraph:
    """A CUDA graph in a memory pool (``torch.cuda.graph``)."""

    def __init__(self, pool: Any) -> None:
        self._graph = torch.cuda.CUDAGraph()
        self._pool = pool

    def capture(self, work: Callable[[], Any]) -> Any:
        with torch.cuda.graph(self._graph, pool=self._pool):
            result = work()
        self._graph.replay()  # a capture runs nothing: this step's work
        return result

    def replay(self) -> None:
        self._graph.replay()


@dataclass
class _Shape:
    """One batch shape's graphs and the memory they read and write."""

    indices: torch.Tensor
    offsets: torch.Tensor
    forward: Graph
    backward: Graph
    output: torch.Tensor | None = None
    plans: EnginePlan = field(default_factory=list)
    forward_counts: list[int] = field(default_factory=list)  # what a forward adds to the host's counts
    grad: torch.Tensor | None = None
    backward_counts: list[int] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)  # the groups' versions after the last forward
    pending: bool = False  # the last forward waits for its backward


class StepGraphs:
    """The graphs of a module's training steps, by batch shape; ``graph`` makes one ``Graph`` for a shape's two
    phases, given the shape's memory pool (default: a ``CudaGraph``; tests pass graphs that record and replay
    launches on the CPU)."""

    def __init__(self, tables: BatchedDynamicEmbeddingTables, graph: Callable[[Any], Graph] | None = None) -> None:
        self.tables = tables
        self.engine = tables.engine
        self._make = graph
        self._shapes: dict[tuple, _Shape] = {}
        self._seen: Counter[tuple] = Counter()

    @property
    def usable(self) -> bool:
        """Whether this module's steps can be graphs: one storage group on the sync-free path, Triton kernels."""
        groups = self.engine.groups
        on_cuda = self.tables.device.type == "cuda" or self._make is not None
        return on_cuda and len(groups) == 1 and groups[0][0].on_device and kernel_path(self.tables.device) == "triton"

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor | None:
        """The training forward of a batch from its shape's graph (capturing it the second time the shape comes),
        or None where the step runs eagerly."""
        key = (indices.numel(), offsets.numel(), offsets.dtype)
        shape = self._shapes.get(key)
        if shape is None:
            if not self.usable or len(self._shapes) >= MAX_SHAPES:
                return None
            self._seen[key] += 1
            if self._seen[key] < 2:
                return None
            batch_size_of(indices, offsets, self.engine.num_tables, self.tables.device)
            shape = self._shapes[key] = self._capture_forward(indices, offsets)
        elif shape.pending:
            return None
        else:
            batch_size_of(indices, offsets, self.engine.num_tables, self.tables.device)
            shape.indices.copy_(indices)
            shape.offsets.copy_(offsets)
            with emit_range(FORWARD):
                shape.forward.replay()
            self.tables._checks.folded(training=True)
            self.engine.advance(shape.forward_counts)
        shape.pending = True
        shape.versions = self._versions()
        return _GraphedStep.apply(self.tables._anchor, self, shape)

    def backward(self, shape: _Shape, grad: torch.Tensor) -> None:
        """The backward of the forward ``shape`` last ran, from its graph (capturing it the first time); eagerly
        where the tables changed since that forward."""
        shape.pending = False
        if self._versions() != shape.versions:  # the batch's ids must be found again
            with emit_range(BACKWARD):
                self.engine.apply_gradients(shape.plans, grad.contiguous())
            return
        if shape.grad is None:
            shape.grad = torch.empty_like(grad, memory_format=torch.contiguous_format).copy_(grad)
            # The plans are as fresh as the forward (the host checked): the graph steps them without finding again.
            shape.plans = [(replace(plan, version=group.version), placement) for (plan, placement), (group, _) in zip(shape.plans, self.engine.groups, strict=True)]
            before = self.engine.host_counts()
            shape.backward.capture(lambda: self._phase(BACKWARD, self.engine.apply_gradients, shape.plans, shape.grad))
            shape.backward_counts = _minus(self.engine.host_counts(), before)
            return
        shape.grad.copy_(grad)
        with emit_range(BACKWARD):
            shape.backward.replay()
        self.engine.advance(shape.backward_counts)

    def _capture_forward(self, indices: torch.Tensor, offsets: torch.Tensor) -> _Shape:
        """A new shape's memory and its forward graph, which this step runs."""
        pool = torch.cuda.graph_pool_handle() if self._make is None else None
        make = self._make or CudaGraph
        shape = _Shape(indices.clone(), offsets.clone(), make(pool), make(pool))
        before = self.engine.host_counts()

        def lookup() -> tuple[torch.Tensor, EnginePlan]:
            layout = self.tables._check(shape.indices, shape.offsets, self.engine.lookups(True))
            return self.engine.lookup(shape.indices, layout, training=True)

        shape.output, shape.plans = shape.forward.capture(lambda: self._phase(FORWARD, lookup))
        shape.forward_counts = _minus(self.engine.host_counts(), before)
        return shape

    @staticmethod
    def _phase(stage: str, work: Callable, *args: object) -> Any:
        with emit_range(stage):
            return work(*args)

    def _versions(self) -> list[int]:
        return [group.version for group, _ in self.engine.groups]


def _minus(after: list[int], before: list[int]) -> list[int]:
    return [a - b for a, b in zip(after, before, strict=True)]


class _GraphedStep(torch.autograd.Function):
    """A graphed forward's output, whose backward replays the shape's backward graph."""

    @staticmethod
    def forward(ctx, anchor: torch.Tensor, graphs: StepGraphs, shape: _Shape) -> torch.Tensor:  # noqa: ARG004 - anchor only links the graph
        ctx.graphs, ctx.shape = graphs, shape
        return shape.output.detach()

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> tuple[None, None, None]:
        ctx.graphs.backward(ctx.shape, grad_output)
        return None, None, None
