"""What the results page (dlperf_airflow.results_page) shows of the flags the core computes, on SQLite and
PostgreSQL: a noisy configuration's CV and its ``unreliable`` flag (dlperf_core.measure.noise, tests/core/measure/test_noise.py),
the baseline each speedup is measured against (migration 0012, tests/core/storage/test_baselines.py), and who
printed each figure (``figure_origin``, tests/core/measure/test_figure_origin.py). Each fixture stores the rows its
core test reasons about; the page is rendered from the real store."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from html import escape

import pytest

from dlperf_airflow.results_page import render_page, speedup_png
from dlperf_core.measure.noise import SINGLE_REPEAT, UNRELIABLE_RULE
from dlperf_core.reporting import load_overview
from dlperf_core.storage import ResultStore
from helpers import T0, result_record, run_record


@pytest.fixture
def store(dialect_url: str) -> Iterator[ResultStore]:
    result_store = ResultStore(dialect_url)
    result_store.ensure_schema()
    yield result_store
    result_store.dispose()


# --------------------------------------------------------------------------- the CV and the unreliable flag

NOISE_RUN = run_record(
    dag_id="dlperf_benchmark", run_id="manual__noise", trigger="manual", started_at=T0, status="success"
)
# noisy: 1n1g repeats of 59 and 19 samples/s (CV 0.73), its 1n2g steady but 4.38x on 2 GPUs; quiet: nothing
# flagged; edges: single repeats at 1n1g, 1n2g and 1n4g (4.01 on 4 devices), CV 0.09998 at 2n1g, 0.10013 at 2n2g
NOISE = {
    "noisy": {"1n1g": [59.0, 19.0], "1n2g": [170.0, 172.0]},
    "quiet": {"1n1g": [100.0, 101.0, 99.0], "1n2g": [190.0, 192.0], "1n4g": [370.0, 374.0, 372.0]},
    "edges": {"1n1g": [100.0], "1n2g": [200.0], "1n4g": [401.0], "2n1g": [92.93, 107.07], "2n2g": [92.92, 107.08]},
}


def noise_key(model: str, topology: str) -> str:
    return f"pytorch_reference/{model}/fp32/b8/{topology}"


def test_results_page_shows_the_cv_and_the_flag(store: ResultStore):
    store.upsert_run(NOISE_RUN)
    store.upsert_results(
        result_record(
            case_key=noise_key(model, topology),
            repeat=repeat,
            throughput=value,
            started_at=T0 + timedelta(seconds=repeat),
            benchmark_run=NOISE_RUN,
        )
        for model, topologies in NOISE.items()
        for topology, values in topologies.items()
        for repeat, value in enumerate(values)
    )
    view = load_overview(store)
    assert view.summary.rows == []  # a manual run: no night yet, it is the latest of any run
    rows = {r["case_key"]: r for r in view.latest_any.rows}
    assert rows[noise_key("noisy", "1n1g")]["unreliable"] is True
    assert rows[noise_key("quiet", "1n1g")]["unreliable"] is False
    assert rows[noise_key("quiet", "1n2g")]["unreliable_reason"] is None
    page = render_page(view, ui_base="/", db="x")
    assert "<th>CV (%)</th>" in page and "<th>reliability</th>" in page
    assert escape(UNRELIABLE_RULE) in page  # the rule, with its threshold, above the table
    assert "⚠ unreliable: CV 0.73 &gt; 0.10" in page  # autoescaped
    assert "⚠ unreliable: speedup 4.38 &gt; 2 devices" in page
    # noisy 1n1g and 1n2g, edges 1n1g, 1n2g (single repeats), 1n4g and 2n2g: in the latest of any run (the run
    # is a manual one: the latest nightly summary is empty)
    assert page.count("⚠ unreliable: ") == 6
    assert ">72.5<" in page  # the noisy 1n1g's CV in percent, one decimal
    png = speedup_png(view.latest_any.rows)
    assert png is not None and png.startswith(b"\x89PNG")


# --------------------------------------------------------------------------- the baseline of each speedup

NIGHT = run_record(
    dag_id="dlperf_benchmark",
    run_id="scheduled__2026-01-01T02:00:00+00:00",
    trigger="scheduled",
    started_at=T0,
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


def repeats(run, topology: str, values: list[float]) -> list:
    return [
        result_record(
            case_key=f"pytorch_reference/resnet50_v1.5/fp32/b8/{topology}",
            repeat=i,
            throughput=v,
            started_at=run.started_at + timedelta(seconds=i),
            benchmark_run=run,
        )
        for i, v in enumerate(values)
    ]


def test_the_results_page_shows_the_latest_nightly_first_and_says_so(store: ResultStore):
    """A night, then on demand a one-repeat 1n1g and a run without 1n1g (measured against the night's)."""
    for run in (NIGHT, ONE_REPEAT, NO_1N1G):
        store.upsert_run(run)
    store.upsert_results(
        repeats(NIGHT, "1n1g", [100.0, 102.0])
        + repeats(NIGHT, "1n2g", [190.0, 192.0])
        + repeats(ONE_REPEAT, "1n1g", [107.0])
        + repeats(NO_1N1G, "1n2g", [180.0, 181.0])
    )
    view = load_overview(store)
    assert {r["run_id"] for r in view.summary.rows} == {NIGHT.run_id}
    assert ONE_REPEAT.run_id in {r["run_id"] for r in view.latest_any.rows}
    page = render_page(view, ui_base="/", db="x")
    assert "latest nightly" in page and "latest of any run" in page
    assert f"latest nightly 2026-01-01 ({NIGHT.run_id})" in page  # the no-1n1g run's speedup, named
    assert SINGLE_REPEAT in page


# --------------------------------------------------------------------------- who printed each figure

SHOWN = run_record(dag_id="dlperf_benchmark", run_id="manual__shown", trigger="manual", status="success")


def test_the_results_page_has_a_figure_from_column(store: ResultStore):
    rows = [
        ("pytorch_reference/resnet50_v1.5/fp32/b8/1n1g", 100.0, "dlperf"),
        ("pytorch_reference/resnet50_v1.5/fp32/b8/1n2g", 190.0, "dlperf"),
        ("mindspore/resnet50_v1.5/fp32/b8/1n1g", 20.0, "framework"),
        ("mindspore/resnet50_v1.5/fp32/b8/1n2g", 38.0, "framework"),
        ("ngc_mxnet/resnet50_v1.5/fp32/b8/1n1g", 15.0, None),  # stored before 0009
    ]
    store.upsert_results(
        result_record(case_key=key, throughput=value, figure_origin=origin, benchmark_run=SHOWN, started_at=T0)
        for key, value, origin in rows
    )
    view = load_overview(store, SHOWN.run_id)
    assert {r["case_key"]: r["figure_origin"] for r in view.results.rows}[
        "mindspore/resnet50_v1.5/fp32/b8/1n1g"
    ] == "framework"
    page = render_page(view, ui_base="/", db="x")
    table = page[page.index('<table id="results">') :]
    table = table[: table.index("</table>")]
    assert "<th>framework's figure</th><th>figure from</th><th>reason</th>" in table
    assert table.count('<td class="origin">dlperf</td>') == 2
    assert table.count('<td class="origin">framework</td>') == 2
    assert table.count('<td class="origin">unknown</td>') == 1
    assert page.count("figure from") == 1  # that table only
