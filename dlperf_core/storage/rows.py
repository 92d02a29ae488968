"""Typed rows that :class:`~dlperf_core.storage.store.ResultStore`'s reads answer with.

The counterpart of :mod:`dlperf_core.storage.records` (what callers hand the store): frozen, keyword-only
dataclasses, one per table or view read, each with the columns of that table or view under their own names. A
NULL column is ``None`` (never pandas' NaN, NaT or NA), a number is an ``int`` or a ``float``, a flag a ``bool``,
a timestamp an aware UTC ``datetime`` and a night a ``date``, whichever database (PostgreSQL, SQLite) and driver
answered: :func:`row_of` converts one database row by the field types. Pandas stays at the reporting edge: the
store's DataFrame reads (``summary()``, ``history()``, ...) are for reports, tables and plots only.

The fields are standard-library types only: the pure core (:mod:`dlperf_core.measure.regression`) names these rows in
its annotations (imported under ``TYPE_CHECKING``: loading this module loads the storage package) and builds its
own types from them with one ``from_*`` constructor each. A JSON column (``results.configuration``,
``results.launch_spec``, ``max_batch_searches.probes``, ``gpu_health_snapshots.readings`` and ``windows``) comes back as the JSON value it stores: those are the
storage edge's JSON, read back by their own types (``LaunchSpec.from_dict``, ``Trial.from_json``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, SupportsFloat, SupportsInt, TypeVar

from dlperf_core.storage.models import (
    BenchmarkRun,
    FabricBenchmark,
    GpuHealthSnapshot,
    MaxBatchSearchResult,
    Regression,
    Result,
    StoredEnvironment,
    case_summary,
    fabric_history,
    fabric_summary,
    mlperf_scores,
    nightly_history,
)
from dlperf_core.storage.shape import field_shape, row_of_table

R = TypeVar("R")


# --------------------------------------------------------------------------- conversion


_FIELD_TYPES: dict[type, tuple[tuple[str, type, bool], ...]] = {}


def _field_types(cls: type) -> tuple[tuple[str, type, bool], ...]:
    """(name, type, nullable) of each field of the row class ``cls`` (worked out once per class; see
    :func:`dlperf_core.storage.shape.field_shape`)."""
    if cls not in _FIELD_TYPES:
        _FIELD_TYPES[cls] = tuple((name, kind, nullable) for name, (kind, nullable) in field_shape(cls).items())
    return _FIELD_TYPES[cls]


def _utc(value: object) -> datetime:
    """A timestamp as an aware UTC datetime (SQLite hands back naive values or text, PostgreSQL aware ones)."""
    stamp = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return stamp.replace(tzinfo=UTC) if stamp.tzinfo is None else stamp.astimezone(UTC)


def _value(name: str, kind: type, nullable: bool, value: object) -> object:
    if value is None:
        if nullable:
            return None
        raise ValueError(f"column {name} is NULL, which its row type does not allow")
    if kind is bool:
        return bool(value)
    if kind is int and isinstance(value, SupportsInt):  # a database integer (int, or Decimal from a driver)
        return int(value)
    if kind is float and isinstance(value, SupportsFloat):  # a database number (float, int or Decimal)
        return float(value)
    if kind in (int, float):
        raise TypeError(f"column {name} holds {value!r}, not a number")
    if kind is str:
        return str(value)
    if kind is datetime:
        return _utc(value)
    if kind is date:
        if isinstance(value, datetime):
            return value.date()
        return value if isinstance(value, date) else date.fromisoformat(str(value))
    return value  # a JSON column: as stored


def row_of(cls: type[R], values: Mapping[str, object]) -> R:
    """The row ``cls`` (one of this module's dataclasses) of the database row ``values`` (column -> value; extra
    columns are left out), each value converted to its field's type (module docstring); a NULL in a field that
    does not allow None raises ValueError."""
    converted = {name: _value(name, kind, nullable, values[name]) for name, kind, nullable in _field_types(cls)}
    return cls(**converted)


# --------------------------------------------------------------------------- what a history is about


@dataclass(frozen=True, kw_only=True)
class Configuration:
    """A benchmark configuration: the ``CONFIGURATION_COLUMNS`` (what a nightly history and a regression are
    about). ``variant``: the case key's options suffix ('' for none; ``dlperf_core.storage.records.variant_of``)."""

    framework: str
    model: str
    precision: str
    batch_size_per_device: int
    variant: str
    nodes: int
    gpus_per_node: int

    @property
    def topology(self) -> tuple[int, int]:
        """(nodes, gpus_per_node)."""
        return self.nodes, self.gpus_per_node


@dataclass(frozen=True, kw_only=True)
class _Configured(Configuration):
    """Base of the rows that carry the configuration columns (declared once, in :class:`Configuration`)."""

    @property
    def configuration(self) -> Configuration:
        """The row's configuration columns."""
        return Configuration(
            framework=self.framework,
            model=self.model,
            precision=self.precision,
            batch_size_per_device=self.batch_size_per_device,
            variant=self.variant,
            nodes=self.nodes,
            gpus_per_node=self.gpus_per_node,
        )


# --------------------------------------------------------------------------- tables


@row_of_table(BenchmarkRun)
@dataclass(frozen=True, kw_only=True)
class BenchmarkRunRow:
    """A row of ``benchmark_runs``: one benchmark run."""

    id: int
    dag_id: str
    run_id: str
    suite: str
    trigger: str  # "scheduled" | "manual" | "cli" | ...
    runtime: str
    started_at: datetime
    finished_at: datetime | None
    status: str  # "running" | "success" | "failed"
    triggered_by: str | None
    report_path: str | None
    created_at: datetime


@row_of_table(Result)
@dataclass(frozen=True, kw_only=True)
class ResultRow(Configuration):
    """A row of ``results``: one repeat of one case (see :class:`dlperf_core.storage.records.ResultRecord`)."""

    id: int
    benchmark_run_id: int
    dag_id: str
    run_id: str
    case_key: str
    compile: bool
    repeat: int
    status: str  # "ok" | "failed"
    reason: str | None
    throughput: float | None
    reported_throughput: float | None
    iterations: int | None
    log_path: str | None
    started_at: datetime
    finished_at: datetime | None
    environment_id: int | None
    gpu_memory_peak_mb: float | None
    window_first: int | None
    window_last: int | None
    window_fitted: bool
    mfu: float | None
    energy_per_sample_j: float | None
    gpu_power_mean_w: float | None
    figure_origin: str | None
    configuration: dict[str, Any] | None  # the JSON column (Case.configuration); None: not known
    launch_spec: dict[str, Any] | None  # the JSON column (LaunchSpec.to_json); None: not known
    oversubscription: (
        str | None
    )  # why its ranks had no cores of their own (dlperf_core.cluster.cpu_placement); None: they had
    throttled: str | None  # the GPUs and clock-event reasons that throttled it while measured; None: none, or unknown
    created_at: datetime
    updated_at: datetime


@row_of_table(StoredEnvironment, leave_out=("data",))
@dataclass(frozen=True, kw_only=True)
class EnvironmentRow:
    """A row of ``environments`` without its ``data`` (the whole capture, JSON): the fields it is compared by."""

    id: int
    content_hash: str
    captured_at: datetime
    framework: str | None
    framework_version: str | None
    image: str | None
    image_digest: str | None
    hostnames: str | None  # comma-separated
    gpu_model: str | None
    gpu_count: int
    driver_version: str | None
    cuda_version: str | None
    cudnn_version: str | None
    nccl_version: str | None
    power_limit_w: float | None
    sm_clock_max_mhz: float | None
    cpu_model: str | None
    cpu_count: int | None
    memory_total_mb: float | None
    missing: str | None  # "; "-separated

    def fields_of(self, names: tuple[str, ...]) -> dict[str, object]:
        """``{name: value}`` of the fields ``names`` (e.g. ``dlperf_core.cluster.environment.INFRASTRUCTURE_FIELDS``)."""
        return {name: getattr(self, name) for name in names}


@row_of_table(Regression)
@dataclass(frozen=True, kw_only=True)
class RegressionRow(_Configured):
    """A row of ``regressions``: a change of one configuration's median outside its nightly noise."""

    id: int
    benchmark_run_id: int
    dag_id: str
    run_id: str  # the run that opened it
    case_key: str
    night: date
    median_throughput: float  # the regressed level
    baseline_median: float
    baseline_mad: float
    baseline_nights: int
    change_pct: float
    robust_z: float
    direction: str  # "slower" | "faster"
    environment_changed: bool
    environment_changes: str | None  # "; "-separated
    environment_id: int | None
    status: str  # "open" | "closed"
    last_seen_run_id: str | None
    closed_at: datetime | None
    closed_reason: str | None
    created_at: datetime
    label: str | None  # "fabric" | "framework" | "unexplained"; None before migration 0007
    first_bad_night: date | None  # the change point's night (migration 0014; None: not known)
    accepted_from: date | None  # accepted as the new normal: the baseline restarts here (migration 0014)


@row_of_table(GpuHealthSnapshot)
@dataclass(frozen=True, kw_only=True)
class GpuHealthRow:
    """A row of ``gpu_health_snapshots``: one result's GPUs before it ran and over its measured window."""

    id: int
    result_id: int
    checked_at: datetime | None
    policy: str  # "refuse" | "flag"
    verdict: str  # "ok" | "flagged" | "refused" | "no_gpus"
    findings: str | None  # one line per finding, "; "-joined
    gpus: int
    clock_event_reasons: int | None
    sm_clock_min_mhz: float | None
    temperature_max_c: float | None
    readings: list[dict[str, Any]]  # the JSON column: each node's NodeReadings form
    windows: list[dict[str, Any]]  # the JSON column: each GPU's GpuWindow form
    created_at: datetime


@dataclass(frozen=True, kw_only=True)
class CaseHealthRow:
    """A result's GPU health snapshot with the result's key, status and throttling (``ResultStore.health_rows``: a
    join of ``gpu_health_snapshots`` and ``results``)."""

    dag_id: str
    run_id: str
    case_key: str
    repeat: int
    status: str
    throttled: str | None
    checked_at: datetime | None
    policy: str
    verdict: str
    findings: str | None
    gpus: int
    clock_event_reasons: int | None
    sm_clock_min_mhz: float | None
    temperature_max_c: float | None


@row_of_table(MaxBatchSearchResult)
@dataclass(frozen=True, kw_only=True)
class MaxBatchSearchRow:
    """A row of ``max_batch_searches``: what one max batch size search of a run concluded."""

    id: int
    benchmark_run_id: int
    dag_id: str
    run_id: str
    search_key: str
    framework: str
    model: str
    precision: str
    nodes: int
    gpus_per_node: int
    start: int
    step: int
    limit: int
    status: str  # "found" | "limit_reached" | "none_fit" | "failed"
    max_batch: int | None
    first_oom_batch: int | None
    reason: str | None
    probes: list[
        dict[str, Any]
    ]  # the JSON column (its first name): each trial as dlperf_core.measure.maxbatch.Trial.to_json
    environment_id: int | None
    started_at: datetime
    finished_at: datetime
    created_at: datetime


@row_of_table(FabricBenchmark)
@dataclass(frozen=True, kw_only=True)
class FabricRow:
    """A row of ``fabric_probes``: one repeat of an all-reduce fabric benchmark case (its sizes: ``fabric_summary``)."""

    id: int
    benchmark_run_id: int
    dag_id: str
    run_id: str
    probe_key: str
    nodes: int
    gpus_per_node: int
    repeat: int
    status: str  # "ok" | "failed"
    reason: str | None
    ranks: int | None
    backend: str | None
    dtype: str | None
    avg_busbw_gbs: float | None
    log_path: str | None
    environment_id: int | None
    started_at: datetime
    finished_at: datetime | None
    created_at: datetime


# --------------------------------------------------------------------------- views


@row_of_table(case_summary, exact_nulls=False)
@dataclass(frozen=True, kw_only=True)
class CaseSummaryRow(_Configured):
    """A row of ``case_summary``: one case of one run over its repeats (figures over the ok ones; None when it
    has none, or one for the spread)."""

    dag_id: str
    run_id: str
    case_key: str
    compile: bool
    total_gpus: int
    n: int  # ok repeats
    n_failed: int
    median_throughput: float | None
    mean_throughput: float | None
    min_throughput: float | None
    max_throughput: float | None
    speedup: float | None  # against the 1n1g named by baseline_* (None: no baseline, or oversubscribed)
    scaling_efficiency: float | None
    stdev_throughput: float | None
    cv: float | None
    gpu_memory_peak_mb: float | None
    mfu: float | None
    energy_per_sample_j: float | None
    environment_id: int | None
    unreliable: bool
    unreliable_reason: str | None
    # migration 0012 (defaults: a row made without them, as by a caller that predates them)
    single_repeat: bool = False  # one ok repeat: no CV to judge it by
    oversubscribed: bool = False  # its ranks had no cores of their own: no speedup
    baseline_dag_id: str | None = None  # the run whose 1n1g the speedup is against (None: none)
    baseline_run_id: str | None = None
    baseline_of: str | None = None  # "this run" | "latest nightly"
    baseline_night: date | None = None  # that run's night, when it is a scheduled run
    throttled: bool = False  # migration 0013: an ok repeat's GPUs were throttled while measured (the reason says how)


@row_of_table(nightly_history, exact_nulls=False)
@dataclass(frozen=True, kw_only=True)
class HistoryRow(_Configured):
    """A row of ``nightly_history``: one scheduled run of one configuration, good night or not."""

    compile: bool
    case_key: str
    night: date
    started_at: datetime
    dag_id: str
    run_id: str
    run_status: str  # benchmark_runs.status: running, success, failed
    median_throughput: float | None
    n: int  # ok repeats
    n_failed: int
    speedup: float | None
    scaling_efficiency: float | None
    mfu: float | None
    energy_per_sample_j: float | None
    environment_id: int | None
    # migration 0012, as case_summary's (defaults: a row made without them)
    unreliable_reason: str | None = None
    baseline_run_id: str | None = None
    baseline_of: str | None = None
    baseline_night: date | None = None
    throttled: bool = False  # migration 0013: no regression baseline


@row_of_table(fabric_summary, exact_nulls=False)
@dataclass(frozen=True, kw_only=True)
class FabricSummaryRow:
    """A row of ``fabric_summary``: one message size of one fabric benchmark case in one run, the medians over its ok
    repeats (None when it has none)."""

    dag_id: str
    run_id: str
    probe_key: str
    nodes: int
    gpus_per_node: int
    total_gpus: int
    size_bytes: int
    n: int
    busbw_gbs: float | None
    algbw_gbs: float | None
    time_us: float | None
    environment_id: int | None


@row_of_table(fabric_history, exact_nulls=False)
@dataclass(frozen=True, kw_only=True)
class FabricHistoryRow:
    """A row of ``fabric_history``: ``fabric_summary`` of a scheduled run, with its night and status."""

    probe_key: str
    nodes: int
    gpus_per_node: int
    total_gpus: int
    size_bytes: int
    night: date
    started_at: datetime
    dag_id: str
    run_id: str
    run_status: str
    n: int
    busbw_gbs: float | None
    algbw_gbs: float | None
    time_us: float | None
    environment_id: int | None


@row_of_table(mlperf_scores, exact_nulls=False)
@dataclass(frozen=True, kw_only=True)
class MlperfScoreRow:
    """A row of ``mlperf_scores``: one system's official score for one benchmark (minutes to train, None when too
    many runs did not converge), its runs stored and those the compliance checker accepted, and the system."""

    ruleset: str
    submitter: str
    submitter_folder: str
    system_folder: str
    system_name: str
    benchmark: str
    score_minutes: float | None
    runs: int
    runs_compliant: int
    nodes: int
    accelerator_model: str
    accelerator_memory: str
    accelerators: int
    framework: str
    environment_id: int | None
