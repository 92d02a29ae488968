"""Plain typed records that callers hand to :class:`~dlperf_core.storage.store.ResultStore`.

Each is the columns of its table (declared once, in :mod:`dlperf_core.storage.models`) without ids and bookkeeping
timestamps (``created_at``, ``updated_at``): :func:`~dlperf_core.storage.shape.record_of_table` checks that when
the class is defined. Keyword-only, frozen. Datetimes should be timezone-aware; naive ones are taken as UTC. All are
stored in UTC.

A result and its run also have a JSON form (:class:`~dlperf_core.json_form.JsonForm`, generated from the fields):
what the spool (:mod:`dlperf_core.storage.spool`) writes while the database is away. Its datetimes are written by
``isoformat`` (:data:`~dlperf_core.json_form.IsoDatetime`), the text the spool wrote before the form was generated.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

from dlperf_core.cluster.clock_events import GpuWindow
from dlperf_core.cluster.gpu_health import GpuHealth, check_under_load
from dlperf_core.cluster.nvml_readings import NodeReadings
from dlperf_core.json_form import IsoDatetime, JsonForm
from dlperf_core.measure.origin import check_origin
from dlperf_core.storage.models import (
    HEALTH_POLICIES,
    HEALTH_VERDICTS,
    RESULT_STATUSES,
    RUN_STATUSES,
    SEARCH_STATUSES,
    BenchmarkRun,
    FabricBenchmark,
    FabricBenchmarkSize,
    GpuHealthSnapshot,
    MaxBatchSearchResult,
    Result,
)
from dlperf_core.storage.shape import record_of_table

if TYPE_CHECKING:  # only for annotations: storage does not need the measurement code to load
    from dlperf_core.measure.maxbatch import SearchResult, Trial
    from dlperf_core.measure.measurement import Measurement
    from dlperf_core.model import Case, CaseOutcome, CaseRun
    from dlperf_core.parsing.fabric import FabricResult
    from dlperf_core.plan.cases import SearchRun


@record_of_table(BenchmarkRun)
@dataclass(frozen=True, kw_only=True)
class BenchmarkRunRecord(JsonForm):
    """One benchmark run (row of ``benchmark_runs``), identified by ``(dag_id, run_id)``."""

    dag_id: str
    run_id: str
    suite: str
    trigger: str  # "scheduled" | "manual" | "cli" | ...
    runtime: str
    started_at: IsoDatetime
    finished_at: IsoDatetime | None = None
    status: str = "running"  # "running" | "success" | "failed"
    triggered_by: str | None = None  # who: the triggering user, "scheduler", "cli", ...
    report_path: str | None = None  # kept as stored when None (set by ResultStore.set_report_path)

    def __post_init__(self) -> None:
        if self.status not in RUN_STATUSES:
            raise ValueError(f"run status must be one of {RUN_STATUSES}, got {self.status!r}")


def variant_of(case_key: str) -> str:
    """The options suffix of a case key (``.../1n8g+static_loss_scale=128+compile+args=1f0c9a2e`` ->
    ``+static_loss_scale=128+compile+args=1f0c9a2e``), '' when it has none: framework, model, precision, batch
    and topology never hold a "+"."""
    i = case_key.find("+")
    return case_key[i:] if i >= 0 else ""


@record_of_table(GpuHealthSnapshot, filled_in=("id", "result_id", "created_at"))
@dataclass(frozen=True, kw_only=True)
class GpuHealthRecord(JsonForm):
    """The health snapshot of one result's GPUs (row of ``gpu_health_snapshots``, stored with its result): what
    NVML read before it ran, the findings, and their clocks over its measured window."""

    checked_at: IsoDatetime | None
    policy: str  # HEALTH_POLICIES
    verdict: str  # HEALTH_VERDICTS
    findings: str | None
    gpus: int
    clock_event_reasons: int | None
    sm_clock_min_mhz: float | None
    temperature_max_c: float | None
    readings: tuple[NodeReadings, ...]
    windows: tuple[GpuWindow, ...]

    def __post_init__(self) -> None:
        if self.policy not in HEALTH_POLICIES:
            raise ValueError(f"health policy must be one of {HEALTH_POLICIES}, got {self.policy!r}")
        if self.verdict not in HEALTH_VERDICTS:
            raise ValueError(f"health verdict must be one of {HEALTH_VERDICTS}, got {self.verdict!r}")

    @classmethod
    def of(cls, health: GpuHealth, windows: tuple[GpuWindow, ...] = ()) -> GpuHealthRecord:
        """The snapshot of ``health`` (read before the case) with its GPUs' measured ``windows`` and what they found
        under load (:func:`dlperf_core.cluster.gpu_health.check_under_load`)."""
        health = health.with_findings(check_under_load(health.nodes, windows))
        clocks = [w.sm_clock_min_mhz for w in windows if w.sm_clock_min_mhz is not None]
        temperatures = [w.temperature_max_c for w in windows if w.temperature_max_c is not None]
        mask = 0
        for w in windows:
            mask |= w.reasons
        checked = health.checked_at
        return cls(
            checked_at=datetime.fromtimestamp(checked, UTC) if checked is not None else None,
            policy=health.policy,
            verdict=health.verdict,
            findings=health.summary,
            gpus=health.gpus,
            clock_event_reasons=mask if windows else None,
            sm_clock_min_mhz=min(clocks) if clocks else None,
            temperature_max_c=max(temperatures) if temperatures else None,
            readings=health.nodes,
            windows=windows,
        )


@record_of_table(Result, beside=("benchmark_run", "gpu_health"))
@dataclass(frozen=True, kw_only=True)
class ResultRecord(JsonForm):
    """One repeat of one case (row of ``results``), identified by
    ``(dag_id, run_id, case_key, repeat)``.

    The result belongs to the benchmark run ``(dag_id, run_id)``. ``benchmark_run``, when given,
    describes that run and is used to create its row if it does not exist yet (an existing row is
    left as it is); without it a placeholder run row is created when needed (suite, trigger and
    runtime ``"unknown"``, started at this result's ``started_at``, status ``"running"``).
    """

    dag_id: str
    run_id: str
    case_key: str  # e.g. "pytorch_reference/resnet50_v1.5/fp32/b8/1n2g"
    framework: str
    model: str
    precision: str
    batch_size_per_device: int
    nodes: int
    gpus_per_node: int
    repeat: int  # 0-based
    status: str  # "ok" | "failed"
    reason: str | None = None
    throughput: float | None = None  # samples/s by dlperf's rule; required (> 0) when ok
    reported_throughput: float | None = None  # the framework's own figure
    iterations: int | None = None
    log_path: str | None = None
    started_at: IsoDatetime
    finished_at: IsoDatetime | None = None
    environment_id: int | None = None  # row of ``environments`` (ResultStore.upsert_environment)
    gpu_memory_peak_mb: float | None = None  # peak GPU memory used, sampled during the run (MiB)
    window_first: int | None = None  # first iteration counted by the throughput rule
    window_last: int | None = None  # last iteration counted
    window_fitted: bool = False  # the window was shortened to fit a log dlperf did not launch
    variant: str | None = None  # the case key's options suffix ("+compile", ...); None: taken from case_key
    compile: bool = False  # ran under torch.compile
    mfu: float | None = None  # model FLOPs utilisation, 0..1 (dlperf_core.measure.efficiency); None when unknown
    energy_per_sample_j: float | None = None  # joules per sample of the case's GPUs; None when unknown
    gpu_power_mean_w: float | None = None  # mean board power of the case's GPUs, summed (W)
    # who printed the lines the figure was read from: "framework" | "dlperf" | "imported" (dlperf_core.measure.origin);
    # None: unknown
    figure_origin: str | None = None
    # everything that changes the work (Case.configuration; its fingerprint ends case_key); None: unknown
    configuration: dict[str, Any] | None = None
    # what was launched on each node (dlperf_core.run.launch_spec, for dlperf reproduce); None: unknown
    launch_spec: dict[str, Any] | None = None
    # why the case's ranks had no cores of their own (dlperf_core.cluster.cpu_placement): its figures are flagged and its
    # speedup is not reported; None: each rank had its own cores, or not a CPU stand-in
    oversubscription: str | None = None
    # the GPUs and clock-event reasons that throttled it in its measured window (dlperf_core.cluster.clock_events): its
    # figures are flagged and left out of regression baselines; None: none did, or nothing was sampled
    throttled: str | None = None
    benchmark_run: BenchmarkRunRecord | None = None
    gpu_health: GpuHealthRecord | None = None  # stored beside it (gpu_health_snapshots); None: not checked

    LEFT_OUT_WHEN_NONE: ClassVar[tuple[str, ...]] = ("throttled", "gpu_health")
    """Fields added after results were first spooled (migration 0013), left out of the JSON form while None: a
    record without them is spooled as the text an older dlperf wrote, and reads back the same."""

    def to_json(self) -> dict[str, Any]:
        """The generated JSON form, less the :attr:`LEFT_OUT_WHEN_NONE` fields that are None."""
        data = super().to_json()
        for name in self.LEFT_OUT_WHEN_NONE:
            if data.get(name) is None:
                data.pop(name, None)
        return data

    def __post_init__(self) -> None:
        if self.status not in RESULT_STATUSES:
            raise ValueError(f"result status must be one of {RESULT_STATUSES}, got {self.status!r}")
        check_origin(self.figure_origin)
        if self.variant is None:
            object.__setattr__(self, "variant", variant_of(self.case_key))
        run = self.benchmark_run
        if run is not None and (run.dag_id, run.run_id) != (self.dag_id, self.run_id):
            raise ValueError(
                f"benchmark_run {(run.dag_id, run.run_id)} does not match the result's {(self.dag_id, self.run_id)}"
            )

    @property
    def total_gpus(self) -> int:
        """nodes x gpus_per_node."""
        return self.nodes * self.gpus_per_node

    @classmethod
    def from_run(
        cls,
        dag_id: str,
        run_id: str,
        case: Case,
        repeat: int,
        measurement: Measurement,
        outcome: CaseOutcome,
        *,
        environment_id: int | None = None,
        window_fitted: bool = False,
        figure_origin: str | None = None,
        launch_spec: dict[str, Any] | None = None,
        benchmark_run: BenchmarkRunRecord | None = None,
    ) -> ResultRecord:
        """The row of one repeat of ``case``: its configuration from the case, its figures from the
        measurement, its times, log and GPU memory peak from the runtime's outcome, and ``figure_origin``: who
        printed the lines the figure was read from (``dlperf_core.measure.measurement.figure_origin`` for a run dlperf
        launched, ``imported`` for a log from elsewhere), and ``launch_spec``: what was launched on each node
        (``dlperf_core.run.launch_spec.LaunchSpec.to_json``; None for a log from elsewhere); its GPUs' health snapshot
        and throttling from the outcome and the measurement. The one place a result
        row is filled in (the DAG's store_result and ``dlperf import`` both come here)."""
        return cls(
            dag_id=dag_id,
            run_id=run_id,
            case_key=case.key,
            framework=case.framework,
            model=case.model,
            precision=case.precision,
            batch_size_per_device=case.batch_size_per_device,
            nodes=case.nodes,
            gpus_per_node=case.gpus_per_node,
            compile=case.compile,
            configuration=case.configuration,
            repeat=repeat,
            status=measurement.status,
            reason=measurement.reason,
            throughput=measurement.throughput,
            reported_throughput=measurement.reported_throughput,
            iterations=measurement.iterations,
            window_first=measurement.window_first,
            window_last=measurement.window_last,
            mfu=measurement.mfu,
            energy_per_sample_j=measurement.energy_per_sample_j,
            gpu_power_mean_w=measurement.gpu_power_mean_w,
            window_fitted=window_fitted,
            log_path=outcome.log_path,
            started_at=outcome.started_at,
            finished_at=outcome.finished_at,
            environment_id=environment_id,
            gpu_memory_peak_mb=outcome.gpu_memory_peak_mb,
            oversubscription=outcome.oversubscription,
            throttled=measurement.throttled,
            gpu_health=(
                GpuHealthRecord.of(outcome.gpu_health, measurement.gpu_windows)
                if outcome.gpu_health is not None
                else None
            ),
            figure_origin=figure_origin,
            launch_spec=launch_spec,
            benchmark_run=benchmark_run,
        )


@record_of_table(MaxBatchSearchResult)
@dataclass(frozen=True, kw_only=True)
class MaxBatchSearchRecord:
    """One max batch size search of a benchmark run (row of ``max_batch_searches``), identified by
    ``(dag_id, run_id, search_key)``; ``probes``: every batch tried (its trials), in order (stored as their JSON
    form)."""

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
    status: str  # SEARCH_STATUSES
    max_batch: int | None
    first_oom_batch: int | None
    reason: str | None
    probes: tuple[Trial, ...]  # the column keeps its first name: each batch tried (a Trial)
    started_at: datetime
    finished_at: datetime
    environment_id: int | None = None

    @classmethod
    def from_search(
        cls,
        dag_id: str,
        run_id: str,
        search_run: SearchRun,
        found: SearchResult,
        started_at: datetime,
        finished_at: datetime,
        *,
        environment_id: int | None = None,
    ) -> MaxBatchSearchRecord:
        """The row of one finished search: its case's configuration and its bounds from ``search_run``, what it
        found and every trial from ``found``."""
        case, search = search_run.case, search_run.search
        return cls(
            dag_id=dag_id,
            run_id=run_id,
            search_key=search_run.key,
            framework=case.framework,
            model=case.model,
            precision=case.precision,
            nodes=case.nodes,
            gpus_per_node=case.gpus_per_node,
            start=search.start,
            step=search.step,
            limit=search.limit,
            status=found.status,
            max_batch=found.max_batch,
            first_oom_batch=found.first_oom_batch,
            reason=found.reason,
            probes=found.trials,
            started_at=started_at,
            finished_at=finished_at,
            environment_id=environment_id,
        )

    def __post_init__(self) -> None:
        if self.status not in SEARCH_STATUSES:
            raise ValueError(f"search status must be one of {SEARCH_STATUSES}, got {self.status!r}")


@record_of_table(FabricBenchmarkSize, filled_in=("probe_id",))
@dataclass(frozen=True)
class FabricSizeRecord:
    """One message size of a fabric benchmark repeat (row of ``fabric_probe_sizes``)."""

    size_bytes: int
    time_us: float
    algbw_gbs: float
    busbw_gbs: float


@record_of_table(FabricBenchmark, beside=("sizes",))
@dataclass(frozen=True, kw_only=True)
class FabricRecord:
    """One repeat of an all-reduce fabric benchmark case (row of ``fabric_probes``, with its sizes), identified by
    ``(dag_id, run_id, probe_key, repeat)`` (``probe_key``: the column's name; it holds the case key). A failed
    repeat has a reason and no sizes."""

    dag_id: str
    run_id: str
    probe_key: str
    nodes: int
    gpus_per_node: int
    repeat: int
    status: str  # "ok" | "failed"
    reason: str | None = None
    ranks: int | None = None
    backend: str | None = None
    dtype: str | None = None
    avg_busbw_gbs: float | None = None
    log_path: str | None = None
    environment_id: int | None = None
    started_at: datetime
    finished_at: datetime | None = None
    sizes: tuple[FabricSizeRecord, ...] = ()

    @classmethod
    def from_fabric(
        cls,
        dag_id: str,
        run_id: str,
        run: CaseRun,
        measurement: Measurement,
        result: FabricResult | None,
        outcome: CaseOutcome,
        *,
        environment_id: int | None = None,
    ) -> FabricRecord:
        """The row of one repeat of a fabric benchmark case: status and reason from ``measurement``
        (:func:`dlperf_core.measure.measurement.measure_fabric_run`), what its table says from ``result``, its sizes only
        when the measurement is ok, its times and log from the runtime's outcome."""
        case = run.case
        good = result if measurement.status == "ok" else None
        sizes = good.sizes if good is not None else ()
        return cls(
            dag_id=dag_id,
            run_id=run_id,
            probe_key=case.key,
            nodes=case.nodes,
            gpus_per_node=case.gpus_per_node,
            repeat=run.repeat,
            status=measurement.status,
            reason=measurement.reason,
            ranks=result.ranks if result else None,
            backend=result.backend if result else None,
            dtype=result.dtype if result else None,
            avg_busbw_gbs=good.avg_busbw_gbs if good else None,
            log_path=outcome.log_path,
            environment_id=environment_id,
            started_at=outcome.started_at,
            finished_at=outcome.finished_at,
            sizes=tuple(FabricSizeRecord(s.size_bytes, s.time_us, s.algbw_gbs, s.busbw_gbs) for s in sizes),
        )

    def __post_init__(self) -> None:
        if self.status not in RESULT_STATUSES:
            raise ValueError(f"fabric benchmark status must be one of {RESULT_STATUSES}, got {self.status!r}")
        if self.status == "failed" and self.sizes:
            raise ValueError("a failed fabric benchmark repeat stores no sizes")
