"""Plans: a validated suite expanded into the ordered list of case runs (case x repeat).

Planning is pure: it checks the suite against the inventory (a topology larger than the cluster is refused
here, before anything starts) and returns plain data that travels through Airflow's XCom as JSON.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from dlperf_core.errors import ConfigError
from dlperf_core.inventory import Inventory
from dlperf_core.maxbatch import MaxBatchSearch
from dlperf_core.suite import Suite, Topology


@dataclass(frozen=True)
class Case:
    """One configuration to measure: framework, model, precision, batch per device, topology."""

    framework: str
    model: str
    precision: str
    batch_size_per_device: int
    nodes: int
    gpus_per_node: int
    warmup_iterations: int
    measured_iterations: int
    image: str | None = None
    extra_args: tuple[str, ...] = ()
    options: tuple[tuple[str, Any], ...] = ()  # adapter options, sorted by name
    compile: bool = False  # run under torch.compile

    @property
    def topology(self) -> str:
        return f"{self.nodes}n{self.gpus_per_node}g"

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def key(self) -> str:
        """Stable identity of the configuration, e.g. ``pytorch_reference/resnet50_v1.5/fp32/b8/1n2g``."""
        key = f"{self.framework}/{self.model}/{self.precision}/b{self.batch_size_per_device}/{self.topology}"
        return key + self.options_key

    @property
    def options_key(self) -> str:
        """``+name=value`` per adapter option, then ``+compile`` for a torch.compile run: options make a
        different configuration (e.g. NGC PyTorch AMP with static vs dynamic loss scale). Stored as the
        result's ``variant``."""
        return "".join(f"+{name}={value}" for name, value in self.options) + ("+compile" if self.compile else "")

    def to_dict(self) -> dict:
        return {
            **asdict(self),
            "extra_args": list(self.extra_args),
            "options": [[name, value] for name, value in self.options],
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Case":
        return cls(
            **{
                **data,
                "extra_args": tuple(data.get("extra_args", ())),
                "options": tuple((name, value) for name, value in data.get("options", ())),
            }
        )


@dataclass(frozen=True)
class CaseRun:
    """One repeat of one case: the unit that holds the nodes' GPUs."""

    case: Case
    repeat: int  # 0-based
    index: int = 0  # position in the plan
    total: int = 1

    def to_dict(self) -> dict:
        return {"case": self.case.to_dict(), "repeat": self.repeat, "index": self.index, "total": self.total}

    @classmethod
    def from_dict(cls, data: dict) -> "CaseRun":
        return cls(Case.from_dict(data["case"]), data["repeat"], data.get("index", 0), data.get("total", 1))


@dataclass(frozen=True)
class PlanFilters:
    """Narrowing of a suite chosen at trigger time; empty tuples mean everything."""

    frameworks: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    precisions: tuple[str, ...] = ()
    topologies: tuple[str, ...] = ()
    repeats: int | None = None
    batch_sizes: tuple[int, ...] = field(default=())


def expand_cases(suite: Suite, filters: PlanFilters = PlanFilters()) -> list[tuple[Case, int]]:
    """Every case of the suite with its repeat count, in suite order, after filters."""
    from dlperf_core.frameworks import ADAPTERS  # frameworks import Case from here

    out: list[tuple[Case, int]] = []
    seen: set[str] = set()
    for bench in suite.benchmarks:
        if bench.search_only or (filters.frameworks and bench.framework not in filters.frameworks):
            continue
        adapter = ADAPTERS[bench.framework]
        if filters.models and bench.model not in filters.models:
            continue
        topologies: tuple[Topology, ...] = bench.topologies or suite.topologies
        for precision in bench.precisions or suite.precisions:
            if filters.precisions and precision not in filters.precisions:
                continue
            for compiled in suite.compile_modes_for(bench):
                for batch in suite.batch_sizes_for(bench, precision):
                    if filters.batch_sizes and batch not in filters.batch_sizes:
                        continue
                    for topo in topologies:
                        if filters.topologies and str(topo) not in filters.topologies:
                            continue
                        case = Case(
                            framework=bench.framework,
                            model=bench.model,
                            precision=precision,
                            batch_size_per_device=batch,
                            nodes=topo.nodes,
                            gpus_per_node=topo.gpus_per_node,
                            warmup_iterations=suite.warmup_for(bench, adapter.default_warmup),
                            measured_iterations=suite.measured_for(bench, adapter.default_measured),
                            image=bench.image,
                            extra_args=bench.extra_args,
                            options=tuple(sorted(bench.options.items())),
                            compile=compiled,
                        )
                        if case.key in seen:
                            continue
                        seen.add(case.key)
                        out.append((case, filters.repeats or bench.repeats or suite.repeats))
    return out + probe_cases(suite, [case for case, _ in out], filters)


def probe_cases(suite: Suite, cases: list[Case], filters: PlanFilters = PlanFilters()) -> list[tuple[Case, int]]:
    """The suite's ``fabric_probe`` at every topology of ``cases`` (in their order), with its repeats; none
    when the suite has no probe, or the trigger's framework filter leaves the probe out."""
    from dlperf_core.frameworks.allreduce_probe import AllreduceProbe, PROBE_MODEL

    probe = suite.fabric_probe
    if probe is None or (filters.frameworks and AllreduceProbe.name not in filters.frameworks):
        return []
    topologies = list(dict.fromkeys((c.nodes, c.gpus_per_node) for c in cases))
    sizes = ("--min-bytes", str(probe.min_bytes), "--max-bytes", str(probe.max_bytes))
    return [
        (
            Case(AllreduceProbe.name, PROBE_MODEL, "fp32", 1, nodes, gpus, probe.warmup, probe.iters,
                 extra_args=sizes + probe.extra_args),
            filters.repeats or probe.repeats or suite.repeats,
        )
        for nodes, gpus in topologies
    ]


def check_fits(cases: list[tuple[Case, int]], inventory: Inventory, source: str) -> None:
    """Refuse, before anything runs, cases that need more nodes or devices than the inventory has, or that
    the adapter cannot run on those nodes (a precision its CPU image does not train)."""
    from dlperf_core.frameworks import get_adapter  # frameworks import Case from here

    problems = []
    for case, _ in cases:
        if case.nodes > len(inventory.nodes):
            problems.append(
                f"{case.key}: needs {case.nodes} nodes, inventory {inventory.name!r} has {len(inventory.nodes)}"
            )
            continue
        short = [n.name for n in inventory.first(case.nodes) if n.gpus < case.gpus_per_node]
        if short:
            problems.append(f"{case.key}: needs {case.gpus_per_node} devices per node; too few on {', '.join(short)}")
            continue
        refusal = get_adapter(case.framework).refuses(case, inventory.first(case.nodes))
        if refusal:
            problems.append(refusal)
    if problems:
        raise ConfigError(source, problems)


def plan_suite(
    suite: Suite, inventory: Inventory, filters: PlanFilters = PlanFilters(), *, allow_empty: bool = False
) -> list[CaseRun]:
    """The ordered case runs of a suite: each case's repeats back to back, as the seeds ran them.

    ``allow_empty``: a plan without cases is fine (the suite's benchmarks only search max batch sizes)."""
    cases = expand_cases(suite, filters)
    if not cases:
        if allow_empty:
            return []
        raise ConfigError(suite.source, ["the filters leave no case to run"])
    check_fits(cases, inventory, suite.source)
    flat = [(case, r) for case, repeats in cases for r in range(repeats)]
    return [CaseRun(case, r, i, len(flat)) for i, (case, r) in enumerate(flat)]


@dataclass(frozen=True)
class SearchRun:
    """One max batch size search: a framework, model, precision and options on the search's topology.

    ``case`` is the configuration at the search's first batch; each probe is ``case`` at another batch."""

    case: Case
    search: MaxBatchSearch
    index: int = 0  # position among the plan's searches

    @property
    def key(self) -> str:
        """E.g. ``pytorch_reference/resnet50_v1.5/fp32/1n1g``: the case key without the batch."""
        c = self.case
        return f"{c.framework}/{c.model}/{c.precision}/{c.topology}{c.options_key}"

    def probe_case(self, batch: int) -> Case:
        return replace(self.case, batch_size_per_device=batch)

    def to_dict(self) -> dict:
        return {"case": self.case.to_dict(), "search": self.search.model_dump(), "index": self.index}

    @classmethod
    def from_dict(cls, data: dict) -> "SearchRun":
        return cls(Case.from_dict(data["case"]), MaxBatchSearch.model_validate(data["search"]), data.get("index", 0))


def plan_searches(suite: Suite, inventory: Inventory, filters: PlanFilters = PlanFilters()) -> list[SearchRun]:
    """The max batch size searches the suite asks for (``max_batch_search``), one per precision, after the
    trigger's framework, model and precision filters; refused here if a search's topology does not fit."""
    out: list[SearchRun] = []
    seen: set[str] = set()
    for bench in suite.benchmarks:
        search = bench.max_batch_search
        if search is None:
            continue
        if filters.frameworks and bench.framework not in filters.frameworks:
            continue
        if filters.models and bench.model not in filters.models:
            continue
        for precision in bench.precisions or suite.precisions:
            if filters.precisions and precision not in filters.precisions:
                continue
            case = Case(
                framework=bench.framework,
                model=bench.model,
                precision=precision,
                batch_size_per_device=search.start,
                nodes=search.topology.nodes,
                gpus_per_node=search.topology.gpus_per_node,
                warmup_iterations=search.warmup_iterations,
                measured_iterations=search.measured_iterations,
                image=bench.image,
                extra_args=bench.extra_args,
                options=tuple(sorted(bench.options.items())),
            )
            run = SearchRun(case, search, len(out))
            if run.key not in seen:
                seen.add(run.key)
                out.append(run)
    check_fits([(s.case, 1) for s in out], inventory, suite.source)
    return out
