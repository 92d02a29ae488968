"""Schema 0002 on SQLite and PostgreSQL: migrations up and down with data kept, the views' figures equal
a pandas computation on the same rows, and the read-only analyst role cannot write."""

from __future__ import annotations

import random
import subprocess
import uuid
from dataclasses import replace
from datetime import date, timedelta

import pandas as pd
import pytest
import sqlalchemy as sa
from test_storage import CASE_KEYS, TABLES, VIEWS, expected_summary, synthetic_results

from dlperf_core.cluster.environment import capture_local
from dlperf_core.measure.regression import Verdict
from dlperf_core.storage import (
    CASE_SUMMARY_COLUMNS,
    CONFIGURATION_COLUMNS,
    ResultStore,
    current_revision,
    downgrade,
    head_revision,
    upgrade,
)
from dlperf_core.storage.rows import Configuration, HistoryRow, RegressionRow
from helpers import DLPERF, REPO, T0, cli_env, run_record

PROBE = '@@dlperf:hostname@@\n{host}\n@@dlperf:python@@\n{{"frameworks": {{"torch": "2.5.0"}}}}\n'


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request):
    url = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")
    result_store = ResultStore(url)
    result_store.ensure_schema()
    yield result_store
    result_store.dispose()


def runs_and_records(store: ResultStore):
    """synthetic_results() spread over runs with start times and triggers, two environments and GPU
    memory peaks; the runs are stored first."""
    envs = [store.upsert_environment(capture_local("pytorch_reference", PROBE.format(host=h))) for h in "ab"]
    starts = {("dag", "r1"): (0, "scheduled"), ("dag", "r2"): (1, "scheduled"), ("other", "r1"): (2, "manual")}
    rng = random.Random(3)
    for (dag, run), (day, trigger) in starts.items():
        store.upsert_run(run_record(run_id=run, dag_id=dag, trigger=trigger, started_at=T0 + timedelta(days=day)))
    records = []
    for r in synthetic_results():
        day = starts[(r.dag_id, r.run_id)][0]
        records.append(
            replace(
                r,
                environment_id=envs[day % 2],
                started_at=T0 + timedelta(days=day, minutes=r.repeat),
                gpu_memory_peak_mb=round(rng.uniform(1000, 80000), 1) if r.status == "ok" else None,
            )
        )
    # a configuration measured only in the first run: its latest summary is from there
    records.append(replace(records[0], case_key="pt/only/fp32/b8/1n1g", model="only", repeat=0))
    store.upsert_results(records)
    return records, starts


def frame_of(records) -> pd.DataFrame:
    return pd.DataFrame([{k: v for k, v in vars(r).items() if k != "benchmark_run"} for r in records])


def test_case_summary_with_stdev_cv_memory_and_environment(store):
    records, starts = runs_and_records(store)
    runs = {run: (T0 + timedelta(days=day), trigger) for run, (day, trigger) in starts.items()}
    got = store.summary().sort_values(CASE_KEYS).reset_index(drop=True)
    want = expected_summary(records, runs).sort_values(CASE_KEYS).reset_index(drop=True)
    assert list(got.columns) == list(CASE_SUMMARY_COLUMNS)
    pd.testing.assert_frame_equal(got, want, check_dtype=False, check_exact=False, rtol=1e-9)
    assert got["stdev_throughput"].notna().sum() > 10 and got["environment_id"].notna().all()


def test_latest_summary_is_the_newest_run_per_configuration(store):
    records, starts = runs_and_records(store)
    frame = frame_of(records)
    newest = (
        frame.sort_values(["started_at"]).groupby(list(CONFIGURATION_COLUMNS)).tail(1)[["dag_id", "run_id", "case_key"]]
    )
    runs = {run: (T0 + timedelta(days=day), trigger) for run, (day, trigger) in starts.items()}
    want = expected_summary(records, runs).merge(newest, on=["dag_id", "run_id", "case_key"])
    want["started_at"] = [T0 + timedelta(days=starts[(d, r)][0]) for d, r in zip(want["dag_id"], want["run_id"])]
    want["trigger"] = [starts[(d, r)][1] for d, r in zip(want["dag_id"], want["run_id"])]
    got = store.latest_summary()
    assert len(got) == len(want) == frame.groupby(list(CONFIGURATION_COLUMNS)).ngroups
    key = [*CONFIGURATION_COLUMNS]
    got, want = (f.sort_values(key).reset_index(drop=True) for f in (got, want))
    want["started_at"] = pd.to_datetime(want["started_at"], utc=True).astype("datetime64[us, UTC]")
    pd.testing.assert_frame_equal(got, want[list(got.columns)], check_dtype=False, check_exact=False, rtol=1e-9)
    only = got[got["model"] == "only"].iloc[0]
    assert (only["dag_id"], only["run_id"]) == ("dag", "r1")  # measured once, long ago: still shown
    assert set(got[got["model"] != "only"]["run_id"]) == {"r1"} and set(got["dag_id"]) >= {"other"}
    # the latest nightly: the newest scheduled run of each configuration ("other"/r1 is a manual run)
    nightly = store.latest_summary(nightly=True)
    assert set(nightly["trigger"]) == {"scheduled"} and set(zip(nightly["dag_id"], nightly["run_id"])) <= {
        ("dag", "r1"),
        ("dag", "r2"),
    }
    assert len(nightly) == frame[frame["dag_id"] == "dag"].groupby(list(CONFIGURATION_COLUMNS)).ngroups


def test_nightly_history_has_scheduled_runs_only(store):
    records, starts = runs_and_records(store)
    summary = expected_summary(records)
    scheduled = [k for k, (_, trigger) in starts.items() if trigger == "scheduled"]
    want = summary[[(d, r) in scheduled for d, r in zip(summary["dag_id"], summary["run_id"])]].copy()
    want["night"] = [(T0 + timedelta(days=starts[(d, r)][0])).date() for d, r in zip(want["dag_id"], want["run_id"])]
    got = store.history(nights=None)
    assert set(got["run_id"]) == {"r1", "r2"} and set(got["dag_id"]) == {"dag"}
    assert len(got) == len(want)
    cols = [
        *CONFIGURATION_COLUMNS,
        "case_key",
        "run_id",
        "night",
        "median_throughput",
        "n",
        "n_failed",
        "speedup",
        "environment_id",
    ]
    order = [*CONFIGURATION_COLUMNS, "case_key", "run_id"]
    pd.testing.assert_frame_equal(
        got[cols].sort_values(order).reset_index(drop=True),
        want[cols].sort_values(order).reset_index(drop=True),
        check_dtype=False,
        check_exact=False,
        rtol=1e-9,
    )
    one = store.history(
        framework="pt", model="resnet50", precision="amp", batch=8, nodes=1, gpus_per_node=1, nights=1, variant=""
    )
    assert len(one) == 1 and one.iloc[0]["run_id"] == "r2"  # the last night only
    # the compiled variant of the same configuration is a history of its own
    both = store.history(framework="pt", model="resnet50", precision="amp", batch=8, nodes=1, gpus_per_node=1, nights=1)
    assert sorted(both["variant"]) == ["", "+compile"] and both["compile"].astype(bool).tolist().count(True) == 1
    assert store.history(model="nope").empty

    # typed: one configuration's rows, every night, the frame's values with None for its missing ones
    config = Configuration(
        framework="pt", model="resnet50", precision="amp", batch_size_per_device=8, variant="", nodes=1, gpus_per_node=1
    )
    typed = store.history_rows(config)
    assert [r.run_id for r in typed] == ["r1", "r2"] and all(isinstance(r, HistoryRow) for r in typed)
    assert {r.configuration for r in typed} == {config} and {r.variant for r in typed} == {""}
    frame = got[got["case_key"] == "pt/resnet50/amp/b8/1n1g"]
    for row, (_, want_row) in zip(typed, frame.iterrows(), strict=True):
        assert row.night == want_row["night"] and row.started_at == want_row["started_at"].to_pydatetime()
        assert row.started_at.tzinfo is not None and row.started_at.utcoffset() == timedelta(0)
        for column in ("median_throughput", "speedup", "scaling_efficiency", "mfu", "energy_per_sample_j", "n"):
            value = want_row[column]
            assert getattr(row, column) == (None if pd.isna(value) else pytest.approx(value)), column
        assert isinstance(row.n, int) and isinstance(row.compile, bool) and isinstance(row.environment_id, int)
    variants = store.history_rows(config, any_variant=True)
    assert sorted({r.variant for r in variants}) == ["", "+compile"] and len(variants) == 2 * len(typed)
    assert store.history_rows(config, before=T0 + timedelta(hours=12)) == typed[:1]
    assert store.history_rows(replace(config, model="nope")) == []


def test_open_regressions_view(store):
    runs_and_records(store)
    verdict = Verdict(
        kind="new",
        night=date(2026, 1, 2),
        run_id="r2",
        median_throughput=95.0,
        baseline_median=100.0,
        baseline_mad=0.5,
        baseline_nights=14,
        change_pct=-5.0,
        robust_z=-6.7,
        direction="slower",
        environment_changed=True,
        environment_changes=("driver_version: 1 -> 2",),
    )
    config = Configuration(
        framework="pt", model="resnet50", precision="amp", batch_size_per_device=8, variant="", nodes=1, gpus_per_node=1
    )
    key = "pt/resnet50/amp/b8/1n1g"
    first = store.record_regression("dag", "r2", key, config, verdict)
    assert store.record_regression("dag", "r2", key, config, verdict) == first  # unique per run and case
    second = store.record_regression("dag", "r2", "x", replace(config, nodes=2), verdict)
    opened = store.open_regression(config)
    assert isinstance(opened, RegressionRow) and opened.id == first and opened.case_key == key
    assert (opened.night, opened.environment_changed, opened.environment_changes) == (
        date(2026, 1, 2),
        True,
        "driver_version: 1 -> 2",
    )
    assert opened.configuration == config and opened.closed_at is None and opened.label is None
    assert opened.created_at.tzinfo is not None and opened.last_seen_run_id == "r2"
    assert store.open_regression(replace(config, nodes=2)).id == second
    assert store.close_regression(second, "accepted: new driver")
    assert not store.close_regression(second, "twice")
    assert store.open_regression(replace(config, nodes=2)) is None  # closed
    assert store.open_regression(replace(config, variant="+compile")) is None  # another configuration
    open_ = store.regressions()
    assert list(open_["id"]) == [first] and open_.iloc[0]["environment_changed"]
    assert open_.iloc[0]["run_started_at"] == pd.Timestamp(T0 + timedelta(days=1))
    assert open_.iloc[0]["night"] == date(2026, 1, 2)
    assert len(store.regressions(open_only=False)) == 2 and store.regressions(run_id="r1").empty


def test_migrations_down_to_0001_and_up_keep_the_data(store):
    records, _ = runs_and_records(store)
    before = store.results()
    downgrade(store.engine, "0001")
    assert current_revision(store.engine) == "0001"
    inspector = sa.inspect(store.engine)
    assert "environments" not in inspector.get_table_names()
    assert {"latest_summary", "nightly_history", "open_regressions"}.isdisjoint(inspector.get_view_names())
    with store.engine.connect() as conn:
        n = conn.execute(sa.text("SELECT COUNT(*) FROM case_summary")).scalar_one()
        assert n == len(expected_summary(records))
        assert "environment_id" not in {c["name"] for c in sa.inspect(conn).get_columns("results")}
    upgrade(store.engine)
    assert current_revision(store.engine) == head_revision()
    after = store.results()
    assert len(after) == len(before)
    assert after["environment_id"].isna().all()  # the column came back empty
    pd.testing.assert_series_equal(after["throughput"], before["throughput"])


# --------------------------------------------------------------------------- analyst role


@pytest.mark.postgres
def test_analyst_role_reads_but_cannot_write(pg_url, pg_server, tmp_path):
    base, admin = pg_server
    store = ResultStore(pg_url)
    store.ensure_schema()
    store.upsert_results(synthetic_results()[:10])
    name = f"analyst_{uuid.uuid4().hex[:8]}"
    env = cli_env(tmp_path, pg_url)
    refused = subprocess.run(
        [*DLPERF, "db", "analyst-role", "--name", name], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert refused.returncode == 2 and "DLPERF_ANALYST_PASSWORD" in refused.stderr
    env["DLPERF_ANALYST_PASSWORD"] = "s3cret-" + uuid.uuid4().hex
    made = subprocess.run(
        [*DLPERF, "db", "analyst-role", "--name", name], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert made.returncode == 0, made.stderr
    assert env["DLPERF_ANALYST_PASSWORD"] not in made.stdout + made.stderr
    again = subprocess.run(
        [*DLPERF, "db", "analyst-role", "--name", name], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0 and "updated" in again.stdout
    with store.engine.begin() as conn:  # created after the grant: covered by the default privileges
        conn.execute(sa.text("CREATE TABLE later_table (x int)"))
    analyst_url = sa.make_url(pg_url).set(username=name, password=env["DLPERF_ANALYST_PASSWORD"])
    analyst = sa.create_engine(analyst_url)
    try:
        with analyst.connect() as conn:
            for name in (*VIEWS, *TABLES, "later_table"):
                conn.execute(sa.text(f"SELECT COUNT(*) FROM {name}")).scalar_one()
        for statement in (
            "INSERT INTO benchmark_runs (dag_id, run_id, suite, trigger, runtime, started_at, status) "
            "VALUES ('x', 'y', 's', 'manual', 'local', now(), 'running')",
            "DELETE FROM results",
            "CREATE TABLE mine (x int)",
        ):
            with pytest.raises(sa.exc.DBAPIError) as raised, analyst.begin() as conn:
                conn.execute(sa.text(statement))
            assert "read-only" in str(raised.value) or "permission denied" in str(raised.value)
        with analyst.connect() as conn:  # even with read-only transactions switched off
            conn.execute(sa.text("SET default_transaction_read_only = off"))
            conn.commit()  # the next transaction is read-write: only the missing grants stop it
            with pytest.raises(sa.exc.DBAPIError, match="permission denied"):
                conn.execute(sa.text("DELETE FROM results"))
    finally:
        analyst.dispose()
        store.dispose()
        database = sa.make_url(pg_url).database
        subprocess.run(
            [
                "psql",
                "-h",
                base.host or "127.0.0.1",
                "-U",
                base.username or "postgres",
                "-d",
                database,
                "-c",
                f"DROP OWNED BY {name}",
            ],
            capture_output=True,
            check=False,
        )
        admin(f"DROP ROLE IF EXISTS {name}")
    assert store.results().shape[0] == 10
