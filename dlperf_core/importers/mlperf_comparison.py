"""A configuration's figure beside the field's record: the imported MLPerf systems (``dlperf import`` of a
submission folder) with the same accelerator and the nearest accelerator count, per accelerator.

* The same accelerator: equal after ``dlperf_core.cluster.accelerators.normalise`` (vendor, model, form factor, memory).
* The nearest count: the systems whose accelerator count is closest to the configuration's (every system at
  that distance, so 8 GPUs finds the 8-GPU systems, and 1 GPU the smallest systems there are).
* Per accelerator: throughput (samples/s) over the accelerator count, dlperf's figure and the system's median
  over its runs (dlperf's rule over the steady spans), beside its official score (minutes to train).
* A CPU-only configuration (no accelerator) is compared per node with the CPU-only systems of the nearest node
  count: nothing is divided by an accelerator count of zero.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from statistics import median
from typing import TYPE_CHECKING, Literal

from dlperf_core.cluster.accelerators import Accelerator, normalise

if TYPE_CHECKING:
    from dlperf_core.storage import ResultStore


MLPERF_BENCHMARKS: dict[str, str] = {"resnet50_v1.5": "resnet", "resnet50": "resnet"}
"""dlperf's models that an MLPerf Training benchmark trains (ResNet-50 v1.5 is MLPerf's ``resnet``)."""


@dataclass(frozen=True)
class FieldSystem:
    """An imported MLPerf system's figures for one benchmark."""

    submitter: str  # as its description names it
    submitter_folder: str
    system_folder: str
    benchmark: str
    accelerator_model: str
    accelerator_memory: str  # the description's accelerator_memory_capacity ("80 GB"), "" where absent
    accelerators: int
    nodes: int
    throughput: float | None  # samples/s: the median over its runs with a throughput
    score_minutes: float | None  # the official score

    @property
    def accelerator(self) -> Accelerator | None:
        return normalise(self.accelerator_model, self.accelerator_memory) if self.accelerators else None


@dataclass(frozen=True)
class Neighbour:
    """One system beside the configuration, with its throughput per unit (None where it has no throughput)."""

    system: FieldSystem
    per_unit: float | None


@dataclass(frozen=True)
class Beside:
    """The configuration's throughput per unit and the nearest systems of the same accelerator (or CPU-only
    systems); ``note`` says why there is none."""

    unit: Literal["accelerator", "node"]
    accelerator: Accelerator | None
    count: int  # the configuration's accelerators (unit accelerator) or nodes (unit node)
    per_unit: float
    neighbours: tuple[Neighbour, ...]
    note: str | None


def beside_the_record(
    *,
    accelerator_name: str | None,
    accelerators: int,
    nodes: int,
    throughput: float,
    systems: list[FieldSystem],
    benchmark: str = "resnet",
) -> Beside:
    """The MLPerf systems of ``benchmark`` beside a configuration of ``accelerators`` x ``accelerator_name`` on
    ``nodes`` nodes that measured ``throughput`` samples/s (see the module docstring)."""
    ours = normalise(accelerator_name) if accelerators > 0 else None
    same_benchmark = [s for s in systems if s.benchmark == benchmark]
    if ours is None:
        count = max(nodes, 1)
        pool = [s for s in same_benchmark if s.accelerator is None and s.nodes > 0]
        neighbours = _nearest(pool, count, lambda s: s.nodes)
        note = None if neighbours else f"no CPU-only MLPerf system of {benchmark} imported"
        return Beside("node", None, count, throughput / count, neighbours, note)
    pool = [s for s in same_benchmark if s.accelerator == ours]
    neighbours = _nearest(pool, accelerators, lambda s: s.accelerators)
    note = None if neighbours else f"no MLPerf system of {benchmark} with {ours} imported"
    return Beside("accelerator", ours, accelerators, throughput / accelerators, neighbours, note)


def _nearest(pool: list[FieldSystem], count: int, size: Callable[[FieldSystem], int]) -> tuple[Neighbour, ...]:
    """The systems of ``pool`` whose ``size`` is nearest ``count``, each with its throughput per that size."""
    sized = [(s, size(s)) for s in pool if size(s) > 0]
    if not sized:
        return ()
    best = min(abs(n - count) for _, n in sized)
    chosen = sorted(
        ((s, n) for s, n in sized if abs(n - count) == best), key=lambda sn: (sn[0].submitter, sn[0].system_folder)
    )
    return tuple(Neighbour(s, s.throughput / n if s.throughput is not None else None) for s, n in chosen)


def field_systems(store: ResultStore, ruleset: str | None = None) -> list[FieldSystem]:
    """The imported MLPerf systems (of one round if given) with their official scores and median throughputs."""
    throughputs = store.mlperf_throughputs(ruleset)
    systems = []
    for row in store.mlperf_score_rows(ruleset):
        figures = throughputs.get((row.submitter_folder, row.system_folder, row.benchmark), [])
        systems.append(
            FieldSystem(
                submitter=row.submitter,
                submitter_folder=row.submitter_folder,
                system_folder=row.system_folder,
                benchmark=row.benchmark,
                accelerator_model=row.accelerator_model,
                accelerator_memory=row.accelerator_memory,
                accelerators=row.accelerators,
                nodes=row.nodes,
                throughput=median(figures) if figures else None,
                score_minutes=row.score_minutes,
            )
        )
    return systems
