"""The measurement of one case run: the runtime's outcome and the parsed log, reduced to one result.

Pure apart from reading the log file. A run that failed has a reason and no throughput, never a zero. A
training case's figure is its ``throughput``; a fabric benchmark's (the all-reduce case) is its
``bus_bandwidth_gbs``, and its ``throughput`` stays None: a bandwidth is never a throughput.

The GPUs' clocks over the measured window (:mod:`dlperf_core.cluster.clock_events`) say whether an ok run was
**throttled** (its ``throttled`` names the GPUs and the reasons), and whether each GPU's PCIe link reached its
maximum generation under load (:func:`dlperf_core.cluster.gpu_health.check_under_load`): one that did not fails the
run under the suite's ``health: refuse``, with the finding as its reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from dlperf_core.cluster.clock_events import GpuWindow, throttled_reason, windows_of
from dlperf_core.cluster.gpu_health import GpuHealth, check_under_load
from dlperf_core.cluster.gpu_sampling import case_power_w
from dlperf_core.frameworks import get_adapter
from dlperf_core.json_form import JsonForm
from dlperf_core.measure.efficiency import (
    energy_per_sample,
    mfu,
    model_size,
    training_flops_per_sample,
)
from dlperf_core.model import Case, CaseOutcome
from dlperf_core.parsing import ParsedRun, parse_file
from dlperf_core.parsing.fabric import FabricResult, parse_fabric_table
from dlperf_core.parsing.failures import ERROR_TAIL_CHARS, error_line


@dataclass(frozen=True)
class Measurement(JsonForm):
    """One case run's result, what ``store_result`` hands on. Version 2 added ``bus_bandwidth_gbs``: version 1
    held a fabric benchmark's GB/s in ``throughput``, and a version-1 form is read back as it was written (it
    cannot tell which case it came from)."""

    __version__: ClassVar[int] = 2

    status: str  # "ok" | "failed"
    reason: str | None
    throughput: float | None  # samples/s by dlperf's window rule (training cases only)
    reported_throughput: float | None  # the framework's own figure
    iterations: int | None  # iterations inside the measured window (fabric benchmark: message sizes measured)
    window_first: int | None = None  # first and last iteration counted (ok runs)
    window_last: int | None = None
    mfu: float | None = None  # model FLOPs utilisation (dlperf_core.measure.efficiency); None when unknown
    energy_per_sample_j: float | None = None
    gpu_power_mean_w: float | None = None  # the case's GPUs' mean board power over the window, summed (W)
    bus_bandwidth_gbs: float | None = None  # a fabric benchmark's average bus bandwidth (GB/s); None otherwise
    # the throttling reasons the GPUs showed in the measured window, per GPU (None: none, or not sampled)
    throttled: str | None = None
    gpu_windows: tuple[GpuWindow, ...] = ()  # each GPU's clocks over the measured window


def _tail(path: Path) -> str:
    """The end of a log file (where a failed process's last words are)."""
    with path.open("rb") as f:
        f.seek(0, 2)
        f.seek(max(0, f.tell() - ERROR_TAIL_CHARS))
        return f.read().decode(errors="replace")


def flops_per_sample(case: Case) -> float | None:
    """Training FLOPs of one sample of the case's model at the size it trains (its ``extra_args``)."""
    return training_flops_per_sample(case.model, model_size(case.model, case.extra_args))


def window_times(parsed: ParsedRun) -> tuple[float | None, float | None]:
    """Unix times of the measured window's ends (the record before its first iteration, and its last), from
    the log's timestamps; (None, None) where the log has none."""
    if parsed.window is None:
        return None, None
    first, last = parsed.window
    times = {r.iteration: r.time for r in parsed.records if r.iteration in (first - 1, last)}
    return times.get(first - 1), times.get(last)


def efficiency(case: Case, parsed: ParsedRun, outcome: CaseOutcome, gpu_model: str | None) -> dict[str, float | None]:
    """MFU, energy per sample and mean power of an ok run (None each where unknown: CPU nodes, no power
    sampled, a GPU missing from the peak table)."""
    power = case_power_w(outcome.gpu_power, *window_times(parsed)) if outcome.gpu_power else None
    return {
        "mfu": mfu(parsed.throughput, flops_per_sample(case), gpu_model, case.precision, case.total_gpus),
        "energy_per_sample_j": energy_per_sample(power, parsed.throughput),
        "gpu_power_mean_w": power,
    }


def gpu_names(health: GpuHealth | None) -> dict[tuple[str, int], str]:
    """How each sampled GPU is called (``{(node, index it was sampled by): "GPU 4 (GPU-3f0c...)"}``): as the
    inventory names it, from the health readings taken where it was sampled."""
    if health is None:
        return {}
    return {
        (n.node, g.index): f"GPU {g.gpu}" + (f" ({g.uuid})" if g.uuid and g.uuid != g.gpu else "")
        for n in health.nodes
        for g in n.gpus
        if g.index is not None
    }


def gpu_windows(outcome: CaseOutcome, parsed: ParsedRun | None) -> tuple[GpuWindow, ...]:
    """Each GPU's clocks over the measured window (the whole run where the log has no times)."""
    if not outcome.gpu_clocks:
        return ()
    start, end = window_times(parsed) if parsed is not None else (None, None)
    return windows_of(outcome.gpu_clocks, start, end)


def under_load(outcome: CaseOutcome, windows: tuple[GpuWindow, ...]) -> str | None:
    """Why an ok run fails after all: a GPU whose PCIe link stayed below its maximum generation under load, under
    ``health: refuse`` (``gpu health: <finding>; ...``); None otherwise."""
    health = outcome.gpu_health
    if health is None or health.policy != "refuse":
        return None
    refused = [f for f in check_under_load(health.nodes, windows) if f.outcome == "refuse"]
    return ("gpu health: " + "; ".join(f.line() for f in refused)) if refused else None


def measure_case_run(case: Case, outcome: CaseOutcome, gpu_model: str | None = None) -> Measurement:
    """Combine how the processes ended with what the log says (``gpu_model``: the GPU the environment
    capture read, for the MFU)."""
    adapter = get_adapter(case.framework)
    log = Path(outcome.log_path) if outcome.log_path else None
    parsed = None
    if log is not None and log.exists():
        warmup, measured = adapter.parse_window(case)
        runs = parse_file(log, format=adapter.log_format, warmup=warmup, measured=measured)
        parsed = runs[0] if runs else None
    if outcome.failure:
        details = [outcome.failure]
        if parsed is not None and parsed.status != "ok":
            details.append(f"log: {parsed.reason}")
        if log is not None and log.exists() and (error := error_line(_tail(log))):
            details.append(f"error: {error}")
        return Measurement("failed", "; ".join(details), None, None, None)
    if parsed is None:
        return Measurement("failed", "no log was collected from node 0", None, None, None)
    if parsed.status != "ok":
        return Measurement("failed", parsed.reason, None, parsed.reported_throughput, parsed.iterations)
    if parsed.gpus is not None and parsed.gpus != case.total_gpus:
        return Measurement(
            "failed",
            f"log reports {parsed.gpus} devices, the case expects {case.total_gpus}",
            None,
            parsed.reported_throughput,
            parsed.iterations,
        )
    first, last = parsed.window or (None, None)
    windows = gpu_windows(outcome, parsed)
    if (refused := under_load(outcome, windows)) is not None:
        return Measurement("failed", refused, None, parsed.reported_throughput, parsed.iterations, gpu_windows=windows)
    return Measurement(
        "ok",
        None,
        parsed.throughput,
        parsed.reported_throughput,
        parsed.iterations,
        first,
        last,
        **efficiency(case, parsed, outcome, gpu_model),
        throttled=throttled_reason(windows, gpu_names(outcome.gpu_health)),
        gpu_windows=windows,
    )


def measure_fabric_run(case: Case, outcome: CaseOutcome) -> tuple[Measurement, FabricResult | None]:
    """The measurement of a fabric benchmark case run (the all-reduce bus bandwidth, the ``allreduce_probe``
    adapter) and what it measured: ok with its message sizes, or failed with the reason (the process's, else the
    log's). The measurement's ``bus_bandwidth_gbs`` is the average bus bandwidth (GB/s), for the task's summary
    only (``throughput`` stays None): the sizes are stored in ``fabric_probes``, never as a throughput."""
    log = Path(outcome.log_path) if outcome.log_path else None
    result = (
        parse_fabric_table(log.read_bytes().decode("utf-8", errors="replace"))
        if log is not None and log.exists()
        else None
    )
    if outcome.failure:
        details = [outcome.failure]
        if result is not None and result.status != "ok":
            details.append(f"log: {result.reason}")
        if log is not None and log.exists() and (error := error_line(_tail(log))):
            details.append(f"error: {error}")
        return Measurement("failed", "; ".join(details), None, None, None), result
    if result is None:
        return Measurement("failed", "no log was collected from node 0", None, None, None), None
    if result.status != "ok":
        return Measurement("failed", result.reason, None, None, None), result
    if result.ranks is not None and result.ranks != case.total_gpus:
        reason = f"probe ran on {result.ranks} ranks, the case expects {case.total_gpus}"  # stored text: kept
        return Measurement("failed", reason, None, None, None), result
    return Measurement("ok", None, None, None, len(result.sizes), bus_bandwidth_gbs=result.avg_busbw_gbs), result
