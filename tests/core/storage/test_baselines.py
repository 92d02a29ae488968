"""Every speedup against its own baseline (issue 39, migration 0012), on SQLite and PostgreSQL.

The rules: a speedup is against the 1n1g of the same run or, where that run has none, of the latest nightly run
that started at or before it, named beside it (``baseline_of``, ``baseline_run_id``, ``baseline_night``); a
figure from one repeat is flagged ``single repeat``; an oversubscribed case has no speedup and is flagged with
its reason; the latest nightly summary is not replaced by a later run on demand, the latest of any run is.
Then where a user reads them: the seed tables of a report and ``dlperf results``, the results page.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from datetime import date, timedelta

import pandas as pd
import pytest

from dlperf_core.measure.noise import MAX_RELIABLE_CV, SINGLE_REPEAT, unreliable_reason
from dlperf_core.reporting import seed_tables
from dlperf_core.storage import ResultStore
from dlperf_core.storage.migrate import MIGRATIONS_DIR
from helpers import T0, result_record, run_record

NIGHT = run_record(
    dag_id="dlperf_benchmark",
    run_id="scheduled__2026-01-01T02:00:00+00:00",
    trigger="scheduled",
    started_at=T0,
    status="success",
)
LATER_NIGHT = run_record(
    dag_id="dlperf_benchmark",
    run_id="scheduled__2026-01-02T02:00:00+00:00",
    trigger="scheduled",
    started_at=T0 + timedelta(days=1),
    status="success",
)
ONE_REPEAT = run_record(
    dag_id="dlperf_benchmark",
    run_id="manual__one-repeat",
    trigger="manual",
    started_at=T0 + timedelta(hours=5),
    status="success",
)
NO_1N1G = run_record(
    dag_id="dlperf_benchmark",
    run_id="manual__no-1n1g",
    trigger="manual",
    started_at=T0 + timedelta(hours=6),
    status="success",
)
BEFORE_ANY_NIGHT = run_record(
    dag_id="dlperf_benchmark",
    run_id="manual__before",
    trigger="manual",
    started_at=T0 - timedelta(hours=1),
    status="success",
)
CROWDED = "oversubscribed: 4 ranks on 2 cores of host0"


def key(topology: str) -> str:
    return f"pytorch_reference/resnet50_v1.5/fp32/b8/{topology}"


def repeats(run, topology: str, values: list[float], oversubscription: str | None = None) -> list:
    return [
        result_record(
            case_key=key(topology),
            repeat=i,
            throughput=v,
            started_at=run.started_at + timedelta(seconds=i),
            benchmark_run=run,
            oversubscription=oversubscription,
        )
        for i, v in enumerate(values)
    ]


@pytest.fixture
def store(dialect_url: str) -> Iterator[ResultStore]:
    """The night (1n1g 100/102, 1n2g 190/192, 2n2g oversubscribed), then on demand a one-repeat 1n1g (107) and
    a run without 1n1g (1n2g 180/181), and before any night a 1n2g run without 1n1g."""
    result_store = ResultStore(dialect_url)
    result_store.ensure_schema()
    for run in (NIGHT, ONE_REPEAT, NO_1N1G, BEFORE_ANY_NIGHT):
        result_store.upsert_run(run)
    result_store.upsert_results(
        repeats(NIGHT, "1n1g", [100.0, 102.0])
        + repeats(NIGHT, "1n2g", [190.0, 192.0])
        + repeats(NIGHT, "2n2g", [300.0, 310.0], CROWDED)
        + repeats(ONE_REPEAT, "1n1g", [107.0])
        + repeats(NO_1N1G, "1n2g", [180.0, 181.0])
        + repeats(BEFORE_ANY_NIGHT, "1n2g", [170.0, 171.0])
    )
    yield result_store
    result_store.dispose()


def row(frame: pd.DataFrame, run_id: str, topology: str) -> pd.Series:
    found = frame[(frame["run_id"] == run_id) & (frame["case_key"] == key(topology))]
    assert len(found) == 1, (run_id, topology, frame[["run_id", "case_key"]])
    return found.iloc[0]


def night_of(value: object) -> str | None:
    return None if value is None or pd.isna(value) else str(value)[:10]


def test_a_run_with_its_own_1n1g_is_measured_against_it(store: ResultStore):
    summary = store.summary()
    one_n_two_g = row(summary, NIGHT.run_id, "1n2g")
    assert one_n_two_g["speedup"] == pytest.approx(191.0 / 101.0)
    assert one_n_two_g["baseline_of"] == "this run" and one_n_two_g["baseline_run_id"] == NIGHT.run_id
    assert night_of(one_n_two_g["baseline_night"]) == "2026-01-01"
    assert pd.isna(one_n_two_g["unreliable_reason"]) and not one_n_two_g["single_repeat"]


def test_a_run_without_1n1g_is_measured_against_the_latest_night_before_it(store: ResultStore):
    summary = store.summary()
    lone = row(summary, NO_1N1G.run_id, "1n2g")
    assert lone["speedup"] == pytest.approx(180.5 / 101.0)  # the night's 1n1g median, not the manual 107
    assert lone["baseline_of"] == "latest nightly"
    assert (lone["baseline_dag_id"], lone["baseline_run_id"]) == (NIGHT.dag_id, NIGHT.run_id)
    assert night_of(lone["baseline_night"]) == "2026-01-01"
    # a run before any night has no baseline: no speedup, nothing named, nothing flagged for it
    early = row(summary, BEFORE_ANY_NIGHT.run_id, "1n2g")
    assert pd.isna(early["speedup"]) and pd.isna(early["baseline_of"]) and pd.isna(early["baseline_run_id"])
    assert pd.isna(early["unreliable_reason"])


def test_a_later_night_does_not_move_an_earlier_runs_baseline(store: ResultStore):
    store.upsert_run(LATER_NIGHT)
    store.upsert_results(repeats(LATER_NIGHT, "1n1g", [50.0, 50.0]))
    lone = row(store.summary(), NO_1N1G.run_id, "1n2g")
    assert lone["baseline_run_id"] == NIGHT.run_id and lone["speedup"] == pytest.approx(180.5 / 101.0)


def test_a_one_repeat_run_is_flagged_single_repeat(store: ResultStore):
    single = row(store.summary(), ONE_REPEAT.run_id, "1n1g")
    assert single["n"] == 1 and bool(single["single_repeat"]) and bool(single["unreliable"])
    assert single["unreliable_reason"] == SINGLE_REPEAT == "single repeat"
    assert unreliable_reason(None, 1.0, 1, ok_repeats=1) == SINGLE_REPEAT  # the core's rule, the same words


def test_an_oversubscribed_case_has_no_speedup_and_says_why(store: ResultStore):
    crowded = row(store.summary(), NIGHT.run_id, "2n2g")
    assert pd.isna(crowded["speedup"]) and pd.isna(crowded["scaling_efficiency"])
    assert bool(crowded["oversubscribed"]) and crowded["unreliable_reason"] == CROWDED
    assert unreliable_reason(0.02, 3.0, 4, ok_repeats=2, oversubscription=CROWDED) == CROWDED


def test_latest_nightly_is_not_replaced_by_a_run_on_demand(store: ResultStore):
    nightly = store.latest_summary(nightly=True)
    assert set(nightly["run_id"]) == {NIGHT.run_id}
    assert row(nightly, NIGHT.run_id, "1n1g")["median_throughput"] == pytest.approx(101.0)
    anyrun = store.latest_summary()
    assert row(anyrun, ONE_REPEAT.run_id, "1n1g")["unreliable_reason"] == SINGLE_REPEAT
    assert row(anyrun, NO_1N1G.run_id, "1n2g")["baseline_run_id"] == NIGHT.run_id
    assert list(anyrun.columns) == list(nightly.columns)


def test_nightly_history_names_the_baseline(store: ResultStore):
    history = store.history()
    assert set(history["run_id"]) == {NIGHT.run_id}
    assert set(history["baseline_of"]) == {"this run"}
    assert history.set_index("case_key").loc[key("2n2g"), "unreliable_reason"] == CROWDED


def test_reports_and_dlperf_results_name_the_baseline(store: ResultStore):
    text = seed_tables(store.summary(run_id=NO_1N1G.run_id))
    assert "speedup_vs" in text and f"latest nightly 2026-01-01 ({NIGHT.run_id})" in text
    text = seed_tables(store.summary(run_id=ONE_REPEAT.run_id))
    assert "this run" in text and SINGLE_REPEAT in text


def test_migration_0012_writes_the_core_threshold_and_words():
    path = next((MIGRATIONS_DIR / "versions").glob("0012_*.py"))
    spec = importlib.util.spec_from_file_location("dlperf_migration_0012_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from dlperf_core.measure.noise import BASELINE_OF

    assert module.MAX_RELIABLE_CV == MAX_RELIABLE_CV and module.SINGLE_REPEAT == SINGLE_REPEAT
    assert (module.THIS_RUN, module.LATEST_NIGHTLY) == BASELINE_OF
    for sql in (module.CASE_SUMMARY_PG, module.CASE_SUMMARY_SQLITE):
        assert f"> {MAX_RELIABLE_CV!r}" in sql and f"'{SINGLE_REPEAT}'" in sql


def test_a_night_is_a_date(store: ResultStore):
    value = row(store.summary(), NIGHT.run_id, "1n1g")["baseline_night"]
    assert isinstance(value, date) or str(value) == "2026-01-01"


def test_a_night_without_1n1g_is_measured_against_the_night_before_in_every_view(store: ResultStore):
    """nightly_history (its own SQL on PostgreSQL, per run) and case_summary agree on the fallback."""
    store.upsert_run(LATER_NIGHT)
    store.upsert_results(repeats(LATER_NIGHT, "1n2g", [200.0, 201.0]))
    summary = row(store.summary(), LATER_NIGHT.run_id, "1n2g")
    history = store.history().set_index(["run_id", "case_key"]).loc[(LATER_NIGHT.run_id, key("1n2g"))]
    assert summary["speedup"] == pytest.approx(200.5 / 101.0) == history["speedup"]
    assert summary["baseline_run_id"] == history["baseline_run_id"] == NIGHT.run_id
    assert summary["baseline_of"] == history["baseline_of"] == "latest nightly"
    assert night_of(summary["baseline_night"]) == night_of(history["baseline_night"]) == "2026-01-01"
    crowded = store.history().set_index(["run_id", "case_key"]).loc[(NIGHT.run_id, key("2n2g"))]
    assert pd.isna(crowded["speedup"]) and crowded["unreliable_reason"] == CROWDED
