"""Tests of dlperf_core.storage on SQLite and PostgreSQL: migrations, idempotent upserts, the
case_summary view against a pandas computation, constraints."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy.exc import IntegrityError

from dlperf_core.measure.noise import unreliable_reason
from dlperf_core.storage import (
    CASE_SUMMARY_COLUMNS,
    Base,
    ResultRecord,
    ResultStore,
    current_revision,
    default_db_url,
    downgrade,
    head_revision,
    upgrade,
)
from dlperf_core.storage.migrate import VERSION_TABLE
from helpers import T0, result_record, run_record

CASE_KEYS = [
    "dag_id",
    "run_id",
    "case_key",
    "framework",
    "model",
    "precision",
    "batch_size_per_device",
    "variant",
    "compile",
    "nodes",
    "gpus_per_node",
]
BASELINE_KEYS = ["dag_id", "run_id", "framework", "model", "precision", "batch_size_per_device", "variant"]
# every view and table of the head schema, in an order that drops them one after the other
VIEWS = (
    "mlperf_scores",
    "fabric_history",
    "fabric_summary",
    "open_regressions",
    "nightly_history",
    "latest_nightly_summary",
    "latest_summary",
    "case_summary",
)
TABLES = (
    "mlperf_official_scores",
    "mlperf_runs",
    "mlperf_systems",
    "fabric_probe_sizes",
    "fabric_probes",
    "max_batch_searches",
    "regressions",
    "gpu_health_snapshots",
    "results",
    "environments",
    "benchmark_runs",
    "dlperf_alembic_version",
)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """An empty database URL on each dialect; left empty again afterwards (PG is session-wide)."""
    url: str = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")
    yield url
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            for view in VIEWS:
                conn.exec_driver_sql(f"DROP VIEW IF EXISTS {view}")
            for table in TABLES:
                conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
    finally:
        engine.dispose()


@pytest.fixture
def store(db_url: str) -> Iterator[ResultStore]:
    """A ResultStore on a database at the head schema."""
    result_store = ResultStore(db_url)
    result_store.ensure_schema()
    yield result_store
    result_store.dispose()


def count(store: ResultStore, table: str) -> int:
    """Row count of ``table``."""
    with store.engine.connect() as conn:
        return int(conn.scalar(sa.text(f"SELECT COUNT(*) FROM {table}")))


# --------------------------------------------------------------------------- migrations


def test_migrations_up_and_down(db_url: str) -> None:
    engine = ResultStore(db_url).engine
    try:
        assert current_revision(engine) is None
        upgrade(db_url)
        upgrade(db_url)  # idempotent
        assert current_revision(db_url) == head_revision() == "0014"
        inspector = sa.inspect(engine)
        assert {"benchmark_runs", "results"} <= set(inspector.get_table_names())
        assert "case_summary" in inspector.get_view_names()
        assert "alembic_version" not in inspector.get_table_names()

        downgrade(db_url)
        assert current_revision(engine) is None
        inspector = sa.inspect(engine)
        assert not {"benchmark_runs", "results"} & set(inspector.get_table_names())
        assert "case_summary" not in inspector.get_view_names()

        upgrade(engine)  # and back up again, through an Engine
        assert current_revision(engine) == "0014"
    finally:
        engine.dispose()


def test_models_match_migration(store: ResultStore) -> None:
    with store.engine.connect() as conn:
        opts = {"compare_type": True, "version_table": VERSION_TABLE}
        context = MigrationContext.configure(conn, opts=opts)
        assert compare_metadata(context, Base.metadata) == []


def test_concurrent_ensure_schema(db_url: str) -> None:
    errors: list[BaseException] = []

    def worker() -> None:
        local = ResultStore(db_url)
        try:
            local.ensure_schema()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            local.dispose()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert current_revision(db_url) == head_revision()


# --------------------------------------------------------------------------- writes


def test_upsert_run_is_idempotent(store: ResultStore) -> None:
    first = store.upsert_run(run_record())
    second = store.upsert_run(run_record(suite="full", trigger="manual"))
    assert first == second
    assert count(store, "benchmark_runs") == 1
    with store.engine.connect() as conn:
        suite, trigger, status = conn.execute(sa.text("SELECT suite, trigger, status FROM benchmark_runs")).one()
    assert (suite, trigger, status) == ("full", "manual", "running")

    assert store.finish_run("dag", "r1", "success", T0 + timedelta(hours=1))
    assert not store.finish_run("dag", "nope", "failed")
    with store.engine.connect() as conn:
        status, finished = conn.execute(sa.text("SELECT status, finished_at FROM benchmark_runs")).one()
    assert status == "success"
    assert finished is not None


def test_upsert_result_is_idempotent(store: ResultStore) -> None:
    first_id = store.upsert_result(result_record(throughput=100.0))
    before = store.results()
    second_id = store.upsert_result(result_record(throughput=120.0, reported_throughput=118.5, iterations=50))
    after = store.results()

    assert first_id == second_id
    assert len(after) == 1
    row = after.iloc[0]
    assert row["throughput"] == 120.0
    assert row["reported_throughput"] == 118.5
    assert row["iterations"] == 50
    assert row["created_at"] == before.iloc[0]["created_at"]
    assert row["updated_at"] >= before.iloc[0]["updated_at"]
    assert row["started_at"] == pd.Timestamp(T0)
    # the benchmark run was created as a placeholder, once
    assert count(store, "benchmark_runs") == 1
    assert row["benchmark_run_id"] == store.upsert_run(run_record())


def test_upsert_result_creates_described_run_but_keeps_existing(store: ResultStore) -> None:
    described = run_record(run_id="r2", suite="nightly", trigger="scheduled")
    store.upsert_result(result_record(run_id="r2", benchmark_run=described))
    store.upsert_result(result_record(run_id="r2", repeat=1, benchmark_run=replace(described, suite="other")))
    with store.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT run_id, suite, trigger FROM benchmark_runs")).all()
    assert [tuple(r) for r in rows] == [("r2", "nightly", "scheduled")]
    with pytest.raises(ValueError):
        result_record(run_id="r3", benchmark_run=described)


@pytest.mark.parametrize("throughput", [0.0, -1.0, None])
def test_check_constraint_refuses_ok_without_positive_throughput(store: ResultStore, throughput: float | None) -> None:
    with pytest.raises(IntegrityError):
        store.upsert_result(result_record(throughput=throughput))
    assert count(store, "results") == 0
    # a failed repeat needs no throughput
    store.upsert_result(result_record(status="failed", throughput=throughput, reason="oom"))
    assert count(store, "results") == 1


def test_check_constraint_in_raw_sql(store: ResultStore) -> None:
    run_pk = store.upsert_run(run_record())
    insert = sa.text(
        "INSERT INTO results (benchmark_run_id, dag_id, run_id, case_key, framework, model, "
        '"precision", batch_size_per_device, nodes, gpus_per_node, "repeat", status, '
        "throughput, started_at) VALUES (:pk, 'dag', 'r1', 'k', 'pt', 'm', 'fp32', 8, 1, 1, 0, "
        ":status, :throughput, :started)"
    )
    with pytest.raises(IntegrityError), store.engine.begin() as conn:
        conn.execute(insert, {"pk": run_pk, "status": "ok", "throughput": 0.0, "started": T0})
    with store.engine.begin() as conn:
        conn.execute(insert, {"pk": run_pk, "status": "ok", "throughput": 5.0, "started": T0})
    assert count(store, "results") == 1


# --------------------------------------------------------------------------- the view


def synthetic_results(seed: int = 7) -> list[ResultRecord]:
    """Results of two runs of one DAG and one run of another: varied repeat counts (odd and
    even), failed repeats, a failed-only case, a model without a 1n1g case and a 1n1g case that
    only failed."""
    rng = random.Random(seed)
    shapes = [(1, 1), (1, 2), (1, 4), (2, 4)]
    records: list[ResultRecord] = []

    def add(
        dag: str,
        run: str,
        fw: str,
        model: str,
        prec: str,
        bs: int,
        nodes: int,
        gpn: int,
        n_ok: int,
        n_failed: int,
        variant: str = "",
    ) -> None:
        key = f"{fw}/{model}/{prec}/b{bs}/{nodes}n{gpn}g{variant}"
        statuses = ["ok"] * n_ok + ["failed"] * n_failed
        rng.shuffle(statuses)
        for repeat, status in enumerate(statuses):
            ok = status == "ok"
            throughput = round(rng.uniform(50, 500) * nodes * gpn, 3) if ok else None
            gpu = ok and prec == "amp" and repeat != 1  # some repeats on a GPU of the peak table, some not
            records.append(
                result_record(
                    case_key=key,
                    repeat=repeat,
                    dag_id=dag,
                    run_id=run,
                    framework=fw,
                    model=model,
                    precision=prec,
                    batch_size_per_device=bs,
                    nodes=nodes,
                    gpus_per_node=gpn,
                    status=status,
                    throughput=throughput,
                    reason=None if ok else "nccl timeout",
                    compile="+compile" in variant,
                    mfu=round(rng.uniform(0.05, 0.6), 4) if gpu else None,
                    energy_per_sample_j=round(rng.uniform(0.05, 2.0), 4) if gpu else None,
                )
            )

    for dag, run in [("dag", "r1"), ("dag", "r2"), ("other", "r1")]:
        for fw in ("pt", "tf"):
            for prec in ("fp32", "amp"):
                for nodes, gpn in shapes:
                    add(dag, run, fw, "resnet50", prec, 8, nodes, gpn, rng.randint(1, 5), rng.choice([0, 0, 1]))
        add(dag, run, "pt", "bert", "fp32", 16, 1, 2, 0, 3)  # failed-only case
        add(dag, run, "pt", "bert", "fp32", 16, 1, 1, 4, 0)
        add(dag, run, "pt", "gpt", "fp16", 4, 1, 8, 3, 0)  # no 1n1g at all
        add(dag, run, "pt", "gpt", "fp16", 4, 2, 8, 2, 1)
        add(dag, run, "tf", "vit", "fp32", 32, 1, 1, 0, 2)  # 1n1g failed only
        add(dag, run, "tf", "vit", "fp32", 32, 1, 4, 3, 0)
        for nodes, gpn in shapes:  # the same configurations compiled: a variant with its own baseline
            add(dag, run, "pt", "resnet50", "amp", 8, nodes, gpn, rng.randint(1, 4), 0, variant="+compile")
    return records


def expected_summary(
    records: list[ResultRecord], runs: dict[tuple[str, str], tuple[datetime, str]] | None = None
) -> pd.DataFrame:
    """The case_summary figures computed with pandas; ``runs``: each run's start and trigger (default: none is
    scheduled), for the baselines of runs without their own 1n1g (the latest nightly one) and their nights."""
    frame = pd.DataFrame([{k: v for k, v in asdict(r).items() if k != "benchmark_run"} for r in records])
    cases = frame.groupby(CASE_KEYS, as_index=False).agg(
        n=("status", lambda s: int((s == "ok").sum())),
        n_failed=("status", lambda s: int((s == "failed").sum())),
    )
    ok = frame[frame["status"] == "ok"]
    stats = (
        ok.groupby(CASE_KEYS)["throughput"]
        .agg(
            median_throughput="median",
            mean_throughput="mean",
            min_throughput="min",
            max_throughput="max",
            stdev_throughput="std",
        )
        .reset_index()
    )
    memory = ok.groupby(CASE_KEYS)["gpu_memory_peak_mb"].max().rename("gpu_memory_peak_mb")
    efficiency = ok.groupby(CASE_KEYS)[["mfu", "energy_per_sample_j"]].median()  # NULLs left out
    environment = frame.groupby(CASE_KEYS)["environment_id"].max().rename("environment_id")
    out = cases.merge(stats, on=CASE_KEYS, how="left")
    out = out.merge(memory.reset_index(), on=CASE_KEYS, how="left")
    out = out.merge(environment.reset_index(), on=CASE_KEYS, how="left")
    out = out.merge(efficiency.reset_index(), on=CASE_KEYS, how="left")
    out["cv"] = out["stdev_throughput"] / out["mean_throughput"]
    out["environment_id"] = out["environment_id"].astype("Int64")
    out["total_gpus"] = out["nodes"] * out["gpus_per_node"]
    single = out[(out["nodes"] == 1) & (out["gpus_per_node"] == 1)]
    baseline = single[BASELINE_KEYS + ["median_throughput"]].rename(columns={"median_throughput": "baseline"})
    out = out.merge(baseline, on=BASELINE_KEYS, how="left")
    out["speedup"] = out["median_throughput"] / out["baseline"]
    out["scaling_efficiency"] = out["speedup"] / out["total_gpus"]
    out["unreliable_reason"] = [
        unreliable_reason(cv, speedup, gpus, ok_repeats=n)
        for cv, speedup, gpus, n in zip(out["cv"], out["speedup"], out["total_gpus"], out["n"])
    ]
    out["unreliable"] = out["unreliable_reason"].notna()
    out["single_repeat"] = out["n"] == 1
    out["oversubscribed"] = False
    out["throttled"] = False  # migration 0013: none of these was throttled
    runs = runs or {}
    nights = single.assign(start=[runs.get((d, r), (None, ""))[0] for d, r in zip(single["dag_id"], single["run_id"])])
    nights = nights[
        [runs.get((d, r), (None, ""))[1] == "scheduled" for d, r in zip(nights["dag_id"], nights["run_id"])]
    ]
    nights = nights[nights["median_throughput"].notna()]
    same = [c for c in BASELINE_KEYS if c not in ("dag_id", "run_id")]
    baseline_of, baseline_dag, baseline_run, baseline_night = [], [], [], []
    for i, row in out.iterrows():
        start = runs.get((row["dag_id"], row["run_id"]), (None, ""))[0]
        if pd.notna(row["baseline"]):
            found = (row["dag_id"], row["run_id"], "this run")
        else:
            mine = nights[(nights[same] == row[same]).all(axis=1)] if start is not None else nights.iloc[0:0]
            mine = mine[mine["start"] <= start] if len(mine) else mine
            if len(mine):
                latest = mine.sort_values("start").iloc[-1]
                found = (latest["dag_id"], latest["run_id"], "latest nightly")
                out.loc[i, "speedup"] = row["median_throughput"] / latest["median_throughput"]
            else:
                found = (None, None, None)
        baseline_dag.append(found[0])
        baseline_run.append(found[1])
        baseline_of.append(found[2])
        trigger_start = runs.get((found[0], found[1])) if found[0] else None
        scheduled = trigger_start is not None and trigger_start[1] == "scheduled"
        baseline_night.append(trigger_start[0].astimezone(UTC).date() if scheduled else None)
    out["scaling_efficiency"] = out["speedup"] / out["total_gpus"]
    out["unreliable_reason"] = [
        unreliable_reason(cv, speedup, gpus, ok_repeats=n)
        for cv, speedup, gpus, n in zip(out["cv"], out["speedup"], out["total_gpus"], out["n"])
    ]
    out["unreliable"] = out["unreliable_reason"].notna()
    out["baseline_dag_id"], out["baseline_run_id"] = baseline_dag, baseline_run
    out["baseline_of"], out["baseline_night"] = baseline_of, baseline_night
    return out[list(CASE_SUMMARY_COLUMNS)]


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(CASE_KEYS).reset_index(drop=True)


def test_summary_matches_pandas(store: ResultStore) -> None:
    records = synthetic_results()
    ids = store.upsert_results(records)
    assert len(set(ids)) == len(records) == count(store, "results")
    got = store.summary()
    assert list(got.columns) == list(CASE_SUMMARY_COLUMNS)
    want = expected_summary(records)
    assert len(got) == len(want)
    pd.testing.assert_frame_equal(_sorted(got), _sorted(want), check_dtype=False, check_exact=False, rtol=1e-9)

    # spot checks of the special cases
    def case(model: str, nodes: int, gpn: int) -> pd.Series:
        sel = got[
            (got.dag_id == "dag")
            & (got.run_id == "r1")
            & (got.model == model)
            & (got.nodes == nodes)
            & (got.gpus_per_node == gpn)
        ]
        assert len(sel) == 1
        return sel.iloc[0]

    failed_only = case("bert", 1, 2)
    assert (failed_only["n"], failed_only["n_failed"]) == (0, 3)
    assert np.isnan(failed_only["median_throughput"]) and np.isnan(failed_only["speedup"])
    assert np.isnan(case("gpt", 2, 8)["speedup"])
    assert np.isnan(case("vit", 1, 4)["speedup"])
    assert case("bert", 1, 1)["speedup"] == pytest.approx(1.0)
    assert case("bert", 1, 1)["scaling_efficiency"] == pytest.approx(1.0)


def test_summary_median_even_and_odd(store: ResultStore) -> None:
    for repeat, value in enumerate([4.0, 1.0, 3.0, 2.0]):  # even: (2 + 3) / 2
        store.upsert_result(result_record(case_key="a", repeat=repeat, throughput=value))
    for repeat, value in enumerate([9.0, 1.0, 5.0]):  # odd: 5
        store.upsert_result(result_record(case_key="b", repeat=repeat, throughput=value, gpus_per_node=2))
    got = store.summary().set_index("case_key")
    assert got.loc["a", "median_throughput"] == pytest.approx(2.5)
    assert got.loc["b", "median_throughput"] == pytest.approx(5.0)
    assert got.loc["b", "speedup"] == pytest.approx(2.0)
    assert got.loc["b", "scaling_efficiency"] == pytest.approx(1.0)


def test_summary_filters_and_latest(store: ResultStore) -> None:
    assert store.latest_run_id() is None
    assert store.summary(latest=True).empty
    store.upsert_run(run_record(run_id="r1", started_at=T0))
    store.upsert_run(run_record(run_id="r2", started_at=T0 + timedelta(days=1)))
    store.upsert_result(result_record(run_id="r1"))
    store.upsert_result(result_record(run_id="r2", throughput=7.0))
    store.upsert_result(result_record(run_id="r2", case_key="x", model="bert", throughput=8.0))

    assert store.latest_run_id() == "r2"
    assert set(store.summary()["run_id"]) == {"r1", "r2"}
    assert list(store.summary(run_id="r1")["run_id"]) == ["r1"]
    latest = store.summary(latest=True)
    assert set(latest["run_id"]) == {"r2"} and len(latest) == 2
    assert store.summary(dag_id="nope").empty
    assert len(store.results(run_id="r2")) == 2
    with pytest.raises(ValueError):
        store.summary(run_id="r1", latest=True)


# --------------------------------------------------------------------------- typed rows


ROW_SOURCES = {  # row type -> the table or view it is a row of (and the columns it leaves out)
    "BenchmarkRunRow": ("benchmark_runs", ()),
    "ResultRow": ("results", ()),
    "EnvironmentRow": ("environments", ("data",)),
    "RegressionRow": ("regressions", ()),
    "MaxBatchSearchRow": ("max_batch_searches", ()),
    "FabricRow": ("fabric_probes", ()),
    "CaseSummaryRow": ("case_summary", ()),
    "HistoryRow": ("nightly_history", ()),
    "FabricSummaryRow": ("fabric_summary", ()),
    "FabricHistoryRow": ("fabric_history", ()),
    "MlperfScoreRow": ("mlperf_scores", ()),
}


def test_each_row_type_has_the_columns_of_its_table_or_view() -> None:
    from dataclasses import fields

    from dlperf_core.storage import models, rows

    sources = {t.name: t for t in (*Base.metadata.tables.values(), *models.view_metadata.tables.values())}
    for name, (source, left_out) in ROW_SOURCES.items():
        columns = [c.name for c in sources[source].columns if c.name not in left_out]
        assert sorted(f.name for f in fields(getattr(rows, name))) == sorted(columns), name


def test_row_of_converts_by_the_field_types() -> None:
    from decimal import Decimal

    from dlperf_core.storage.rows import BenchmarkRunRow, FabricSummaryRow, row_of

    values = dict(
        id=Decimal(3),
        dag_id="dag",
        run_id="r1",
        suite="smoke",
        trigger="cli",
        runtime="local",
        started_at="2026-01-01 02:00:00.000000",  # SQLite's text, naive: taken as UTC
        finished_at=None,
        status="running",
        triggered_by=None,
        report_path=None,
        created_at=T0.astimezone(timezone(timedelta(hours=2))),  # another offset: converted to UTC
        extra="left out",
    )
    info = row_of(BenchmarkRunRow, values)
    assert info.id == 3 and type(info.id) is int and info.finished_at is None
    assert info.started_at == datetime(2026, 1, 1, 2, tzinfo=UTC) and info.started_at.tzinfo is UTC
    assert info.created_at == T0 and info.created_at.tzinfo is UTC
    with pytest.raises(ValueError, match="column dag_id is NULL"):
        row_of(BenchmarkRunRow, {**values, "dag_id": None})
    with pytest.raises(TypeError, match="column id holds 'three', not a number"):
        row_of(BenchmarkRunRow, {**values, "id": "three"})
    figure = dict(dag_id="d", run_id="r", probe_key="p", nodes=1, gpus_per_node=8, total_gpus=8, size_bytes=1 << 30)
    row = row_of(
        FabricSummaryRow,
        {**figure, "n": 2, "busbw_gbs": Decimal("1.5"), "algbw_gbs": 1, "time_us": None, "environment_id": None},
    )
    assert (row.busbw_gbs, row.algbw_gbs, row.time_us) == (1.5, 1.0, None) and type(row.algbw_gbs) is float


def test_run_info_is_typed(store: ResultStore) -> None:
    from dlperf_core.storage.rows import BenchmarkRunRow

    assert store.run_info("dag", "r1") is None
    store.upsert_run(run_record(triggered_by="cli"))
    info = store.run_info("dag", "r1")
    assert isinstance(info, BenchmarkRunRow) and (info.dag_id, info.run_id, info.status) == ("dag", "r1", "running")
    assert info.started_at == T0 and info.started_at.tzinfo is not None and info.started_at.utcoffset() == timedelta(0)
    assert info.finished_at is None and info.report_path is None and info.triggered_by == "cli"
    assert isinstance(info.id, int) and info.created_at.tzinfo is not None
    store.finish_run("dag", "r1", "success", T0 + timedelta(hours=1))
    done = store.run_info("dag", "r1")
    assert done is not None and (done.status, done.finished_at) == ("success", T0 + timedelta(hours=1))


def test_result_rows_have_none_for_null_and_the_frames_values(store: ResultStore) -> None:
    from dlperf_core.storage.rows import ResultRow

    store.upsert_result(result_record(iterations=50, window_first=10, window_last=59, configuration={"a": [1, 2]}))
    store.upsert_result(result_record(repeat=1, status="failed", reason="oom", throughput=None))
    store.upsert_result(result_record(run_id="r2", dag_id="other"))
    rows = store.result_rows(run_id="r1", dag_id="dag")
    assert [type(r) for r in rows] == [ResultRow, ResultRow] and [r.repeat for r in rows] == [0, 1]
    ok, failed = rows
    assert (ok.throughput, ok.iterations, ok.window_first, ok.configuration) == (100.0, 50, 10, {"a": [1, 2]})
    assert type(ok.throughput) is float and type(ok.iterations) is int and ok.compile is False
    assert ok.window_fitted is False and ok.variant == "" and ok.started_at == T0
    for null in ("reason", "reported_throughput", "environment_id", "gpu_memory_peak_mb", "mfu", "launch_spec"):
        assert getattr(ok, null) is None, null  # NULL: None, never NaN or NA
    assert (failed.status, failed.reason, failed.throughput, failed.iterations) == ("failed", "oom", None, None)
    frame = store.results(run_id="r1", dag_id="dag")
    for row, (_, want) in zip(rows, frame.iterrows(), strict=True):
        for name in ("id", "case_key", "status", "throughput", "iterations", "benchmark_run_id"):
            value = want[name]
            assert getattr(row, name) == (None if pd.isna(value) else value), name
        assert row.started_at == want["started_at"].to_pydatetime() and row.updated_at.tzinfo is not None
    assert [r.dag_id for r in store.result_rows(run_id="r2")] == ["other"]
    assert len(store.result_rows()) == 3 and store.result_rows(run_id="nope") == []


def test_summary_rows_are_the_summary_with_none_for_nan(store: ResultStore) -> None:
    from dlperf_core.storage.rows import CaseSummaryRow

    for repeat, value in enumerate([4.0, 1.0, 3.0]):
        store.upsert_result(result_record(case_key="a", repeat=repeat, throughput=value))
    store.upsert_result(result_record(case_key="b", throughput=9.0, gpus_per_node=2))  # one repeat: no spread
    store.upsert_result(result_record(case_key="c", status="failed", reason="boom", throughput=None, nodes=2))
    rows = store.summary_rows(run_id="r1")
    frame = store.summary(run_id="r1")
    assert [r.case_key for r in rows] == list(frame["case_key"]) and all(type(r) is CaseSummaryRow for r in rows)
    for row, (_, want) in zip(rows, frame.iterrows(), strict=True):
        for column in CASE_SUMMARY_COLUMNS:
            value, got = want[column], getattr(row, column)
            if pd.isna(value):
                assert got is None, (row.case_key, column)
            else:
                assert got == pytest.approx(value), (row.case_key, column)
    a, b, c = sorted(rows, key=lambda r: r.case_key)
    assert (a.n, a.median_throughput, type(a.total_gpus), a.unreliable) == (3, 3.0, int, True)
    assert b.stdev_throughput is None and b.cv is None and b.speedup == pytest.approx(3.0)
    assert (c.n, c.n_failed, c.median_throughput, c.unreliable_reason) == (0, 1, None, None)
    assert a.configuration.topology == (1, 1) and b.configuration.topology == (1, 2)
    assert store.summary_rows(run_id="nope") == []


def test_environment_search_and_fabric_rows(store: ResultStore) -> None:
    from dlperf_core.cluster.environment import INFRASTRUCTURE_FIELDS, capture_local
    from dlperf_core.measure.maxbatch import Trial
    from dlperf_core.storage import FabricRecord, FabricSizeRecord, MaxBatchSearchRecord
    from dlperf_core.storage.rows import EnvironmentRow, FabricRow, MaxBatchSearchRow

    probe = '@@dlperf:hostname@@\nnode0\n@@dlperf:python@@\n{"frameworks": {"torch": "2.5.0"}}\n'
    env = capture_local("pytorch_reference", probe)
    env_id = store.upsert_environment(env, T0)
    (row,) = store.environment_rows([env_id])
    assert isinstance(row, EnvironmentRow) and (row.id, row.content_hash) == (env_id, env.content_hash)
    assert row.framework_version == "2.5.0" and row.gpu_count == env.gpu_count and row.captured_at == T0
    assert store.environment_infrastructure([env_id]) == {env_id: env.infrastructure()}  # what regressions compare
    assert set(env.infrastructure()) == set(INFRASTRUCTURE_FIELDS)
    assert store.environment_rows([env_id + 1]) == [] and len(store.environment_rows()) == 1

    tried = (Trial(32, "ok", None, 10.5), Trial(64, "failed", "CUDA out of memory"))
    search = MaxBatchSearchRecord(
        dag_id="dag",
        run_id="r1",
        search_key="pt/resnet50/fp32/1n1g",
        framework="pt",
        model="resnet50",
        precision="fp32",
        nodes=1,
        gpus_per_node=1,
        start=32,
        step=32,
        limit=64,
        status="found",
        max_batch=32,
        first_oom_batch=64,
        reason=None,
        probes=tried,
        started_at=T0,
        finished_at=T0 + timedelta(minutes=3),
    )
    store.upsert_max_batch_search(search)
    (found,) = store.search_rows(run_id="r1", dag_id="dag")
    assert isinstance(found, MaxBatchSearchRow) and (found.status, found.max_batch, found.reason) == ("found", 32, None)
    assert found.environment_id is None and found.finished_at == T0 + timedelta(minutes=3)
    assert tuple(Trial.from_json(p) for p in found.probes) == tried  # the JSON column, read back
    assert store.max_batch_searches(run_id="r1").iloc[0]["probes"] == found.probes  # the frame holds the same

    store.upsert_fabric(
        FabricRecord(
            dag_id="dag",
            run_id="r1",
            probe_key="allreduce_probe/allreduce/fp32/b1/1n1g",
            nodes=1,
            gpus_per_node=1,
            repeat=0,
            status="ok",
            ranks=1,
            started_at=T0,
            sizes=(FabricSizeRecord(1024, 5.0, 0.2, 0.0),),
        )
    )
    (measured,) = store.fabric_rows(run_id="r1")
    assert isinstance(measured, FabricRow) and (measured.repeat, measured.ranks, measured.avg_busbw_gbs) == (0, 1, None)
    assert len(store.fabric_benchmarks(run_id="r1")) == 1
    (size,) = store.fabric_summary_rows(run_id="r1")
    assert (size.size_bytes, size.n, size.busbw_gbs, size.time_us) == (1024, 1, 0.0, 5.0)
    assert store.fabric_history_rows() == []  # a cli run is no night


# --------------------------------------------------------------------------- configuration


def test_default_db_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLPERF_DB_URL", "postgresql+psycopg2://u@h/db")
    assert default_db_url() == "postgresql+psycopg2://u@h/db"
    monkeypatch.delenv("DLPERF_DB_URL")
    monkeypatch.setenv("DLPERF_HOME", str(tmp_path))  # not the cwd: see tests/core/test_home.py
    url = default_db_url()
    assert url == f"sqlite:///{tmp_path}/.dlperf/dlperf.db"
    assert (tmp_path / ".dlperf").is_dir()


def test_run_rows_newest_first_and_the_runs_frame(store: ResultStore) -> None:
    from dlperf_core.storage.rows import BenchmarkRunRow

    assert store.run_rows() == [] and store.runs().empty
    store.upsert_run(run_record(run_id="r1"))
    store.upsert_run(run_record(run_id="r2", started_at=T0 + timedelta(hours=1)))
    store.upsert_run(run_record(dag_id="other", run_id="r1", started_at=T0 + timedelta(hours=2)))
    found = store.run_rows()
    assert all(isinstance(r, BenchmarkRunRow) for r in found)
    assert [(r.dag_id, r.run_id) for r in found] == [("other", "r1"), ("dag", "r2"), ("dag", "r1")]
    assert [r.dag_id for r in store.run_rows(run_id="r1")] == ["other", "dag"]
    assert [r.run_id for r in store.run_rows(dag_id="dag", limit=1)] == ["r2"]
    frame = store.runs(limit=2)
    assert list(frame.columns) == [
        "dag_id",
        "run_id",
        "suite",
        "trigger",
        "runtime",
        "status",
        "started_at",
        "finished_at",
    ]
    assert list(frame["run_id"]) == ["r1", "r2"] and list(frame["dag_id"]) == ["other", "dag"]
