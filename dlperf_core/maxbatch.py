"""Max batch size search: the largest batch per device that trains without running out of memory.

The seeds found it by hand ("以32为最小单位，最大batch size为128，否则会OOM": in steps of 32, the largest
batch that did not run out of memory). A benchmark asks for the same search with::

    max_batch_search: {start: 32, step: 32, limit: 512, topology: 1n1g}

and the DAG runs short trainings at ``start``, ``start + step``, ... up to ``limit`` on that topology,
one after the other, and stops at the first that fails with "out of memory" (the parsers' and runtimes'
reason, ``dlperf_core.parsing.failures.OUT_OF_MEMORY``). The search is linear, as the seeds stepped,
because one probe is a short run and a bisection would spend its first probes on the batches most likely
to fail slowly.

Everything here is pure: the search is a state machine over the probes seen so far (:func:`next_batch`,
:func:`conclude`); running a probe belongs to the DAG step (``dlperf_airflow.maxbatch_step``).

Verdicts (``status``):
  * ``found``: ``max_batch`` trained, ``max_batch + step`` ran out of memory;
  * ``limit_reached``: every batch up to ``limit`` trained (``max_batch`` is a lower bound);
  * ``none_fit``: already ``start`` ran out of memory (``max_batch`` is None);
  * ``failed``: a probe failed for another reason (it says which); nothing is concluded beyond the
    batches that trained (``max_batch`` is the largest of those, or None).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from dlperf_core.json_form import JsonForm
from dlperf_core.model import Topology
from dlperf_core.parsing.failures import OUT_OF_MEMORY

SearchStatus = Literal["found", "limit_reached", "none_fit", "failed"]


class MaxBatchSearch(BaseModel):
    """A benchmark's ``max_batch_search`` option: which batches to try, where, and for how long."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    start: int = Field(32, ge=1, description="first batch per device tried")
    step: int = Field(32, ge=1, description="increment between tries (the seeds stepped by 32)")
    limit: int = Field(1024, ge=1, description="largest batch per device tried")
    topology: Topology = Field(
        Topology(nodes=1, gpus_per_node=1), description="where the probes run, as 1n1g (the seeds searched on 1 GPU)"
    )
    warmup_iterations: int = Field(2, ge=0, description="iterations before the measured ones in each probe")
    measured_iterations: int = Field(5, ge=1, description="measured iterations in each probe")
    only: bool = Field(False, description="search only: plan no measured cases for this benchmark")

    @model_validator(mode="after")
    def _limit_reaches_start(self) -> MaxBatchSearch:
        if self.limit < self.start:
            raise ValueError(f"limit ({self.limit}) is below start ({self.start})")
        return self

    def candidates(self) -> tuple[int, ...]:
        """Every batch the search may try, in order."""
        return tuple(range(self.start, self.limit + 1, self.step))


@dataclass(frozen=True)
class Probe(JsonForm):
    """One short training at one batch size: how it ended. Its JSON form (:meth:`to_json`) is an item of the
    ``max_batch_searches.probes`` column."""

    batch: int
    status: str  # "ok" | "failed"
    reason: str | None = None
    throughput: float | None = None

    @property
    def out_of_memory(self) -> bool:
        return self.status != "ok" and OUT_OF_MEMORY in (self.reason or "").lower()


@dataclass(frozen=True)
class SearchResult(JsonForm):
    """What a finished search concluded (see the module docstring for the statuses)."""

    status: SearchStatus
    max_batch: int | None
    first_oom_batch: int | None
    reason: str | None
    probes: tuple[Probe, ...]

    @property
    def summary(self) -> str:
        """One line for logs and the CLI."""
        tried = ", ".join(
            f"{p.batch}:{'ok' if p.status == 'ok' else ('OOM' if p.out_of_memory else 'failed')}" for p in self.probes
        )
        if self.status == "found":
            head = f"max batch {self.max_batch} (batch {self.first_oom_batch} ran out of memory)"
        elif self.status == "limit_reached":
            head = f"max batch at least {self.max_batch} (the limit; nothing ran out of memory)"
        elif self.status == "none_fit":
            head = f"no batch fits: the first tried ({self.first_oom_batch}) ran out of memory"
        else:
            head = f"search failed: {self.reason}"
        return f"{head} [{tried}]"


def _check_order(search: MaxBatchSearch, probes: Sequence[Probe]) -> None:
    expected = search.candidates()[: len(probes)]
    got = tuple(p.batch for p in probes)
    if got != expected:
        raise ValueError(f"probes {got} are not the search's first candidates {expected}")


def next_batch(search: MaxBatchSearch, probes: Sequence[Probe]) -> int | None:
    """The batch to try next after ``probes`` (in the order tried), or None when the search is over."""
    _check_order(search, probes)
    if probes and probes[-1].status != "ok":
        return None  # out of memory ends the search; any other failure stops it
    candidates = search.candidates()
    return candidates[len(probes)] if len(probes) < len(candidates) else None


def conclude(search: MaxBatchSearch, probes: Sequence[Probe]) -> SearchResult:
    """The result of a finished search (every probe :func:`next_batch` asked for has run)."""
    if next_batch(search, probes) is not None:
        raise ValueError(f"the search is not finished: batch {next_batch(search, probes)} is still to be tried")
    trained = [p.batch for p in probes if p.status == "ok"]
    best = max(trained) if trained else None
    last = probes[-1]
    if last.status == "ok":
        return SearchResult("limit_reached", best, None, None, tuple(probes))
    if last.out_of_memory:
        status: SearchStatus = "found" if best is not None else "none_fit"
        return SearchResult(status, best, last.batch, None, tuple(probes))
    return SearchResult("failed", best, None, f"batch {last.batch}: {last.reason}", tuple(probes))


def run_search(search: MaxBatchSearch, probe: Callable[[int], Probe]) -> SearchResult:
    """Drive a search with ``probe(batch) -> Probe`` (the only I/O, supplied by the caller)."""
    probes: list[Probe] = []
    while (batch := next_batch(search, probes)) is not None:
        probes.append(probe(batch))
    return conclude(search, probes)
