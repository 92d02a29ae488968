"""Max batch size search: the largest batch per device that trains without running out of memory.

The seeds found it by hand ("以32为最小单位，最大batch size为128，否则会OOM": in steps of 32, the largest
batch that did not run out of memory). A benchmark asks for the same search with::

    max_batch_search: {start: 32, step: 32, limit: 512, topology: 1n1g}

and the DAG runs short trainings at ``start``, ``start + step``, ... up to ``limit`` on that topology,
one after the other, and stops at the first that fails with "out of memory" (the parsers' and runtimes'
reason, ``dlperf_core.parsing.failures.OUT_OF_MEMORY``). The search is linear, as the seeds stepped,
because one trial is a short run and a bisection would spend its first trials on the batches most likely
to fail slowly.

Everything here is pure: the search is a state machine over the trials seen so far (:func:`next_batch`,
:func:`conclude`); running a trial belongs to the DAG step (``dlperf_airflow.maxbatch_step``). A trial is one
short training at one batch size (:class:`Trial`); the results database keeps a search's trials in its
``max_batch_searches.probes`` column (the column's name is older than the word).

Verdicts (``status``):
  * ``found``: ``max_batch`` trained, ``max_batch + step`` ran out of memory;
  * ``limit_reached``: every batch up to ``limit`` trained (``max_batch`` is a lower bound);
  * ``none_fit``: already ``start`` ran out of memory (``max_batch`` is None);
  * ``failed``: a trial failed for another reason (it says which); nothing is concluded beyond the
    batches that trained (``max_batch`` is the largest of those, or None).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal, Self

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
        Topology(nodes=1, gpus_per_node=1), description="where the trials run, as 1n1g (the seeds searched on 1 GPU)"
    )
    warmup_iterations: int = Field(2, ge=0, description="iterations before the measured ones in each trial")
    measured_iterations: int = Field(5, ge=1, description="measured iterations in each trial")
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
class Trial(JsonForm):
    """One trial of a search: a short training at one batch size, and how it ended. Its JSON form
    (:meth:`to_json`) is an item of the ``max_batch_searches.probes`` column (unchanged by the rename)."""

    batch: int
    status: str  # "ok" | "failed"
    reason: str | None = None
    throughput: float | None = None

    @property
    def out_of_memory(self) -> bool:
        return self.status != "ok" and OUT_OF_MEMORY in (self.reason or "").lower()


@dataclass(frozen=True)
class SearchResult(JsonForm):
    """What a finished search concluded (see the module docstring for the statuses). Version 2 renamed the
    field ``probes`` to ``trials`` (:meth:`deserialize` reads a version-1 form)."""

    __version__: ClassVar[int] = 2

    status: SearchStatus
    max_batch: int | None
    first_oom_batch: int | None
    reason: str | None
    trials: tuple[Trial, ...]

    @classmethod
    def deserialize(cls, data: object, version: int) -> Self:
        if version < 2 and isinstance(data, dict):
            data = {("trials" if k == "probes" else k): v for k, v in data.items()}
        return super().deserialize(data, version)

    @property
    def summary(self) -> str:
        """One line for logs and the CLI."""
        tried = ", ".join(
            f"{p.batch}:{'ok' if p.status == 'ok' else ('OOM' if p.out_of_memory else 'failed')}" for p in self.trials
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


def _check_order(search: MaxBatchSearch, trials: Sequence[Trial]) -> None:
    expected = search.candidates()[: len(trials)]
    got = tuple(t.batch for t in trials)
    if got != expected:
        raise ValueError(f"trials {got} are not the search's first candidates {expected}")


def next_batch(search: MaxBatchSearch, trials: Sequence[Trial]) -> int | None:
    """The batch to try next after ``trials`` (in the order tried), or None when the search is over."""
    _check_order(search, trials)
    if trials and trials[-1].status != "ok":
        return None  # out of memory ends the search; any other failure stops it
    candidates = search.candidates()
    return candidates[len(trials)] if len(trials) < len(candidates) else None


def conclude(search: MaxBatchSearch, trials: Sequence[Trial]) -> SearchResult:
    """The result of a finished search (every trial :func:`next_batch` asked for has run)."""
    if next_batch(search, trials) is not None:
        raise ValueError(f"the search is not finished: batch {next_batch(search, trials)} is still to be tried")
    trained = [t.batch for t in trials if t.status == "ok"]
    best = max(trained) if trained else None
    last = trials[-1]
    if last.status == "ok":
        return SearchResult("limit_reached", best, None, None, tuple(trials))
    if last.out_of_memory:
        status: SearchStatus = "found" if best is not None else "none_fit"
        return SearchResult(status, best, last.batch, None, tuple(trials))
    return SearchResult("failed", best, None, f"batch {last.batch}: {last.reason}", tuple(trials))


def run_search(search: MaxBatchSearch, trial: Callable[[int], Trial]) -> SearchResult:
    """Drive a search with ``trial(batch) -> Trial`` (the only I/O, supplied by the caller)."""
    trials: list[Trial] = []
    while (batch := next_batch(search, trials)) is not None:
        trials.append(trial(batch))
    return conclude(search, trials)
