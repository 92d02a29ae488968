"""The choices the trigger form offers: what a suite and its inventory allow, computed once at DAG parse time,
and their cache.

Pure functions over validated objects (:func:`choices_for`, :func:`merge_choices`, :func:`registry_choices`)
plus one edge, :func:`discover_choices`, which reads the suite files of a dlperf home and never raises: a missing
or broken suite falls back to what the framework adapter registry allows, so a bad file can never break DAG
parsing. Its result is cached in the home's state folder (:func:`choices_cache_path`), keyed by the suite and
inventory files' names, sizes and mtimes: Airflow's dag-processor parses the DAG file in a process of its own
each time, so only a file outlives a parse, and a parse where nothing changed reads that file, no suite.

The form offers the union over the suites found (each checked against its own inventory), so a GPU suite's
topologies can be picked as well as the smoke suite's; :func:`dlperf_core.plan.form_overrides.check_trigger` then
refuses, at planning, a value that the chosen suite does not have. The form's fields themselves are
:class:`dlperf_core.plan.trigger_form.TriggerForm`'s.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, get_args

from dlperf_core.cluster.inventory import Inventory, load_inventory
from dlperf_core.errors import ConfigError
from dlperf_core.frameworks import ADAPTERS
from dlperf_core.home import STATE_DIRNAME
from dlperf_core.json_form import JsonForm
from dlperf_core.model import Topology
from dlperf_core.plan.cases import check_fits, expand_cases
from dlperf_core.plan.defaults import DEFAULT_SUITE
from dlperf_core.plan.suite import Precision, Suite, load_suite

log = logging.getLogger("dlperf")

FORM_SOURCE = "trigger form"
"""How errors about trigger values name their source."""

STANDARD_TOPOLOGIES = ("1n1g", "1n2g", "1n4g", "1n8g", "2n8g", "4n8g")
"""The seeds' topologies, offered when no suite can be read."""

MAX_REPEATS = 100
"""Largest repeats a trigger may ask for (the suite schema's own bound)."""

MAX_BATCH_PER_DEVICE = 1024
"""Largest batch-size override per device, unless a suite already uses a larger one."""


@dataclass(frozen=True)
class BatchBounds:
    """Bounds of the batch-size override and the batch sizes the suites use now."""

    minimum: int
    maximum: int
    in_suites: tuple[int, ...]


@dataclass(frozen=True)
class FormChoices(JsonForm):
    """Everything the trigger form may offer; ``sources`` says where it came from."""

    suites: tuple[str, ...]
    inventories: tuple[str, ...]
    frameworks: tuple[str, ...]
    models: tuple[str, ...]
    precisions: tuple[str, ...]
    topologies: tuple[str, ...]
    batch: BatchBounds
    max_repeats: int
    sources: tuple[str, ...]
    topology_suites: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (topology, the suites that have it)

    def topology_display(self, topology: str) -> str:
        """The form's label of a topology, with the suites (file stems) that have it:
        ``1n2g: 1 node x 2 devices (2) - in smoke, seeds-cpu``."""
        suites = [Path(s).stem for s in dict(self.topology_suites).get(topology, ())]
        return topology_label(topology) + (f" - in {', '.join(suites)}" if suites else "")


def topology_key(name: str) -> tuple[int, int, int]:
    """Order topologies by total devices, then nodes: 1n1g, 1n2g, 2n1g, 1n4g, ..."""
    topo = Topology.model_validate(name)
    return (topo.total_gpus, topo.nodes, topo.gpus_per_node)


def fitting_topologies(suite: Suite, inventory: Inventory) -> set[str]:
    """The topologies of the suite's cases that planning would accept on ``inventory``: each case goes
    through :func:`dlperf_core.plan.cases.check_fits` (enough nodes, enough devices on each, an adapter that runs
    it there), and a topology is kept when any of its cases passes."""
    fitting: set[str] = set()
    for case, _ in expand_cases(suite):
        if case.topology in fitting:
            continue
        try:
            check_fits([(case, 1)], inventory, FORM_SOURCE)
        except ConfigError:
            continue
        fitting.add(case.topology)
    return fitting


def topology_label(name: str) -> str:
    """Human label of a topology: ``2n8g`` -> ``2n8g: 2 nodes x 8 devices (16)``."""
    topo = Topology.model_validate(name)
    nodes = "node" if topo.nodes == 1 else "nodes"
    devices = "device" if topo.gpus_per_node == 1 else "devices"
    return f"{topo}: {topo.nodes} {nodes} x {topo.gpus_per_node} {devices} ({topo.total_gpus})"


def _bounds(batches: Iterable[int]) -> BatchBounds:
    used = tuple(sorted(set(batches)))
    return BatchBounds(minimum=1, maximum=max((MAX_BATCH_PER_DEVICE, *used)), in_suites=used)


def choices_for(suite: Suite, inventory: Inventory, suite_name: str | None = None) -> FormChoices:
    """What one suite offers on its inventory: its frameworks, models, precisions, batch sizes, and
    the topologies the inventory can hold (:func:`fitting_topologies`: one larger than the inventory is left
    out)."""
    frameworks: set[str] = set()
    models: set[str] = set()
    precisions: set[str] = set()
    batches: set[int] = set()
    for bench in suite.benchmarks:
        frameworks.add(bench.framework)
        models.add(bench.model)
        for precision in bench.precisions or suite.precisions:
            precisions.add(precision)
            seed = ADAPTERS[bench.framework].default_batch.get(precision) if bench.framework in ADAPTERS else None
            batches.update(suite.batch_sizes_for(bench, precision, seed))  # with the adapters' seed defaults
    choices = FormChoices(
        suites=(suite_name or suite.source,),
        inventories=(),
        frameworks=tuple(sorted(frameworks)),
        models=tuple(sorted(models)),
        precisions=_ordered_precisions(precisions),
        topologies=tuple(sorted(fitting_topologies(suite, inventory), key=topology_key)),
        batch=_bounds(batches),
        max_repeats=MAX_REPEATS,
        sources=(f"{suite_name or suite.source} on inventory {inventory.name}",),
    )
    return replace(choices, topology_suites=tuple((t, choices.suites) for t in choices.topologies))


def _ordered_precisions(found: Iterable[str]) -> tuple[str, ...]:
    order = list(get_args(Precision))
    return tuple(sorted(set(found), key=lambda p: order.index(p) if p in order else len(order)))


def registry_choices() -> FormChoices:
    """The fallback when no suite can be read: everything the framework adapters support."""
    from dlperf_core.frameworks import ADAPTERS

    models = {m for adapter in ADAPTERS.values() for m in adapter.models}
    precisions = {p for adapter in ADAPTERS.values() for p in adapter.precisions}
    return FormChoices(
        suites=(),
        inventories=(),
        frameworks=tuple(sorted(ADAPTERS)),
        models=tuple(sorted(models)),
        precisions=_ordered_precisions(precisions),
        topologies=STANDARD_TOPOLOGIES,
        batch=_bounds(()),
        max_repeats=MAX_REPEATS,
        sources=("framework adapter registry",),
    )


def merge_choices(parts: Iterable[FormChoices]) -> FormChoices:
    """The union of several suites' choices (first suite first); the registry's if ``parts`` is empty."""
    parts = list(parts)
    if not parts:
        return registry_choices()

    def union(attr: str) -> list[str]:
        out: list[str] = []
        for part in parts:
            out.extend(v for v in getattr(part, attr) if v not in out)
        return out

    topologies = tuple(sorted(union("topologies"), key=topology_key))
    return FormChoices(
        suites=tuple(union("suites")),
        inventories=tuple(union("inventories")),
        frameworks=tuple(sorted(union("frameworks"))),
        models=tuple(sorted(union("models"))),
        precisions=_ordered_precisions(union("precisions")),
        topologies=topologies,
        batch=_bounds(b for part in parts for b in part.batch.in_suites),
        max_repeats=min(part.max_repeats for part in parts),
        sources=tuple(union("sources")),
        topology_suites=tuple(
            (t, tuple(s for part in parts for s in dict(part.topology_suites).get(t, ()))) for t in topologies
        ),
    )


CACHE_FORMAT = 1
"""The layout of the choices' cache file; a file of another layout is ignored (and rewritten)."""


def choices_cache_path(home: Path) -> Path:
    """Where :func:`discover_choices` keeps its cache: ``<home>/.dlperf/cache/form-choices.json`` (the home's
    state folder, :mod:`dlperf_core.home`; the compose deployment's volume ``dlperf-state``)."""
    return home / STATE_DIRNAME / "cache" / "form-choices.json"


_Stat = tuple[str, int, int]  # (name or path, size, mtime_ns); size and mtime -1 for a file that is not there


def _stat(path: Path) -> _Stat:
    try:
        st = path.stat()
    except OSError:
        return (str(path), -1, -1)
    return (str(path), st.st_size, st.st_mtime_ns)


def _listing(folder: Path, suffix: str) -> list[tuple[Path, _Stat]]:
    """The ``*<suffix>`` entries of ``folder`` by path, each with its name, size and mtime, from one directory
    scan (stat only, nothing read; one that cannot be stat'ed, a dangling link, as size -1). A missing folder
    lists as empty; one that cannot be listed raises OSError."""
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return []
    found = []
    for entry in entries:
        if entry.name.endswith(suffix):
            try:
                st = entry.stat()
                found.append((Path(entry.path), (entry.name, st.st_size, st.st_mtime_ns)))
            except OSError:
                found.append((Path(entry.path), (entry.name, -1, -1)))
    return sorted(found)


def _code_fingerprint() -> list[_Stat]:
    """dlperf_core's modules the choices are computed with (adapters, suite and plan rules, the inventory), by name,
    size and mtime: an upgrade of dlperf recomputes the choices even where no suite changed."""
    core = Path(__file__).resolve().parents[1]
    folders = (core, core / "plan", core / "cluster", core / "frameworks")
    try:
        return [st for folder in folders for _, st in _listing(folder, ".py")]
    except OSError:
        return []


def _read_cache(cache: Path, key: dict[str, Any]) -> FormChoices | None:
    """The cached choices when ``cache`` holds them for ``key`` and the files they were read from are unchanged
    (their warnings logged again); else None. A missing, unreadable or broken file reads as None."""
    try:
        data = json.loads(cache.read_text())
        if data.get("key") != key or [list(_stat(Path(p))) for p, _, _ in data["read"]] != data["read"]:
            return None
        choices = FormChoices.from_json(data["choices"])  # a wrong shape raises ValidationError
        warnings = [str(w) for w in data["warnings"]]
    except FileNotFoundError:
        return None
    except Exception as exc:  # noqa: BLE001 - a broken cache is recomputed, never a broken parse
        log.debug("trigger form: ignoring the cache %s (%s: %s)", cache, type(exc).__name__, exc)
        return None
    for warning in warnings:
        log.warning("%s", warning)
    return choices


def _write_cache(cache: Path, key: dict[str, Any], read: list[Path], warnings: list[str], choices: FormChoices) -> None:
    """Store the choices for ``key`` (atomically: a parse beside this one reads the old file or the new one);
    a folder that cannot be written (a read-only deployment) only means no cache."""
    data = {
        "key": key,
        "read": [list(_stat(p)) for p in read],
        "warnings": warnings,
        "choices": choices.to_json(),
    }
    tmp = cache.with_name(f".{cache.name}.{os.getpid()}.tmp")
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(cache)
    except OSError as exc:
        log.debug("trigger form: no cache at %s (%s)", cache, exc)
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def discover_choices(
    home: Path,
    default_suite: str = DEFAULT_SUITE,
    local_inventory: str = "inventories/local.yaml",
    cache: Path | None = None,
) -> FormChoices:
    """Choices from every ``suites/*.yaml`` under ``home`` (the default suite first), each against its own
    inventory (or ``local_inventory`` when it names none). Unreadable files are skipped with a log line;
    with none readable, :func:`registry_choices`. Never raises.

    Cached in ``cache`` (default :func:`choices_cache_path`): a call that finds the same ``suites/*.yaml`` and
    ``inventories/*.yaml`` (names, sizes, mtimes: one directory scan each, no file read), the same inventory
    files the suites named and the same dlperf code reads that one JSON file and no suite. Anything else (a
    suite or inventory changed, added or removed; a missing, broken or foreign cache file) recomputes the
    choices and rewrites the file; where it cannot be written, the choices are just computed every time."""
    try:
        suite_listing = _listing(home / "suites", ".yaml")
        inventory_listing = _listing(home / "inventories", ".yaml")
    except OSError as exc:
        log.warning("trigger form: cannot list suites under %s (%s); using the adapter registry", home, exc)
        return registry_choices()
    inventories = tuple(str(p.relative_to(home)) for p, _ in inventory_listing)
    cache = cache or choices_cache_path(home)
    key: dict[str, Any] = {
        "format": CACHE_FORMAT,
        "home": str(home),
        "default_suite": default_suite,
        "local_inventory": local_inventory,
        "suites": [list(st) for _, st in suite_listing],
        "inventories": [list(st) for _, st in inventory_listing],
        "code": [list(st) for st in _code_fingerprint()],
    }
    if (cached := _read_cache(cache, key)) is not None:
        return cached
    suite_files = [p for p, _ in suite_listing]
    default = (home / default_suite).resolve()
    suite_files.sort(key=lambda p: p.resolve() != default)
    parts = []
    read: list[Path] = []  # inventories the suites named (maybe outside inventories/): a change recomputes
    warnings: list[str] = []
    for path in suite_files:
        name = str(path.relative_to(home))
        try:
            suite = load_suite(path)
            inv_path = suite.inventory_path() or home / local_inventory
            read.append(inv_path)
            parts.append(choices_for(suite, load_inventory(inv_path), name))
        except (ConfigError, OSError) as exc:
            warnings.append(f"trigger form: skipping {name}: {exc}")
            log.warning("%s", warnings[-1])
    merged = merge_choices(parts)
    choices = FormChoices(**{**merged.__dict__, "inventories": inventories})
    _write_cache(cache, key, sorted(set(read)), warnings, choices)
    return choices
