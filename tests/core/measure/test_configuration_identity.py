"""A configuration is identified by everything that changes the work (issue 21): the case key ends with the
fingerprint of the full configuration but its topology, which the key names itself (``+args=...``), every result keeps that configuration as JSON, and
results that differ in extra arguments or window never share a history series, a ``latest`` row or a
baseline; rows stored before migration 0010 keep everything and are marked ``+args=unknown``."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from dlperf_core.measure.regression import NightlyRow, Policy, history_restart
from dlperf_core.model import Case, configuration_fingerprint, series_base
from dlperf_core.storage import ResultRecord, ResultStore, current_revision, downgrade, head_revision, upgrade
from helpers import T0, result_record, run_record, store_results_before_head

FULL = Case("pytorch_reference", "resnet50_v1.5", "fp32", 8, 1, 1, 5, 100)
SHRUNK = replace(FULL, extra_args=("--image-size", "64", "--width", "16", "--num-classes", "10"))


def test_extra_args_and_the_window_change_the_key_the_readable_fields_do_not_hide_them() -> None:
    assert FULL.key.startswith("pytorch_reference/resnet50_v1.5/fp32/b8/1n1g+args=")
    assert SHRUNK.key != FULL.key and series_base(SHRUNK.key) == series_base(FULL.key)
    assert replace(FULL, measured_iterations=50).key != FULL.key  # the measured window
    assert replace(FULL, warmup_iterations=20).key != FULL.key
    assert replace(FULL, image="other:tag").key == FULL.key  # the image is the environment's, not the identity's
    compiled = replace(FULL, compile=True, options=(("amp_dtype", "fp16"),))
    assert compiled.options_key == f"+amp_dtype=fp16+compile+args={compiled.fingerprint}"


def test_the_fingerprint_is_stable() -> None:
    """The same configuration gives the same fingerprint anywhere: written down here once, it must not move
    (a new release that changed it would restart every series)."""
    assert FULL.configuration == {
        "framework": "pytorch_reference",
        "model": "resnet50_v1.5",
        "precision": "fp32",
        "batch_size_per_device": 8,
        "nodes": 1,
        "gpus_per_node": 1,
        "options": {},
        "compile": False,
        "extra_args": [],
        "warmup_iterations": 5,
        "measured_iterations": 100,
    }
    unordered = {k: v for k, v in reversed(FULL.configuration.items()) if k not in ("nodes", "gpus_per_node")}
    assert FULL.fingerprint == configuration_fingerprint(unordered)
    assert FULL.fingerprint == "7356a650"


def test_every_topology_of_a_configuration_shares_its_fingerprint_and_its_1n1g_baseline(dialect_url: str) -> None:
    store = ResultStore(dialect_url)
    store.ensure_schema()
    try:
        wide = replace(FULL, gpus_per_node=2)
        assert wide.fingerprint == FULL.fingerprint and wide.key != FULL.key
        assert replace(SHRUNK, gpus_per_node=2).fingerprint == SHRUNK.fingerprint != FULL.fingerprint
        for case, throughput in ((FULL, 100.0), (wide, 190.0), (replace(SHRUNK, gpus_per_node=2), 50.0)):
            store.upsert_result(
                result_record(case_key=case.key, configuration=case.configuration, throughput=throughput)
            )
        speedups = {row.case_key: row.speedup for row in store.summary().itertuples()}
        assert speedups[FULL.key] == 1.0 and speedups[wide.key] == pytest.approx(1.9)
        assert speedups[replace(SHRUNK, gpus_per_node=2).key] != speedups[replace(SHRUNK, gpus_per_node=2).key]  # NaN
    finally:
        store.dispose()


def _night(store: ResultStore, day: int, case: Case, throughput: float) -> None:
    started = T0 + timedelta(days=day)
    run = run_record(run_id=f"scheduled__{day:02d}", trigger="scheduled", started_at=started, status="success")
    store.upsert_run(run)
    store.upsert_result(
        result_record(
            case_key=case.key,
            configuration=case.configuration,
            throughput=throughput,
            started_at=started,
            benchmark_run=run,
        )
    )


def test_two_runs_differing_only_in_extra_args_are_two_series(dialect_url: str) -> None:
    store = ResultStore(dialect_url)
    store.ensure_schema()
    try:
        _night(store, 0, FULL, 100.0)
        _night(store, 1, SHRUNK, 900.0)
        results = store.results()
        assert set(results["case_key"]) == {FULL.key, SHRUNK.key}
        stored = {row.case_key: row.configuration for row in results.itertuples()}
        assert stored[SHRUNK.key]["extra_args"] == list(SHRUNK.extra_args)  # the full configuration, as JSON
        assert stored[FULL.key]["extra_args"] == []
        history = store.history(nights=None)
        assert sorted(history.groupby("case_key")["median_throughput"].apply(list).items()) == sorted(
            [(FULL.key, [100.0]), (SHRUNK.key, [900.0])]
        )  # separate series: neither is the other's baseline
        latest = store.latest_summary()
        assert {(row.case_key, row.median_throughput) for row in latest.itertuples()} == {
            (FULL.key, 100.0),
            (SHRUNK.key, 900.0),
        }  # a latest row each
        assert set(latest["variant"]) == {f"+args={FULL.fingerprint}", f"+args={SHRUNK.fingerprint}"}
    finally:
        store.dispose()


def _rows(key: str, nights: int, first_day: int = 0) -> list[NightlyRow]:
    base = T0.date()
    return [
        NightlyRow(key, base + timedelta(days=first_day + i), f"scheduled__{first_day + i}", 100.0, 3, 0, "success")
        for i in range(nights)
    ]


def test_a_series_that_restarts_says_so_until_it_can_be_judged() -> None:
    old = series_base(FULL.key) + "+args=unknown"
    rows = _rows(old, 12) + _rows(SHRUNK.key, 7, 12) + _rows(FULL.key, 2, 19)
    restart = history_restart(FULL.key, rows, Policy())
    assert restart is not None and restart.own_nights == 2
    assert sorted((key, n) for key, n, _ in restart.earlier) == sorted([(old, 12), (SHRUNK.key, 7)])
    line = restart.describe()
    assert "history restarts (2 good nights of its own, a verdict needs 5)" in line and "+args=unknown" in line
    assert history_restart(FULL.key, rows + _rows(FULL.key, 3, 21), Policy()) is None  # 5 of its own: judged
    assert history_restart(FULL.key, _rows(FULL.key, 1), Policy()) is None  # a new configuration: nothing before


def test_migrating_a_populated_0009_database_keeps_every_row_and_marks_them_unknown(dialect_url: str) -> None:
    upgrade(dialect_url, "0009")
    store = ResultStore(dialect_url)
    try:
        run = run_record(started_at=T0)
        old: list[ResultRecord] = [
            result_record(case_key="pt/resnet50/fp32/b8/1n1g", repeat=r, benchmark_run=run) for r in range(3)
        ] + [
            result_record(case_key="pt/resnet50/fp32/b8/1n1g+compile", repeat=0, compile=True, benchmark_run=run),
            result_record(
                case_key="pt/resnet50/fp32/b8/1n2g",
                repeat=0,
                status="failed",
                throughput=None,
                reason="exit code 1",
                benchmark_run=run,
            ),
        ]
        store_results_before_head(store, old)
        regressions = sa.Table("regressions", sa.MetaData(), autoload_with=store.engine)
        with store.engine.begin() as conn:
            run_pk = conn.execute(sa.text("SELECT id FROM benchmark_runs")).scalar_one()
            conn.execute(
                regressions.insert().values(
                    benchmark_run_id=run_pk,
                    dag_id="dag",
                    run_id="r1",
                    framework="pt",
                    model="resnet50",
                    precision="fp32",
                    batch_size_per_device=8,
                    nodes=1,
                    gpus_per_node=1,
                    variant="",
                    case_key="pt/resnet50/fp32/b8/1n1g",
                    night=T0.date(),
                    median_throughput=90.0,
                    baseline_median=100.0,
                    baseline_mad=1.0,
                    baseline_nights=14,
                    change_pct=-10.0,
                    robust_z=-7.0,
                    direction="slower",
                    environment_changed=False,
                    status="open",
                    last_seen_run_id="r1",
                )
            )
        upgrade(dialect_url)
        assert current_revision(dialect_url) == head_revision()
        rows = store.results()
        assert len(rows) == len(old)  # every row kept, with its figures
        assert sorted(rows["case_key"]) == sorted(r.case_key + "+args=unknown" for r in old)
        assert set(rows["variant"]) == {"+args=unknown", "+compile+args=unknown"}
        assert rows["configuration"].isna().all() and rows["launch_spec"].isna().all()  # not guessed
        assert (
            rows.set_index("case_key")["compile"]
            .astype(bool)
            .to_dict()["pt/resnet50/fp32/b8/1n1g+compile+args=unknown"]
        )
        assert sorted(rows["throughput"].dropna()) == sorted(r.throughput for r in old if r.throughput)
        assert list(store.regressions()["case_key"]) == ["pt/resnet50/fp32/b8/1n1g+args=unknown"]
        assert len(store.summary()) == 3  # the views read the migrated rows

        downgrade(dialect_url, "0009")  # back: the suffix and the columns go, the rows stay
        with store.engine.connect() as conn:
            keys = conn.execute(sa.text("SELECT case_key FROM results")).scalars().all()
            columns = {c["name"] for c in sa.inspect(conn).get_columns("results")}
        assert sorted(keys) == sorted(r.case_key for r in old)
        assert "compiled" in columns and not {"compile", "configuration", "launch_spec"} & columns
    finally:
        store.dispose()


def test_two_configurations_differing_only_in_extra_args_get_a_plot_each(dialect_url: str, tmp_path: Path) -> None:
    """A plot has no identity line under it: its title, legend and file name carry ``args=<fingerprint>``, so
    the shrunk and the full-size model neither share a scaling plot nor overwrite each other's file."""
    from dlperf_core.reporting import build_report

    store = ResultStore(dialect_url)
    store.ensure_schema()
    try:
        for case, throughput in ((FULL, 100.0), (SHRUNK, 900.0)):
            for gpus in (1, 2):
                wide = replace(case, gpus_per_node=gpus)
                store.upsert_result(
                    result_record(case_key=wide.key, configuration=wide.configuration, throughput=throughput * gpus)
                )
        files = build_report(store, "r1", dag_id="dag", fmt="md", out_dir=tmp_path / "report")
    finally:
        store.dispose()
    scaling = sorted((p for p in files.plots if p.kind == "scaling"), key=lambda p: p.title)
    assert [p.title for p in scaling] == sorted(
        f"resnet50_v1.5 fp32 batch 8 (args={case.fingerprint})" for case in (FULL, SHRUNK)
    )
    assert len({p.path for p in files.plots}) == len(files.plots) == 4  # a scaling and a frameworks plot each
