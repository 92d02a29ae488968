"""What one DAG task hands to the next, as typed data: DAG tasks take and return these types themselves.

The benchmark DAG plans once (``plan_cases``) and every later task reads what planning decided instead of
re-reading the suite from the trigger form:

* :class:`RunSettings`: the trigger's resolved choices (suite file, runtime, the inventory and its nodes, time
  limits); the cleanup tasks use it.
* :class:`PlannedRun`: one case run (or one max batch search) with every fact its tasks need, resolved once by
  planning: its nodes (address, engine, GPUs, mounts, queue, in rank order), its image, its runtime, its time
  limits and who prints its figure. No later task reads the inventory file or works out an image again; the
  environment capture adds ``environment_id``.
* :class:`ExecutedRun`: a planned run with the runtime's :class:`~dlperf_core.model.CaseOutcome` and what was
  launched on its nodes (:class:`~dlperf_core.run.launch_spec.LaunchSpec`), for ``store_result``.
* :class:`Plan`: the three together, what ``plan_cases`` returns.
* :class:`NodeReport`: one node's part of a case run under node routing, for ``collect_case``.

Each is a :class:`~dlperf_core.json_form.JsonForm`: Airflow's XCom stores the JSON form generated from the
type, and the next task reads the type back (``from_json(to_json(x)) == x``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar, Self

from dlperf_core.cluster.clock_events import ClockSample
from dlperf_core.cluster.environment import Environment
from dlperf_core.cluster.gpu_health import GpuHealth, HealthPolicy
from dlperf_core.cluster.inventory import Inventory, Node, SlurmSettings, load_inventory
from dlperf_core.frameworks import get_adapter
from dlperf_core.json_form import JsonForm
from dlperf_core.measure.origin import FigureOrigin
from dlperf_core.model import CaseOutcome, CaseRun, with_cluster_env
from dlperf_core.plan.cases import SearchRun
from dlperf_core.run.launch_spec import LaunchSpec
from dlperf_core.run.runtime.gang import NodeShare


@dataclass(frozen=True)
class RunSettings(JsonForm):
    """A trigger's resolved choices, decided once by planning."""

    __version__: ClassVar[int] = 2  # 2: the inventory's nodes (1: the file alone, read again by each task)

    suite: str  # the suite file
    runtime: str  # "local" | "docker" | "slurm" (an inventory with a slurm: block)
    inventory: str  # the inventory file: read once, by planning (kept to name it, never read again)
    timeout_s: float
    watchdog_s: float | None
    inventory_name: str = ""
    nodes: tuple[Node, ...] = ()  # every node of the inventory (cleanup visits each)
    health: HealthPolicy = (
        "refuse"  # the suite's: what a GPU health check that fails does (dlperf_core.cluster.gpu_health)
    )
    slurm: SlurmSettings | None = None  # the inventory's slurm: block (runtime slurm)

    @property
    def cluster(self) -> Inventory:
        """The inventory as planning read it, without reading the file again."""
        return Inventory(name=self.inventory_name or "inventory", nodes=self.nodes, slurm=self.slurm)

    @classmethod
    def deserialize(cls, data: object, version: int) -> Self:
        return super().deserialize(_settings_v2(data) if version < 2 else data, version)


@dataclass(frozen=True)
class PlannedRun(JsonForm):
    """One case run to execute (``search`` set: the first probe of a max batch search)."""

    __version__: ClassVar[int] = 2  # 2: resolved nodes, image, figure origin (1: node names under routing only)

    run: CaseRun
    runtime: str
    inventory: str  # the inventory file it was planned on (the launch spec names it; never read again)
    timeout_s: float
    watchdog_s: float | None
    search: SearchRun | None = None
    environment_id: int | None = None  # set by capture_environment (node routing: by collect_case)
    # the nodes it runs on, in rank order, as the inventory described them; each one's ``env`` resolved for the case
    # (the suite's, the benchmark's, the node's own over them: dlperf_core.model.cluster_env)
    nodes: tuple[Node, ...] = ()
    suite: str | None = None  # the suite file it was planned from (the launch spec keeps it)
    inventory_name: str = ""
    image: str | None = None  # the docker runtime's image on these nodes (None: the local runtime)
    figure_origin: FigureOrigin | None = None  # who prints the figure its log is read for (its adapter says)
    health: HealthPolicy = "refuse"  # the suite's: refuse a case whose GPUs fail a health check, or run it flagged
    slurm: SlurmSettings | None = None  # the inventory's slurm: block (runtime slurm: how its job is submitted)

    @classmethod
    def of(
        cls, run: CaseRun, settings: RunSettings, inventory: Inventory, search: SearchRun | None = None
    ) -> PlannedRun:
        """``run`` with every fact its tasks need, resolved from ``inventory`` (the one planning read)."""
        planned = cls(run, settings.runtime, settings.inventory, settings.timeout_s, settings.watchdog_s, search)
        return replace(planned, suite=settings.suite, health=settings.health, slurm=inventory.slurm).resolved_on(
            inventory
        )

    def resolved_on(self, inventory: Inventory) -> PlannedRun:
        """This run with what planning resolves on ``inventory``: its nodes, its image (docker), its figure's
        origin (its adapter's answers for those nodes)."""
        case = self.run.case
        nodes = with_cluster_env(case, inventory.case_nodes(case.nodes, case.node))  # env: the cluster's settings
        adapter = get_adapter(case.framework)
        return replace(
            self,
            nodes=nodes,
            inventory_name=inventory.name,
            image=adapter.image(case, nodes) if self.runtime == "docker" else None,
            figure_origin=adapter.figure_origin(case, nodes),
        )

    @property
    def node_names(self) -> list[str]:
        return [n.name for n in self.nodes]

    @property
    def cluster(self) -> Inventory:
        """The case's nodes as an inventory (what a runtime is made from), without reading the file again."""
        return Inventory(name=self.inventory_name or "inventory", nodes=self.nodes, slurm=self.slurm)

    @classmethod
    def deserialize(cls, data: object, version: int) -> Self:
        return super().deserialize(_planned_v2(data) if version < 2 else data, version)

    @property
    def label(self) -> str:
        """How the task instance is named in the UI (``map_index_template``) and in progress lines."""
        if self.search is not None:
            return f"max batch {self.search.key}"
        return f"{self.run.case.key} r{self.run.repeat}"

    def with_environment(self, environment_id: int | None) -> PlannedRun:
        return replace(self, environment_id=environment_id)


# Forms of version 1 (before planning resolved the nodes) are read by resolving them now, from the inventory file
# they name: XCom written by an older dlperf during an upgrade still runs.


def _settings_v2(data: object) -> object:
    if not isinstance(data, dict):  # not a form: refused by name when it is read
        return data
    inventory = load_inventory(data["inventory"])
    return {**data, "inventory_name": inventory.name, "nodes": [n.model_dump(mode="json") for n in inventory.nodes]}


def _planned_v2(data: object) -> object:
    if not isinstance(data, dict):  # not a form: refused by name when it is read
        return data
    old = PlannedRun.from_json({**data, "nodes": []})  # routing wrote node names there: resolved again below
    return old.resolved_on(load_inventory(old.inventory)).to_json()


def _plan_v2(data: object) -> object:
    if not isinstance(data, dict):
        return data
    return {
        **data,
        "settings": _settings_v2(data.get("settings")),
        **{key: _upgrade_planned(data.get(key) or []) for key in ("cases", "searches")},
    }


def _upgrade_planned(items: Sequence[object]) -> list[object]:
    return [_planned_v2(item) for item in items]


@dataclass(frozen=True)
class ExecutedRun(JsonForm):
    """A planned run and how it ended, before its log is parsed, with what was launched (None: nothing was, or
    the runtime could not say)."""

    __version__: ClassVar[int] = 2  # as PlannedRun's

    planned: PlannedRun
    outcome: CaseOutcome
    launch_spec: LaunchSpec | None = None
    # the environment the case's own job probed, where the runtime probes inside the job (slurm: its nodes are
    # Slurm's choice, known once the job ran); store_result stores it and links the row to it, in place of
    # capture_environment's (planned.environment_id). None: the environment is capture_environment's
    environment: Environment | None = None

    @classmethod
    def deserialize(cls, data: object, version: int) -> Self:
        if version < 2 and isinstance(data, dict):
            data = {**data, "planned": _planned_v2(data.get("planned"))}
        return super().deserialize(data, version)

    @property
    def run(self) -> CaseRun:
        return self.planned.run

    @property
    def label(self) -> str:
        return self.planned.label


@dataclass(frozen=True)
class Plan(JsonForm):
    """What planning decided for one DAG run: settings, case runs and max batch searches."""

    __version__: ClassVar[int] = 2  # as PlannedRun's

    settings: RunSettings
    cases: list[PlannedRun] = field(default_factory=list)
    searches: list[PlannedRun] = field(default_factory=list)

    @classmethod
    def deserialize(cls, data: object, version: int) -> Self:
        return super().deserialize(_plan_v2(data) if version < 2 else data, version)


@dataclass(frozen=True)
class ProbeOutput:
    """The environment probe's output on one node (:mod:`dlperf_core.cluster.environment`) and its image's digest."""

    output: str
    digest: str | None


@dataclass(frozen=True)
class NodeReport(JsonForm):
    """What one node's task returns under node routing: its share of the case run
    (:class:`~dlperf_core.run.runtime.gang.NodeShare`; None when the case does not use the node, ``skipped`` says
    why), with what ``collect_case`` needs from that node alone: node 0's log, the GPU samples, what the node
    launched, its environment probe, the health of its GPUs before the case."""

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
    disk_full: str | None = None  # this node's log disk could not take one more block (the case's real cause)
    gpu_health: GpuHealth | None = None  # this node's GPUs before the case (dlperf_core.cluster.gpu_health)
    gpu_clocks: tuple[ClockSample, ...] = ()  # this node's GPU clocks per sample
