"""What a trigger asks for, resolved and planned: from the Trigger form (or a nightly run's empty one) to the
:class:`~dlperf_core.run.handoff.Plan` every later task of the DAG reads.

:func:`resolve_trigger` fills what the trigger leaves open from the deployment's defaults
(:mod:`dlperf_core.plan.defaults`), loads the suite and the inventory, refuses anything wrong (a filter value the
suite lacks, a Docker socket on TCP without TLS, ...) and applies the form's overrides; :func:`plan_trigger`
expands it into case runs and max batch size searches, refusing what node routing cannot run. Both raise
:class:`~dlperf_core.errors.ConfigError` before any work starts. The trigger's form (``params``, JSON from
Airflow) is read here, through its type (:class:`~dlperf_core.plan.trigger_form.TriggerForm`), and nowhere else.

Airflow accepts any key in a trigger's ``conf`` (a key the DAG has no Param for becomes a Param without a schema)
and checks each declared Param's value on its own, with JSON schema errors as its words: so a misspelt key
(``topology`` for ``topologies``) and a suite or inventory file that is not there are refused here, in words,
with what is known (:func:`check_keys`, :func:`named_file`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dlperf_core.cluster.inventory import Inventory, Node, check_docker_access, load_inventory
from dlperf_core.errors import ConfigError
from dlperf_core.home import dlperf_home, resolve
from dlperf_core.model import CaseRun
from dlperf_core.plan.cases import PlanFilters, nodes_used, plan_searches, plan_suite
from dlperf_core.plan.defaults import SLURM_RUNTIME, SUITE_RUNTIME, DeploymentDefaults, fill_from_defaults
from dlperf_core.plan.form_choices import FORM_SOURCE
from dlperf_core.plan.form_overrides import apply_form
from dlperf_core.plan.suite import Suite, load_suite
from dlperf_core.plan.trigger_form import TRIGGER_KEYS as TRIGGER_KEYS
from dlperf_core.plan.trigger_form import TriggerForm, closest
from dlperf_core.plan.trigger_form import check_keys as check_keys
from dlperf_core.plan.trigger_form import unknown_keys as unknown_keys
from dlperf_core.run.handoff import Plan, PlannedRun, RunSettings

log = logging.getLogger("dlperf")

LOCAL_INVENTORY = "inventories/local.yaml"
DOCKER_INVENTORY = "inventories/docker-local.yaml"
"""The inventory of a runtime when neither the trigger, the deployment's defaults nor the suite names one."""

YAML_SUFFIXES = (".yaml", ".yml")

SEARCH_INDEX_BASE = 9000
"""Case-run index of the probes of search i is SEARCH_INDEX_BASE + i (their container names and rendezvous
ports then differ from the cases'); the probe number is their repeat."""


@dataclass(frozen=True)
class ResolvedTrigger:
    """A trigger after validation: its settings, the suite with the form's overrides applied, the inventory,
    the filters, and which of suite/runtime/inventory came from the deployment's defaults."""

    settings: RunSettings
    suite: Suite
    inventory: Inventory
    filters: PlanFilters
    from_defaults: tuple[str, ...] = ()


def unknown_file(what: str, plural: str, name: str, known: Sequence[str], home: Path) -> str:
    """Why the trigger's ``what`` (``suite``, ``inventory``) ``name`` is refused when no YAML file is there: the
    name, the known file closest to it (by path, file name or stem), the known files (``plural``: the folder under
    the dlperf home ``home`` they are in) and what else may be named."""
    aliases: dict[str, str] = {}
    for path in known:
        for alias in (Path(path).stem, Path(path).name, path):
            aliases.setdefault(alias, path)
    close = closest(name, aliases)
    hint = f" (did you mean {close!r}?)" if close else ""
    return (
        f"{what}: unknown {what} {name!r}{hint}; known {plural}: {', '.join(known) or 'none'} "
        f"(or a YAML file's path, relative to the dlperf home {home} or absolute)"
    )


def known_files(folder: str, home: Path | None = None) -> list[str]:
    """The YAML files in ``folder`` of the dlperf home (``suites``, ``inventories``), relative to the home, sorted."""
    home = home or dlperf_home()
    try:
        found = [p for p in (home / folder).iterdir() if p.suffix in YAML_SUFFIXES and p.is_file()]
    except OSError:
        return []
    return sorted(str(p.relative_to(home)) for p in found)


def named_file(what: str, plural: str, name: str) -> Path:
    """The file a trigger's ``what`` names (relative to the dlperf home, or absolute); refused in words
    (:func:`unknown_file`) when it is not a YAML file that is there."""
    path = resolve(name)
    if path.suffix in YAML_SUFFIXES and path.is_file():
        return path
    home = dlperf_home()
    raise ConfigError(FORM_SOURCE, [unknown_file(what, plural, name, known_files(plural, home), home)])


def resolve_trigger(params: Mapping[str, Any] | TriggerForm, defaults: DeploymentDefaults) -> ResolvedTrigger:
    """Validate the trigger form against the suite; refuse anything wrong before work starts: first a key the form
    does not have (:func:`check_keys`) or a value of the wrong kind (:meth:`TriggerForm.from_params`), then a suite
    or inventory that is not there (:func:`named_file`), then values the suite lacks. What the trigger leaves open
    (suite, runtime ``default``, inventory) comes from ``defaults``; a runtime other than the suite's, without an
    inventory named, gets that runtime's usual inventory. ``params`` may be the form already read."""
    form = params if isinstance(params, TriggerForm) else TriggerForm.from_params(params)
    chosen = fill_from_defaults(form.suite, form.runtime, form.inventory, defaults)
    suite = load_suite(named_file("suite", "suites", chosen.suite))
    runtime = suite.runtime if chosen.runtime == SUITE_RUNTIME else chosen.runtime  # fill_from_defaults checked it
    inv_path = suite.inventory_path() if runtime == suite.runtime else None  # the suite's own, if it names one
    if chosen.inventory:
        inv_path = named_file("inventory", "inventories", chosen.inventory)
    elif inv_path is None:
        inv_path = resolve(DOCKER_INVENTORY if runtime == "docker" else LOCAL_INVENTORY)
    inventory = load_inventory(inv_path)
    if runtime == SLURM_RUNTIME and inventory.slurm is None:
        raise ConfigError(FORM_SOURCE, [f"runtime slurm: the inventory {inv_path} has no slurm: block"])
    if inventory.runtime is not None and inventory.runtime != runtime:  # a Slurm inventory's slots: its runtime only
        log.info(
            "inventory %s is run by %s: its cases run on the %s runtime", inv_path, inventory.runtime, inventory.runtime
        )
        runtime = inventory.runtime
    if runtime == "docker":  # a Docker socket on TCP without TLS is root on the node: refused unless insecure
        check_docker_access(inventory, str(inv_path))
    # a filter value the chosen suite lacks is refused, not silently dropped; then batch and compile overrides
    suite = apply_form(suite, form)
    settings = RunSettings(
        str(Path(suite.source)), runtime, str(Path(inv_path)), suite.timeout_s, suite.watchdog_s, health=suite.health
    )
    return ResolvedTrigger(settings, suite, inventory, form.filters(), chosen.from_defaults)


def check_routed(inventory: Inventory, routing: Inventory, what: str = "inventory") -> None:
    """Refuse a trigger whose nodes have no task of their own in the DAG (not in the deployment's inventory
    ``routing``, the one node routing renders a task per node of)."""
    known = {n.name: n for n in routing.nodes}
    problems = [
        f"node {n.name}: not in the deployment's inventory {routing.name} (node routing), so no task runs on it"
        for n in inventory.nodes
        if n.name not in known
    ]
    problems += [
        f"node {n.name}: queue {n.queue!r} differs from the deployment's {known[n.name].queue!r}"
        for n in inventory.nodes
        if n.name in known and known[n.name].queue != n.queue
    ]
    if problems:
        raise ConfigError(what, problems)


def check_map_length(max_case_runs: int, planned: dict[str, int]) -> None:
    """Refuse a plan with more of anything (``{"case runs": 1500}``) than the deployment maps from one list
    (``max_case_runs``: Airflow's ``[core] max_map_length``), naming the count, the limit and the ways out."""
    problems = [
        f"this trigger plans {count:,} {what}; this deployment maps at most {max_case_runs:,} tasks from one list "
        "(Airflow's [core] max_map_length, AIRFLOW__CORE__MAX_MAP_LENGTH): choose fewer with the filters or "
        "repeats, split the suite, or raise that limit on every Airflow component"
        for what, count in planned.items()
        if count > max_case_runs
    ]
    if problems:
        raise ConfigError("repeats", problems)


def unchecked_by_preflight(nodes: Iterable[Node], inventory: str) -> str | None:
    """What planning says when preflight cannot check some of ``nodes`` (the nodes a plan on the docker runtime uses,
    of the inventory named ``inventory``): preflight reaches a node over SSH only, so a node without ``ssh`` is not
    checked before its cases start (``dlperf_airflow.steps.preflight_step`` skips it). None when every node has
    ``ssh``."""
    unchecked = [n.name for n in nodes if n.ssh is None]
    if not unchecked:
        return None
    one = len(unchecked) == 1
    return (
        f"preflight will not check node{'' if one else 's'} {', '.join(unchecked)} of inventory {inventory}: "
        f"{'it has' if one else 'they have'} no ssh block, and preflight reaches a node over SSH only, so Docker, "
        "the GPUs and their driver, InfiniBand, the data paths, free disk and the images are not checked before "
        "the cases start there (a sick node fails its cases instead). Give each node ssh: {user, key_file, host_key} "
        "(docs/cluster-guide.md)"
    )


def plan_trigger(resolved: ResolvedTrigger, routing: Inventory | None = None, max_case_runs: int | None = None) -> Plan:
    """The plan of a resolved trigger: one planned run per case run (``cases``) and one per max batch size
    search (``searches``: its case at the first batch, so preflight treats it like a case). Under node routing
    (``routing``: the deployment's inventory) the trigger's nodes must be the deployment's, and a search,
    which runs from the central worker, cannot use a node reached only through its own Docker socket. More case
    runs (or searches) than ``max_case_runs`` (the deployment's ``[core] max_map_length``) are refused here, before
    any runs: Airflow would refuse to map them after planning."""
    suite, inventory, settings = resolved.suite, resolved.inventory, resolved.settings
    searches = plan_searches(suite, inventory, resolved.filters)  # refused here too if one does not fit
    runs = plan_suite(suite, inventory, resolved.filters, allow_empty=bool(searches))
    if inventory.slurm is not None and (pinned := sorted({r.case.node for r in runs if r.case.node})):
        raise ConfigError(
            "per_node",
            [
                f"a per-node sweep pins its cases to nodes ({', '.join(pinned)}), but the nodes of a Slurm inventory are "
                "slots of a job whose hosts Slurm chooses: leave per_node out, or run the sweep on an inventory of hosts"
            ],
        )
    if max_case_runs is not None:
        check_map_length(max_case_runs, {"case runs": len(runs), "max batch searches": len(searches)})
    if routing is not None:
        check_routed(inventory, routing, settings.inventory)
        local = sorted(
            {n.name for s in searches for n in inventory.first(s.case.nodes) if n.docker_url.startswith("unix:")}
        )
        if searches and settings.runtime == "docker" and local:
            raise ConfigError(
                "max_batch_search",
                [
                    f"nodes {', '.join(local)} are reached through their own Docker socket (per-node workers), but a "
                    "max batch search runs from the central worker: give those nodes a tcp:// docker_url (with TLS), "
                    "or leave the search out of this trigger"
                ],
            )
    if settings.runtime == "docker" and (runs or searches):  # the local runtime's nodes are this machine
        used = nodes_used([*(r.case for r in runs), *(s.case for s in searches)], inventory)
        unchecked = unchecked_by_preflight(used, inventory.name)
        if unchecked:
            log.warning("%s", unchecked)
    settings = replace(  # no task reads the file again
        settings, inventory_name=inventory.name, nodes=inventory.nodes, slurm=inventory.slurm
    )
    return Plan(
        settings,
        cases=[PlannedRun.of(r, settings, inventory) for r in runs],
        searches=[
            PlannedRun.of(CaseRun(s.case, 0, SEARCH_INDEX_BASE + s.index), settings, inventory, s) for s in searches
        ],
    )
