"""Plans: a validated suite expanded into the ordered list of case runs (case x repeat).

Planning is pure: it checks the suite against the framework adapters (a framework, model, precision, option
or compile mode an adapter does not have; :func:`check_suite`) and against the inventory (a topology larger
than the cluster; :func:`check_fits`), refusing here, before anything starts, and returns plain data that
travels through Airflow's XCom as JSON. The suite file itself only checks its own shape (``dlperf_core.plan.suite``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from dlperf_core.cluster.inventory import Inventory, Node
from dlperf_core.errors import ConfigError
from dlperf_core.frameworks import ADAPTERS, get_adapter
from dlperf_core.frameworks.allreduce_probe import FABRIC_MODEL, AllreduceFabric
from dlperf_core.measure.maxbatch import MaxBatchSearch
from dlperf_core.model import ARGS_MARK, Case, CaseRun, Topology, pinned_node, series_base, unpinned
from dlperf_core.plan.suite import Suite


@dataclass(frozen=True)
class PlanFilters:
    """Narrowing of a suite chosen at trigger time; empty tuples mean everything."""

    frameworks: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    precisions: tuple[str, ...] = ()
    topologies: tuple[str, ...] = ()
    repeats: int | None = None
    case_keys: tuple[str, ...] = ()  # only these cases (full keys, ``Case.key``); ``dlperf reproduce --run``


def check_suite(suite: Suite) -> Suite:
    """Refuse a suite whose benchmarks ask the framework adapters for what they do not have: an unknown
    framework or model, a precision, option or torch.compile mode the adapter lacks, a precision with no batch
    size (none in the suite, no seed default). Returns the suite, so ``check_suite(load_suite(path))`` reads."""
    problems: list[str] = []
    for i, bench in enumerate(suite.benchmarks):
        where = f"benchmarks[{i}]"
        adapter = ADAPTERS.get(bench.framework)
        if adapter is None:
            problems.append(
                f"{where}.framework: unknown framework {bench.framework!r}; known: {', '.join(sorted(ADAPTERS))}"
            )
            continue
        if bench.model not in adapter.models:
            problems.append(
                f"{where}.model: framework {bench.framework!r} has no model {bench.model!r}; "
                f"known: {', '.join(sorted(adapter.models))}"
            )
        bad = [p for p in bench.precisions or () if p not in adapter.precisions]
        if bad:
            problems.append(f"{where}.precisions: {bench.framework!r} does not support {', '.join(bad)}")
        if bench.options:
            problems.extend(f"{where}.options: {problem}" for problem in adapter.check_options(bench.options))
        if bench.compile and True in bench.compile and not adapter.supports_compile:
            able = sorted(name for name, a in ADAPTERS.items() if a.supports_compile)
            problems.append(
                f"{where}.compile: {bench.framework!r} has no torch.compile mode (frameworks that do: "
                f"{', '.join(able)})"
            )
        if not bench.search_only:
            for precision in bench.precisions or suite.precisions:
                if not suite.batch_sizes_for(bench, precision, adapter.default_batch.get(precision)):
                    problems.append(f"{where}.batch_size_per_device: no batch size for precision {precision!r}")
    if problems:
        raise ConfigError(suite.source, problems)
    return suite


def expand_cases(
    suite: Suite, filters: PlanFilters = PlanFilters(), inventory: Inventory | None = None
) -> list[tuple[Case, int]]:
    """Every case of the suite with its repeat count, in suite order, after filters (refused by
    :func:`check_suite` first).

    A per-node sweep (a benchmark's ``per_node: true``) is one case per node of ``inventory`` at each of its
    topologies, in the inventory's order, each pinned to its node (``Case.node``, its key ``...+node=<name>+args=...``).
    Without an inventory it is one unpinned case per topology (what the sweep measures, on no node yet: the trigger
    form's choices, ``dlperf reproduce``'s comparison), which a pinned key of ``filters.case_keys`` selects."""
    check_suite(suite)
    out: list[tuple[Case, int]] = []
    seen: set[str] = set()
    sweeps = {unpinned(key) for key in filters.case_keys if pinned_node(key) is not None}
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
            for compiled in suite.compile_modes_for(bench, adapter.supports_compile):
                for batch in suite.batch_sizes_for(bench, precision, adapter.default_batch.get(precision)):
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
                            env=tuple(sorted(suite.env_for(bench).items())),
                        )
                        for placed in _placed(case, bench.per_node, inventory):
                            wanted = placed.key in filters.case_keys or (
                                bench.per_node and inventory is None and placed.key in sweeps
                            )
                            if placed.key in seen or (filters.case_keys and not wanted):
                                continue
                            seen.add(placed.key)
                            out.append((placed, filters.repeats or bench.repeats or suite.repeats))
    return out + fabric_cases(suite, [case for case, _ in out], filters)


def _placed(case: Case, per_node: bool, inventory: Inventory | None) -> list[Case]:
    """``case`` on the nodes it runs on: once per node of ``inventory`` (pinned) for a per-node sweep, else as it is."""
    if not per_node or inventory is None:
        return [case]
    return [replace(case, node=name) for name in inventory.names]


def nodes_used(cases: Iterable[Case], inventory: Inventory) -> tuple[Node, ...]:
    """The nodes of ``inventory`` that any of ``cases`` runs on (:meth:`Inventory.case_nodes`), in the inventory's
    order: what preflight checks. A pinned node the inventory does not have is left out (:func:`check_fits` refuses
    its case)."""
    used: set[str] = set()
    for case in cases:
        if case.node is not None:
            used.add(case.node)
        else:
            used.update(n.name for n in inventory.first(case.nodes))
    return tuple(n for n in inventory.nodes if n.name in used)


def fabric_cases(suite: Suite, cases: list[Case], filters: PlanFilters = PlanFilters()) -> list[tuple[Case, int]]:
    """The suite's ``fabric_benchmark`` at every topology of ``cases`` (in their order), with its repeats; none
    when the suite has no fabric benchmark, or the trigger's framework filter leaves it out."""

    fabric = suite.fabric_benchmark
    if fabric is None or (filters.frameworks and AllreduceFabric.name not in filters.frameworks):
        return []
    topologies = list(dict.fromkeys((c.nodes, c.gpus_per_node) for c in cases))
    if filters.case_keys:  # the fabric cases of the topologies the suite has, of which only the keys asked for
        wanted = [t for t in _suite_topologies(suite) if not filters.topologies or str(t) in filters.topologies]
        topologies = list(dict.fromkeys((t.nodes, t.gpus_per_node) for t in wanted))
    sizes = ("--min-bytes", str(fabric.min_bytes), "--max-bytes", str(fabric.max_bytes))
    planned = [
        (
            Case(
                AllreduceFabric.name,
                FABRIC_MODEL,
                "fp32",
                1,
                nodes,
                gpus,
                fabric.warmup,
                fabric.iters,
                extra_args=sizes + fabric.extra_args,
                env=tuple(sorted(suite.env.items())),
            ),
            filters.repeats or fabric.repeats or suite.repeats,
        )
        for nodes, gpus in topologies
    ]
    return [(case, n) for case, n in planned if not filters.case_keys or case.key in filters.case_keys]


def _suite_topologies(suite: Suite) -> list[Topology]:
    """Every topology a benchmark of ``suite`` runs at, in suite order."""
    return [t for bench in suite.benchmarks if not bench.search_only for t in (bench.topologies or suite.topologies)]


def configuration_differences(stored: Mapping[str, object], now: Mapping[str, object]) -> list[str]:
    """How configuration ``now`` (``Case.configuration``) differs from ``stored``, one ``field: stored X, now Y``
    per field that differs (in the order of ``stored``, then fields only ``now`` has)."""
    names = list(stored) + [name for name in now if name not in stored]
    return [
        f"{name}: stored {stored.get(name)!r}, now {now.get(name)!r}"
        for name in names
        if stored.get(name) != now.get(name)
    ]


def missing_case_keys(suite: Suite, filters: PlanFilters) -> list[str]:
    """One problem per key of ``filters.case_keys`` that ``suite`` (under the other filters) does not plan,
    naming the suite's cases of the same fields and options (``series_base``) whose configuration differs
    (another fingerprint: other extra arguments, another window), empty when every key is planned."""
    if not filters.case_keys:
        return []
    cases = [case for case, _ in expand_cases(suite, replace(filters, case_keys=()))]
    keys = {case.key for case in cases}
    sweeps = {case.key for case in cases if _sweeps(suite, case)}
    problems = []
    for key in filters.case_keys:
        if key in keys or (pinned_node(key) is not None and unpinned(key) in sweeps):
            continue  # a per-node sweep's case: whether its node is in the inventory, planning says (check_fits)
        near = [case.key for case in cases if series_base(case.key) == series_base(key)]
        hint = (
            f"; the suite has {', '.join(near)} (the same fields and options, another configuration: extra "
            "arguments or window changed)"
            if near
            else ""
        )
        problems.append(f"case_keys: {key} is not a case of suite {suite.name!r} with this trigger's choices{hint}")
    return problems


def _sweeps(suite: Suite, case: Case) -> bool:
    """Whether ``case`` (unpinned, from :func:`expand_cases` without an inventory) is what a per-node sweep of
    ``suite`` measures: a benchmark with ``per_node: true`` of its framework and model has its topology."""
    return any(
        bench.per_node
        and (bench.framework, bench.model) == (case.framework, case.model)
        and any(
            (t.nodes, t.gpus_per_node) == (case.nodes, case.gpus_per_node) for t in bench.topologies or suite.topologies
        )
        for bench in suite.benchmarks
    )


def check_fits(cases: list[tuple[Case, int]], inventory: Inventory, source: str) -> None:
    """Refuse, before anything runs, cases that need more nodes or devices than the inventory has, that are
    pinned to a node it does not have, or that the adapter cannot run on those nodes (a precision its CPU image
    does not train)."""
    problems = []
    for case, _ in cases:
        if case.nodes > len(inventory.nodes):
            problems.append(
                f"{case.key}: needs {case.nodes} nodes, inventory {inventory.name!r} has {len(inventory.nodes)}"
            )
            continue
        if case.node is not None and case.node not in inventory.names:
            problems.append(
                f"{case.key}: runs on node {case.node}, which inventory {inventory.name!r} does not have "
                f"(it has {', '.join(inventory.names)})"
            )
            continue
        nodes = inventory.case_nodes(case.nodes, case.node)
        short = [n.name for n in nodes if n.gpu_count < case.gpus_per_node]
        if short:
            problems.append(f"{case.key}: needs {case.gpus_per_node} devices per node; too few on {', '.join(short)}")
            continue
        refusal = get_adapter(case.framework).refuses(case, nodes)
        if refusal:
            problems.append(refusal)
    if problems:
        raise ConfigError(source, problems)


def plan_suite(
    suite: Suite, inventory: Inventory, filters: PlanFilters = PlanFilters(), *, allow_empty: bool = False
) -> list[CaseRun]:
    """The ordered case runs of a suite: each case's repeats back to back, as the seeds ran them.

    ``allow_empty``: a plan without cases is fine (the suite's benchmarks only search max batch sizes)."""
    cases = expand_cases(suite, filters, inventory)
    if not cases:
        if allow_empty:
            return []
        elsewhere = [
            (key, node) for key in filters.case_keys if (node := pinned_node(key)) not in (None, *inventory.names)
        ]
        raise ConfigError(
            suite.source,
            [
                f"case_keys: {key} runs on node {node}, which inventory {inventory.name!r} does not have (it has "
                f"{', '.join(inventory.names)})"
                for key, node in elsewhere
            ]
            or ["the filters leave no case to run"],
        )
    check_fits(cases, inventory, suite.source)
    flat = [(case, r) for case, repeats in cases for r in range(repeats)]
    return [CaseRun(case, r, i, len(flat)) for i, (case, r) in enumerate(flat)]


@dataclass(frozen=True)
class SearchRun:
    """One max batch size search: a framework, model, precision and options on the search's topology.

    ``case`` is the configuration at the search's first batch; each trial is ``case`` at another batch."""

    case: Case
    search: MaxBatchSearch
    index: int = 0  # position among the plan's searches

    @property
    def key(self) -> str:
        """E.g. ``pytorch_reference/resnet50_v1.5/fp32/1n1g+args=0c1d2e3f``: the case key without the batch, its
        fingerprint too (every trial of the search has this key, whatever its batch)."""
        c = self.case
        fingerprint = c.fingerprint_without("batch_size_per_device")
        return f"{c.framework}/{c.model}/{c.precision}/{c.topology}{c.readable_options}+{ARGS_MARK}{fingerprint}"

    def trial_case(self, batch: int) -> Case:
        """The case of the search's trial at ``batch``."""
        return replace(self.case, batch_size_per_device=batch)


def plan_searches(suite: Suite, inventory: Inventory, filters: PlanFilters = PlanFilters()) -> list[SearchRun]:
    """The max batch size searches the suite asks for (``max_batch_search``), one per precision, after the
    trigger's framework, model and precision filters (none when the trigger names case keys: a search is not a
    case); refused here if a search's topology does not fit."""
    check_suite(suite)
    if filters.case_keys:
        return []
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
                env=tuple(sorted(suite.env_for(bench).items())),
            )
            run = SearchRun(case, search, len(out))
            if run.key not in seen:
                seen.add(run.key)
                out.append(run)
    check_fits([(s.case, 1) for s in out], inventory, suite.source)
    return out
