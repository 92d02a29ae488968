"""Whether a benchmark run passed: the status ``finish_run`` closes the run with (and fails the DAG run on).

A run passes when it stored something (a case run, a max batch size search or a fabric benchmark) and none of it
failed: a case run that is not ``ok``, a search or a fabric benchmark that is ``failed``. A search that found no batch
that fits (``none_fit``) or stopped at its limit (``limit_reached``) is an answer, not a failure.
A run that stored nothing failed too: planning failed, or every case run crashed before it could be stored.

Pure: :func:`status_of_outcomes` works on plain outcomes; :func:`outcomes_of_run` reads them from a results store.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal, Self

from dlperf_core.json_form import JsonForm

if TYPE_CHECKING:
    from dlperf_core.storage import ResultStore

OutcomeKind = Literal["case_run", "max_batch_search", "fabric_benchmark"]

NOTHING_STORED = "no case run was stored: planning failed or every case run crashed (see the task logs)"


@dataclass(frozen=True)
class Outcome:
    """One stored outcome of a run: a case run repeat, a max batch size search or a fabric benchmark repeat."""

    kind: OutcomeKind
    key: str  # case_key, search_key or (fabric benchmark) probe_key
    status: str
    reason: str | None = None
    repeat: int | None = None  # case runs and fabric benchmarks

    @property
    def failed(self) -> bool:
        """A case run counts only when ``ok``; a search or a fabric benchmark fails only when ``failed``."""
        return self.status != "ok" if self.kind == "case_run" else self.status == "failed"

    def describe(self) -> str:
        """Why it failed, as the run's failure message lists it."""
        if self.kind == "case_run":
            return f"{self.key} r{self.repeat}: {self.reason}"
        if self.kind == "max_batch_search":
            return f"max batch search {self.key}: {self.reason}"
        return f"fabric benchmark {self.key} r{self.repeat}: {self.reason}"


def case_run(case_key: str, repeat: int, status: str, reason: str | None = None) -> Outcome:
    return Outcome("case_run", case_key, status, reason, repeat)


def max_batch_search(search_key: str, status: str, reason: str | None = None) -> Outcome:
    return Outcome("max_batch_search", search_key, status, reason)


def fabric_benchmark(probe_key: str, repeat: int, status: str, reason: str | None = None) -> Outcome:
    return Outcome("fabric_benchmark", probe_key, status, reason, repeat)


@dataclass(frozen=True)
class RunStatus:
    """The status of one run: its status, the counts ``finish_run`` returns and, if it failed, why."""

    outcomes: tuple[Outcome, ...]

    def _of(self, kind: OutcomeKind) -> list[Outcome]:
        return [o for o in self.outcomes if o.kind == kind]

    def _failed(self, kind: OutcomeKind) -> list[Outcome]:
        return [o for o in self._of(kind) if o.failed]

    @property
    def stored(self) -> int:
        return len(self.outcomes)

    @property
    def passed(self) -> bool:
        return bool(self.outcomes) and not any(o.failed for o in self.outcomes)

    @property
    def status(self) -> Literal["success", "failed"]:
        """What ``benchmark_runs.status`` is set to."""
        return "success" if self.passed else "failed"

    @property
    def reasons(self) -> list[str]:
        """One line per failed outcome: case runs, then searches, then fabric benchmarks, each in stored order."""
        kinds: tuple[OutcomeKind, ...] = ("case_run", "max_batch_search", "fabric_benchmark")
        return [o.describe() for kind in kinds for o in self._failed(kind)]

    @property
    def message(self) -> str | None:
        """Why the run failed (what ``finish_run`` raises with); None when it passed."""
        if not self.outcomes:
            return NOTHING_STORED
        if self.passed:
            return None
        cases, searches, fabric = (self._of(k) for k in ("case_run", "max_batch_search", "fabric_benchmark"))
        failed = [self._failed(k) for k in ("case_run", "max_batch_search", "fabric_benchmark")]
        return (
            f"{len(failed[0])} of {len(cases)} case runs, {len(failed[1])} of {len(searches)} max batch "
            f"searches and {len(failed[2])} of {len(fabric)} fabric benchmarks failed: {'; '.join(self.reasons)}"
        )

    def summary(self) -> RunCounts:
        """What ``finish_run`` returns: how many case runs, failed ones, searches and fabric benchmarks were stored."""
        return RunCounts(
            results=len(self._of("case_run")),
            failed=len(self._failed("case_run")),
            max_batch_searches=len(self._of("max_batch_search")),
            fabric_benchmarks=len(self._of("fabric_benchmark")),
        )


@dataclass(frozen=True)
class RunCounts(JsonForm):
    """What a finished run stored: case runs (and how many failed), max batch searches, fabric benchmarks.
    Version 2 renamed ``fabric_probes`` to ``fabric_benchmarks`` (:meth:`deserialize` reads a version-1 form)."""

    __version__: ClassVar[int] = 2

    results: int
    failed: int
    max_batch_searches: int
    fabric_benchmarks: int

    @classmethod
    def deserialize(cls, data: object, version: int) -> Self:
        if version < 2 and isinstance(data, dict):
            data = {("fabric_benchmarks" if k == "fabric_probes" else k): v for k, v in data.items()}
        return super().deserialize(data, version)


def status_of_outcomes(outcomes: Iterable[Outcome]) -> RunStatus:
    """The status of a run from everything it stored (module docstring)."""
    return RunStatus(tuple(outcomes))


def outcomes_of_run(store: ResultStore, dag_id: str, run_id: str) -> list[Outcome]:
    """Everything run ``(dag_id, run_id)`` stored: its case run repeats, searches and fabric benchmark repeats
    (the store's
    typed rows)."""
    return (
        [case_run(r.case_key, r.repeat, r.status, r.reason) for r in store.result_rows(run_id=run_id, dag_id=dag_id)]
        + [max_batch_search(r.search_key, r.status, r.reason) for r in store.search_rows(run_id=run_id, dag_id=dag_id)]
        + [
            fabric_benchmark(r.probe_key, r.repeat, r.status, r.reason)
            for r in store.fabric_rows(run_id=run_id, dag_id=dag_id)
        ]
    )


def status_of_run(store: ResultStore, dag_id: str, run_id: str) -> RunStatus:
    """:func:`status_of_outcomes` on what the run stored (the results database must be reachable)."""
    return status_of_outcomes(outcomes_of_run(store, dag_id, run_id))


UNFINISHED_TASK_STATES = ("failed", "upstream_failed", "removed", None)
"""Airflow task states in which a case run's task handed nothing over (None: it never ran)."""


def unstored(planned: Iterable[tuple[str, int]], outcomes: Iterable[Outcome]) -> list[int]:
    """Positions in ``planned`` (case key, repeat of each planned case run, in the plan's order: the map index of
    its tasks) of the case runs that stored nothing among ``outcomes`` (case runs and fabric benchmarks)."""
    stored = {(o.key, o.repeat) for o in outcomes if o.kind in ("case_run", "fabric_benchmark")}
    return [i for i, key in enumerate(planned) if key not in stored]


def lost_reason(task_states: dict[str, str | None]) -> str:
    """Why a planned case run stored nothing, from the states of its tasks in this DAG run (task id: state), e.g.
    "lost: run_case failed, store_result upstream_failed, before a result was stored (...)". A case-running
    task ends ``failed`` without handing over an outcome only when it was killed, lost its worker (Airflow fails a
    task whose heartbeat stops) or passed its execution timeout: dlperf's own failures are outcomes."""
    ended = [f"{task} {state or 'never ran'}" for task, state in task_states.items() if state in UNFINISHED_TASK_STATES]
    if not task_states:
        said = "none of its tasks ran (an upstream task failed or the run was stopped)"
    else:
        said = ", ".join(ended) if ended else "its tasks ended without storing it"
    return (
        f"lost: {said}, before a result was stored (the task was killed, lost its worker to a crash or restart, "
        "or passed its execution timeout: its log and Airflow's audit log say which)"
    )
