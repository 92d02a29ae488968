"""What one DAG task hands to the next, as typed data: DAG tasks take and return these types themselves.

The benchmark DAG plans once (``plan_cases``) and every later task reads what planning decided instead of
re-reading the suite from the trigger form:

* :class:`RunSettings`: the trigger's resolved choices (suite file, runtime, inventory, time limits); the
  cleanup tasks use it.
* :class:`PlannedRun`: one case run (or one max batch search) with where and how long it may run; the
  environment capture adds ``environment_id``, node routing adds ``nodes``.
* :class:`ExecutedRun`: a planned run with the runtime's :class:`~dlperf_core.model.CaseOutcome` and what was
  launched on its nodes (:class:`~dlperf_core.launch_spec.LaunchSpec`), for ``store_result``.
* :class:`Plan`: the three together, what ``plan_cases`` returns.
* :class:`NodeReport`: one node's part of a case run under node routing, for ``collect_case``.

Each is a :class:`~dlperf_core.json_form.JsonForm`: Airflow's XCom stores the JSON form generated from the
type, and the next task reads the type back (``from_json(to_json(x)) == x``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from dlperf_core.json_form import JsonForm
from dlperf_core.launch_spec import LaunchSpec
from dlperf_core.model import CaseOutcome, CaseRun
from dlperf_core.plan import SearchRun
from dlperf_core.runtime.gang import NodeShare


@dataclass(frozen=True)
class RunSettings(JsonForm):
    """A trigger's resolved choices, decided once by planning."""

    suite: str  # the suite file
    runtime: str  # "local" | "docker"
    inventory: str  # the inventory file
    timeout_s: float
    watchdog_s: float | None


@dataclass(frozen=True)
class PlannedRun(JsonForm):
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


@dataclass(frozen=True)
class ExecutedRun(JsonForm):
    """A planned run and how it ended, before its log is parsed, with what was launched (None: nothing was, or
    the runtime could not say)."""

    planned: PlannedRun
    outcome: CaseOutcome
    launch_spec: LaunchSpec | None = None

    @property
    def run(self) -> CaseRun:
        return self.planned.run

    @property
    def label(self) -> str:
        return self.planned.label


@dataclass(frozen=True)
class Plan(JsonForm):
    """What planning decided for one DAG run: settings, case runs and max batch searches."""

    settings: RunSettings
    cases: list[PlannedRun] = field(default_factory=list)
    searches: list[PlannedRun] = field(default_factory=list)


@dataclass(frozen=True)
class ProbeOutput:
    """The environment probe's output on one node (:mod:`dlperf_core.environment`) and its image's digest."""

    output: str
    digest: str | None


@dataclass(frozen=True)
class NodeReport(JsonForm):
    """What one node's task returns under node routing: its share of the case run
    (:class:`~dlperf_core.runtime.gang.NodeShare`; None when the case does not use the node, ``skipped`` says
    why), with what ``collect_case`` needs from that node alone: node 0's log, the GPU samples, what the node
    launched, its environment probe."""

    node: str
    share: NodeShare | None = None
    skipped: str | None = None
    ran_on: str | None = None  # the node whose worker ran the task (DLPERF_NODE there)
    gpu_memory_peak_mb: float | None = None
    gpu_power: tuple[tuple[float, float], ...] = ()
    launch_spec: LaunchSpec | None = None
    log: str | None = None  # node 0's log (rank 0 only)
    log_error: str | None = None  # why node 0's log did not travel
    probe: ProbeOutput | None = None
    oversubscription: str | None = None  # the case's (CaseJob.oversubscription), as this node's task placed it
