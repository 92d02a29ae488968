"""Tests of dlperf_core.storage on SQLite and PostgreSQL: migrations, idempotent upserts, the
case_summary view against a pandas computation, constraints."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from dataclasses import asdict, replace
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy.exc import IntegrityError

from dlperf_core.noise import unreliable_reason
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
VIEWS = ("fabric_history", "fabric_summary", "open_regressions", "nightly_history", "latest_summary", "case_summary")
TABLES = (
    "fabric_probe_sizes",
    "fabric_probes",
    "max_batch_searches",
    "regressions",
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
        assert current_revision(db_url) == head_revision() == "0010"
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
        assert current_revision(engine) == "0010"
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


def expected_summary(records: list[ResultRecord]) -> pd.DataFrame:
    """The case_summary figures computed with pandas."""
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
        unreliable_reason(cv, speedup, gpus) for cv, speedup, gpus in zip(out["cv"], out["speedup"], out["total_gpus"])
    ]
    out["unreliable"] = out["unreliable_reason"].notna()
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


# --------------------------------------------------------------------------- configuration


def test_default_db_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLPERF_DB_URL", "postgresql+psycopg2://u@h/db")
    assert default_db_url() == "postgresql+psycopg2://u@h/db"
    monkeypatch.delenv("DLPERF_DB_URL")
    monkeypatch.setenv("DLPERF_HOME", str(tmp_path))  # not the cwd: see tests/test_home.py
    url = default_db_url()
    assert url == f"sqlite:///{tmp_path}/.dlperf/dlperf.db"
    assert (tmp_path / ".dlperf").is_dir()
