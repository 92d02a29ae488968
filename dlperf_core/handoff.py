"""What one DAG task hands to the next, as typed data with its JSON form (Airflow's XCom carries the dicts).

The benchmark DAG plans once (``plan_cases``) and every later task reads what planning decided instead of
re-reading the suite from the trigger form:

* :class:`RunSettings`: the trigger's resolved choices (suite file, runtime, inventory, time limits); the
  cleanup tasks use it.
* :class:`PlannedRun`: one case run (or one max batch search) with where and how long it may run; the
  environment capture adds ``environment_id``, node routing adds ``nodes``.
* :class:`ExecutedRun`: a planned run with the runtime's :class:`~dlperf_core.model.CaseOutcome` and what was
  launched on its nodes (:class:`~dlperf_core.launch_spec.LaunchSpec`), for ``store_result``.
* :class:`Plan`: the three together, what ``plan_cases`` returns.

The JSON form of a planned run is flat (``run``, ``runtime``, ``inventory``, ...) so that the task instance
pages of the Airflow UI show it plainly; ``from_dict(to_dict(x)) == x`` for each.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from dlperf_core.launch_spec import LaunchSpec
from dlperf_core.model import CaseOutcome, CaseRun
from dlperf_core.plan import SearchRun


@dataclass(frozen=True)
class RunSettings:
    """A trigger's resolved choices, decided once by planning."""

    suite: str  # the suite file
    runtime: str  # "local" | "docker"
    inventory: str  # the inventory file
    timeout_s: float
    watchdog_s: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "runtime": self.runtime,
            "inventory": self.inventory,
            "timeout_s": self.timeout_s,
            "watchdog_s": self.watchdog_s,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSettings:
        return cls(data["suite"], data["runtime"], data["inventory"], data["timeout_s"], data.get("watchdog_s"))


@dataclass(frozen=True)
class PlannedRun:
    """One case run to execute (``search`` set: the first probe of a max batch search)."""

    run: CaseRun
    runtime: str
    inventory: str
    timeout_s: float
    watchdog_s: float | None
    search: SearchRun | None = None
    environment_id: int | None = None  # set by capture_environment (node routing: by collect_case)
    nodes: tuple[str, ...] = ()  # node routing: the nodes it runs on, in rank order
    suite: str | None = None  # the suite file it was planned from (the launch spec keeps it)

    @classmethod
    def of(cls, run: CaseRun, settings: RunSettings, search: SearchRun | None = None) -> PlannedRun:
        return cls(
            run,
            settings.runtime,
            settings.inventory,
            settings.timeout_s,
            settings.watchdog_s,
            search,
            suite=settings.suite,
        )

    @property
    def label(self) -> str:
        """How the task instance is named in the UI (``map_index_template``) and in progress lines."""
        if self.search is not None:
            return f"max batch {self.search.key}"
        return f"{self.run.case.key} r{self.run.repeat}"

    def with_environment(self, environment_id: int | None) -> PlannedRun:
        return replace(self, environment_id=environment_id)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "run": self.run.to_dict(),
            "runtime": self.runtime,
            "inventory": self.inventory,
            "timeout_s": self.timeout_s,
            "watchdog_s": self.watchdog_s,
        }
        if self.search is not None:
            data["search"] = self.search.to_dict()
        if self.environment_id is not None:
            data["environment_id"] = self.environment_id
        if self.nodes:
            data["nodes"] = list(self.nodes)
        if self.suite is not None:
            data["suite"] = self.suite
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PlannedRun:
        return cls(
            run=CaseRun.from_dict(data["run"]),
            runtime=data["runtime"],
            inventory=data["inventory"],
            timeout_s=data["timeout_s"],
            watchdog_s=data.get("watchdog_s"),
            search=SearchRun.from_dict(data["search"]) if data.get("search") else None,
            environment_id=data.get("environment_id"),
            nodes=tuple(data.get("nodes") or ()),
            suite=data.get("suite"),
        )


@dataclass(frozen=True)
class ExecutedRun:
    """A planned run and how it ended, before its log is parsed, with what was launched (None: nothing was, or
    the runtime could not say)."""

    planned: PlannedRun
    outcome: CaseOutcome
    launch_spec: LaunchSpec | None = None

    @property
    def run(self) -> CaseRun:
        return self.planned.run

    def to_dict(self) -> dict[str, Any]:
        data = {**self.planned.to_dict(), "outcome": self.outcome.to_dict()}
        if self.launch_spec is not None:
            data["launch_spec"] = self.launch_spec.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExecutedRun:
        spec = data.get("launch_spec")
        return cls(
            PlannedRun.from_dict(data),
            CaseOutcome.from_dict(data["outcome"]),
            LaunchSpec.from_dict(spec) if spec else None,
        )


@dataclass(frozen=True)
class Plan:
    """What planning decided for one DAG run: settings, case runs and max batch searches."""

    settings: RunSettings
    cases: list[PlannedRun] = field(default_factory=list)
    searches: list[PlannedRun] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "settings": self.settings.to_dict(),
            "cases": [p.to_dict() for p in self.cases],
            "searches": [p.to_dict() for p in self.searches],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        return cls(
            RunSettings.from_dict(data["settings"]),
            [PlannedRun.from_dict(p) for p in data.get("cases", ())],
            [PlannedRun.from_dict(p) for p in data.get("searches", ())],
        )
