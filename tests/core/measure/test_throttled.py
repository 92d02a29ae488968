"""A throttled case (issue 36): the clock-event reasons sampled with the clocks, the temperature and the PCIe
generation; a case whose GPUs showed HW slowdown, thermal slowdown or a power brake in its measured window is stored
``throttled`` with the GPUs and reasons, shown like ``unreliable``, and left out of regression baselines. Pure tests
of the sampler, the window and the measurement, then one on SQLite and PostgreSQL from the store to the report,
the results page and the regression detector's good nights.

Every number is a test's (no GPU was lent to sample one): nvidia-smi's CSV as its format is documented, bit masks
from nvml.h."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from dlperf_core.cluster.clock_events import (
    THROTTLING,
    ClockSample,
    GpuWindow,
    reason_names,
    throttled_reason,
    windows_of,
)
from dlperf_core.cluster.gpu_health import judge
from dlperf_core.cluster.gpu_sampling import SAMPLE_FIELDS, GpuSamples, SampleQuery, parse_sample
from dlperf_core.cluster.nvml_readings import read_node
from dlperf_core.measure.measurement import measure_case_run
from dlperf_core.measure.noise import UNRELIABLE_RULE, unreliable_reason
from dlperf_core.measure.regression import NightlyRow, good_nights, is_good_night
from dlperf_core.model import Case, CaseOutcome, NodeOutcome
from dlperf_core.reporting.data import load_report_data, load_results
from dlperf_core.reporting.markdown import render_markdown
from dlperf_core.storage import ResultStore
from dlperf_core.storage.records import GpuHealthRecord
from dlperf_core.storage.rows import Configuration
from fake_nvml import fake_nvml, healthy
from helpers import T0, result_record, run_record

# --------------------------------------------------------------------------- the sampler


def test_reason_bits_in_words():
    assert THROTTLING == 0x8 | 0x20 | 0x40 | 0x80
    assert reason_names(0x44) == ["SW power cap (0x4)", "HW thermal slowdown (0x40)"]
    assert reason_names(0x201) == ["GPU idle (0x1)", "0x200"]  # a bit newer than the table: by its value


def test_a_sample_with_the_clock_fields():
    text = "0, 40000, 650.5, 1755, 71, 4, 0x0000000000000044\n1, 39000, [N/A], 1980, 65, 4, 0x0000000000000000\n"
    got = parse_sample(text)
    assert (got[0].sm_mhz, got[0].temperature_c, got[0].pcie_gen, got[0].reasons) == (1755.0, 71.0, 4, 0x44)
    assert got[1].power_w is None and got[1].reasons == 0
    samples = GpuSamples()
    assert samples.feed(text, at=5.0)
    assert samples.clocks == [ClockSample(5.0, 0, 0x44, 1755.0, 71.0, 4), ClockSample(5.0, 1, 0, 1980.0, 65.0, 4)]
    assert samples.peak_mb == 40000.0 and samples.power == [(5.0, 650.5)]
    old = GpuSamples()
    old.feed("0, 40000, 650.5\n")  # an nvidia-smi asked the basic query: no clocks
    assert old.clocks == [] and old.peak_mb == 40000.0


def test_the_sampler_asks_the_richest_query_the_nvidia_smi_there_knows():
    asked = []

    def run(command):
        asked.append(command[1])
        if "clocks_event_reasons" in command[1]:  # a driver before 535
            return 'Field "clocks_event_reasons.active" is not a valid field to query.\n'
        return "0, 100, 50, 1500, 60, 4, 0x0000000000000000\n"

    query = SampleQuery(run, ("0",))
    assert parse_sample(query() or "")[0].reasons == 0
    assert query() is not None
    assert asked == [
        "--query-gpu=" + ",".join(SAMPLE_FIELDS[0]),
        "--query-gpu=" + ",".join(SAMPLE_FIELDS[1]),
        "--query-gpu=" + ",".join(SAMPLE_FIELDS[1]),  # kept
    ]
    gone = SampleQuery(lambda _command: None)
    assert gone() is None  # the container ended: the sampler stops


# --------------------------------------------------------------------------- the measured window


CLOCKS = {
    "node0": [
        ClockSample(1.0, 0, 0x40, 900.0, 91.0, 4),  # before the window: not the case's figure
        ClockSample(12.0, 0, 0x4, 1700.0, 80.0, 4),  # power cap: not throttling
        ClockSample(12.0, 1, 0x8, 800.0, 85.0, 3),
        ClockSample(20.0, 1, 0x0, 1750.0, 84.0, 4),
    ]
}


def test_throttling_in_the_window_names_each_gpu_and_reason():
    windows = windows_of(CLOCKS, 10.0, 25.0)
    assert windows == (
        GpuWindow("node0", 0, 1, 0x4, 1700.0, 80.0, 4),
        GpuWindow("node0", 1, 2, 0x8, 800.0, 85.0, 4),
    )
    assert throttled_reason(windows) == "node0 GPU 1: HW slowdown (0x8)"
    assert throttled_reason(windows, {("node0", 1): "GPU 5 (GPU-x)"}) == "node0 GPU 5 (GPU-x): HW slowdown (0x8)"
    assert throttled_reason(windows_of(CLOCKS, 10.0, 11.0 + 0.5)) is not None  # no sample inside: the whole run
    assert throttled_reason(windows_of({"n": [ClockSample(1.0, 0, 0x4 | 0x1, None, None, None)]})) is None


def _log(tmp_path):
    """A DLLogger log timed one iteration a second from t0 + 1 (as tests/core/measure/test_efficiency.py's)."""
    log = tmp_path / "node0.log"
    t0 = datetime(2026, 11, 24, 12, 0, 0, tzinfo=UTC).timestamp()
    lines = ["DLL 2026-11-24 12:00:00.000000 - PARAMETER batch_size : 256  world_size : 1  print_freq : 1 "]
    for i in range(1, 31):
        stamp = datetime.fromtimestamp(t0 + i, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        lines.append(f"DLL {stamp} - Epoch: 0 Iteration: {i}  train.loss : 6.5  train.total_ips : 256.00 img/s")
    log.write_text("\n".join(lines) + "\n")
    return log, t0


CASE = Case("pytorch_reference", "resnet50_v1.5", "amp", 256, 1, 1, 10, 20)


def _outcome(log, clocks, policy="refuse") -> CaseOutcome:
    health = judge([read_node(fake_nvml(healthy(0)), ("0",), "gpu0")], policy)
    now = datetime.now(UTC)
    return CaseOutcome(now, now, [NodeOutcome("gpu0", 0, 0, str(log))], None, gpu_health=health, gpu_clocks=clocks)


def test_a_case_throttled_in_its_window_is_stored_throttled_with_the_reasons(tmp_path):
    log, t0 = _log(tmp_path)
    inside = [ClockSample(t0 + 2, 0, 0x40, None, None, None), ClockSample(t0 + 15, 0, 0x20 | 0x4, 1400.0, 88.0, 4)]
    measured = measure_case_run(CASE, _outcome(log, {"gpu0": inside}))
    assert measured.status == "ok"
    uuid = healthy(0).uuid
    assert measured.throttled == f"gpu0 GPU 0 ({uuid}): SW thermal slowdown (0x20)"  # t0 + 2: warm-up, not counted
    assert measured.gpu_windows == (GpuWindow("gpu0", 0, 1, 0x24, 1400.0, 88.0, 4),)
    cool = measure_case_run(CASE, _outcome(log, {"gpu0": [ClockSample(t0 + 15, 0, 0x4, 1900.0, 70.0, 4)]}))
    assert cool.status == "ok" and cool.throttled is None


def test_a_pcie_link_below_its_generation_under_load_fails_the_run_or_flags_it(tmp_path):
    log, t0 = _log(tmp_path)
    slow = {"gpu0": [ClockSample(t0 + 15, 0, 0x0, 1900.0, 70.0, 3)]}  # Gen3 under load, Gen4 possible
    refused = measure_case_run(CASE, _outcome(log, slow))
    assert refused.status == "failed"
    assert refused.reason == f"gpu health: gpu0 GPU 0 ({healthy(0).uuid}): pcie_link_gen_under_load Gen3, wanted Gen4"
    flagged = measure_case_run(CASE, _outcome(log, slow, "flag"))
    assert flagged.status == "ok"
    record = GpuHealthRecord.of(_outcome(log, slow, "flag").gpu_health, flagged.gpu_windows)
    assert record.verdict == "flagged" and "pcie_link_gen_under_load Gen3, wanted Gen4" in (record.findings or "")


def test_the_reason_and_the_rule_say_throttled():
    text = "node0 GPU 1: HW slowdown (0x8)"
    assert unreliable_reason(0.01, 1.0, 2, 3, throttled=text) == f"throttled: {text}"
    assert unreliable_reason(0.5, None, 2, 3, throttled=text) == f"CV 0.50 > 0.10; throttled: {text}"
    assert "throttled" in UNRELIABLE_RULE


def _night(day: int, median: float, throttled: bool = False) -> NightlyRow:
    return NightlyRow("k", datetime(2026, 1, day).date(), f"r{day}", median, 3, 0, "success", None, throttled)


def test_a_throttled_night_is_no_regression_baseline():
    rows = [_night(1, 100.0), _night(2, 60.0, throttled=True), _night(3, 101.0)]
    assert not is_good_night(rows[1], "k") and is_good_night(rows[0], "k")
    assert [r.run_id for r in good_nights(rows, "k")] == ["r1", "r3"]


# --------------------------------------------------------------------------- stored, shown, left out


KEY = "pytorch_reference/resnet50_v1.5/amp/b256/1n1g"
HOT = "gpu0 GPU 0: HW thermal slowdown (0x40)"


@pytest.fixture
def store(dialect_url: str) -> Iterator[ResultStore]:
    """Two nights of one configuration; the second throttled in its first repeat and checked with a power limit off
    its default (flagged)."""
    result_store = ResultStore(dialect_url)
    result_store.ensure_schema()
    flagged = judge([read_node(fake_nvml(healthy(0, power_limit_mw=250_000)), ("0",), "gpu0")])
    windows = (GpuWindow("gpu0", 0, 20, 0x44, 1100.0, 92.0, 4),)
    for day, throttled in ((0, None), (1, HOT)):
        run = run_record(
            dag_id="dlperf_benchmark",
            run_id=f"scheduled__night{day}",
            trigger="scheduled",
            started_at=T0 + timedelta(days=day),
            status="success",
        )
        result_store.upsert_run(run)
        result_store.upsert_results(
            result_record(
                case_key=KEY,
                repeat=i,
                throughput=250.0 + i,
                started_at=run.started_at + timedelta(seconds=i),
                benchmark_run=run,
                throttled=throttled if i == 0 else None,
                gpu_health=GpuHealthRecord.of(flagged, windows) if day == 1 else None,
            )
            for i in range(2)
        )
    yield result_store
    result_store.dispose()


def test_a_throttled_case_is_stored_shown_and_left_out_of_the_baselines(store: ResultStore, tmp_path):
    summary = {r.run_id: r for r in store.summary_rows()}
    night = summary["scheduled__night1"]
    assert night.throttled and night.unreliable and night.unreliable_reason == f"throttled: {HOT}"
    assert not summary["scheduled__night0"].throttled and summary["scheduled__night0"].unreliable_reason is None
    assert store.summary().set_index("run_id").loc["scheduled__night1", "throttled"]
    assert bool(store.latest_summary(nightly=True).iloc[0]["throttled"])

    configuration = Configuration(
        framework="pytorch_reference",
        model="resnet50_v1.5",
        precision="amp",
        batch_size_per_device=256,
        variant="",
        nodes=1,
        gpus_per_node=1,
    )
    history = [NightlyRow.from_history(r) for r in store.history_rows(configuration)]
    assert [(r.run_id, r.throttled) for r in history] == [("scheduled__night0", False), ("scheduled__night1", True)]
    assert [r.run_id for r in good_nights(history, KEY)] == ["scheduled__night0"]
    assert store.history_rows(configuration)[1].unreliable_reason == f"throttled: {HOT}"

    (row0, row1) = [r for r in store.health_rows() if r.run_id == "scheduled__night1"]
    assert (row0.repeat, row0.verdict, row0.throttled, row0.clock_event_reasons) == (0, "flagged", HOT, 0x44)
    assert "power_limit 250 W, wanted the default 300 W [flag]" in (row0.findings or "")
    assert (row1.throttled, row1.temperature_max_c, row1.gpus) == (None, 92.0, 1)
    assert store.health_rows(run_id="scheduled__night0") == []  # not checked: no snapshot

    report = render_markdown(load_report_data(store, "scheduled__night1"), [], tmp_path)
    assert f"throttled: {HOT}" in report  # in the seed table's unreliable column
    assert "### GPU health" in report and "2 repeat(s) checked: 2 flagged, 1 throttled" in report
    page = load_results(store, "scheduled__night1")
    assert [(r["gpu_health"], r["throttled"]) for r in page.rows] == [("flagged", HOT), ("flagged", None)]


def test_a_result_stored_again_keeps_one_snapshot(store: ResultStore):
    (first, _) = store.health_rows(run_id="scheduled__night1")
    flagged = judge([read_node(fake_nvml(healthy(0, persistence=0)), ("0",), "gpu0")], "flag")
    again = result_record(
        case_key=KEY,
        repeat=0,
        throughput=250.0,
        run_id="scheduled__night1",
        dag_id="dlperf_benchmark",
        started_at=first.checked_at or T0,
        gpu_health=GpuHealthRecord.of(flagged),
    )
    store.upsert_results([again, again])  # a retried store task: the snapshot is replaced, not added
    rows = store.health_rows(run_id="scheduled__night1")
    assert len(rows) == 2 and "persistence_mode off" in (rows[0].findings or "")
