"""`dlperf import` of MLPerf Training v1.0's ResNet-50 submissions (``$DLPERF_SHARED/mlperf/training_v1.0``), as a
user runs it, into SQLite and PostgreSQL: every run stored, the ``mlperf_scores`` view gives every published
score, the system descriptions sit in the environment tables, and a second import adds nothing."""

from __future__ import annotations

import csv
import shutil
import subprocess

import pytest
import sqlalchemy as sa

from dlperf_core.storage import ResultStore
from helpers import DLPERF, REPO, SHARED

V1 = SHARED / "mlperf" / "training_v1.0"
pytestmark = pytest.mark.skipif(not (V1 / "resnet_scores.csv").is_file(), reason=f"no MLPerf results at {V1}")


def _import(folder, db: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DLPERF, "import", str(folder), "--db", db, *extra], capture_output=True, text=True, cwd=REPO, timeout=600
    )


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url"))


def test_import_of_the_v1_round_stores_every_run_and_the_view_gives_every_published_score(db):
    out = _import(V1, db)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "imported 175 MLPerf runs of 35 system benchmarks (ruleset 1.0.0; 0 without a throughput)" in out.stderr
    with (V1 / "resnet_scores.csv").open(newline="") as f:
        published = {row["system_folder"]: row for row in csv.DictReader(f)}

    store = ResultStore(db)
    try:
        rows = store.mlperf_score_rows("1.0.0")
        assert sorted(r.system_folder for r in rows) == sorted(published)
        for row in rows:
            want = published[row.system_folder]
            assert row.score_minutes == pytest.approx(float(want["resnet_minutes"]), rel=0.001), row
            assert (row.submitter, row.accelerators, row.accelerator_model) == (
                want["submitter"],
                int(want["accelerators_count"]),
                want["accelerator_model_name"],
            )
            assert row.runs == 5 and row.benchmark == "resnet" and row.environment_id is not None
        assert sum(r.runs_compliant for r in rows) == 169
        with store.engine.connect() as conn:
            runs = conn.execute(sa.text("SELECT status, throughput, time_to_train_s FROM mlperf_runs")).all()
            assert len(runs) == 175 and all(s == "ok" and t > 0 and ttt > 0 for s, t, ttt in runs)
            env = conn.execute(
                sa.text(
                    "SELECT e.gpu_model, e.gpu_count, e.cuda_version FROM mlperf_systems s "
                    "JOIN environments e ON e.id = s.environment_id WHERE s.system_folder = 'dgxa100_n8_ngc21.05_mxnet'"
                )
            ).one()
            assert tuple(env) == ("NVIDIA A100-SXM4-80GB (400W)", 64, "11.3.0.016")
    finally:
        store.dispose()

    again = _import(V1 / "NVIDIA", db)  # one submitter's folder again: updated in place, nothing added
    assert again.returncode == 0, again.stderr[-3000:]
    store = ResultStore(db)
    try:
        with store.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT COUNT(*) FROM mlperf_runs")).scalar() == 175
            assert conn.execute(sa.text("SELECT COUNT(*) FROM mlperf_scores")).scalar() == 35
    finally:
        store.dispose()


def test_a_folder_without_the_rounds_name_needs_the_ruleset_and_a_missing_description_is_said(tmp_path):
    folder = tmp_path / "mine" / "NVIDIA"
    shutil.copytree(V1 / "NVIDIA" / "results" / "dgxa100_ngc21.05_mxnet", folder / "results" / "dgxa100")
    db = f"sqlite:///{tmp_path / 'r.db'}"
    refused = _import(folder.parent, db)
    assert refused.returncode == 2 and "give --ruleset" in refused.stderr
    out = _import(folder.parent, db, "--ruleset", "1.0.0")
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"no system description at {folder / 'systems' / 'dgxa100.json'}" in out.stderr
    assert "imported 5 MLPerf runs of 1 system benchmarks" in out.stderr
    assert "not compliant: Failed checks for eval_accuracy" in out.stderr  # result_1 stopped short of 75.9%
