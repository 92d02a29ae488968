"""Every result records where its throughput figure came from (``results.figure_origin``, migration 0009): each
adapter's answer on CPU and on nvidia nodes, the record's check, ``dlperf import`` and ``dlperf parse --json``, the
migration of a populated 0008 database, the reports. Real SQLite and PostgreSQL throughout. The DAG's store step
and the results page: tests/airflow_plugin/test_steps.py and test_results_page_flags.py."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from html import escape

import pytest
import sqlalchemy as sa

from dlperf_core.cluster.inventory import Node
from dlperf_core.frameworks import ADAPTERS, get_adapter
from dlperf_core.measure.measurement import Measurement
from dlperf_core.measure.origin import FIGURE_ORIGINS, ORIGIN_WORDS
from dlperf_core.model import Case, CaseOutcome, NodeOutcome, series_base
from dlperf_core.reporting import build_report
from dlperf_core.storage import ResultRecord, ResultStore, current_revision, downgrade, head_revision, upgrade
from helpers import DLPERF, REPO, T0, cli_env, result_record, run_record, store_results_before_head

CPU_LOGS = REPO / "tests" / "data" / "cpu_logs"
ONEFLOW_LOG = CPU_LOGS / "oneflow_1n2g.log"  # OneFlow's CPU image, 1n2g, batch 4: window 5 + 10 parses ok

# framework -> (origin on nvidia nodes, origin on CPU nodes): the facts of docs/frameworks.md's table
EXPECTED: dict[str, tuple[str, str]] = {
    "pytorch_reference": ("dlperf", "dlperf"),
    "pytorch_reference_mpi": ("dlperf", "dlperf"),
    "ngc_pytorch": ("framework", "dlperf"),
    "ngc_mxnet": ("framework", "framework"),
    "mindspore": ("framework", "framework"),
    "paddle_plsc": ("framework", "framework"),
    "oneflow": ("dlperf", "dlperf"),  # the default GPU release (1.0.0) runs dlperf's driver; the seed's 0.1.8 not
    "allreduce_probe": ("dlperf", "dlperf"),  # never stored in results; answered all the same
    "synthetic": ("dlperf", "dlperf"),  # dlperf's synthetic workload prints the lines (bench/growth.py, tests/chaos)
}


def a_case(framework: str, nodes: int = 2, gpus: int = 1, image: str | None = None, **more) -> Case:
    adapter = get_adapter(framework)
    return Case(
        framework=framework,
        model=more.pop("model", sorted(adapter.models)[0]),
        precision="fp32",
        batch_size_per_device=more.pop("batch", 8),
        nodes=nodes,
        gpus_per_node=gpus,
        warmup_iterations=more.pop("warmup", 5),
        measured_iterations=more.pop("measured", 10),
        image=image,
    )


def nodes_of(accelerator: str, count: int = 2, gpus: int = 1) -> tuple[Node, ...]:
    return tuple(Node(name=f"node{i}", gpus=gpus, accelerator=accelerator) for i in range(count))


# --------------------------------------------------------------------------- the adapters


def test_every_adapter_is_in_the_table():
    assert set(EXPECTED) == set(ADAPTERS)


@pytest.mark.parametrize("framework", sorted(EXPECTED))
@pytest.mark.parametrize("accelerator", ["nvidia", "cpu"])
def test_each_adapter_says_who_prints_its_figure(framework: str, accelerator: str):
    adapter = get_adapter(framework)
    case = a_case(framework)
    nodes = nodes_of(accelerator)
    gpu, cpu = EXPECTED[framework]
    assert adapter.figure_origin(case, nodes) == (gpu if accelerator == "nvidia" else cpu)
    assert adapter.figure_origin(case, nodes) in FIGURE_ORIGINS
    source = adapter.figure_source(case, nodes)
    assert source and "\n" not in source and len(source) < 120  # one line for people


@pytest.mark.parametrize("framework", sorted(EXPECTED))
def test_a_suites_own_image_gets_the_gpu_paths_answer(framework: str):
    adapter = get_adapter(framework)
    case = a_case(framework, image="registry.example/mine:1")
    assert adapter.figure_origin(case, nodes_of("cpu")) == EXPECTED[framework][0]
    assert adapter.figure_source(case, nodes_of("cpu")) == adapter.figure_source(a_case(framework), nodes_of("nvidia"))


def test_mixed_nodes_are_not_the_cpu_image():
    """A case whose nodes are not all CPU nodes runs the GPU image, and has its origin."""
    mixed = (Node(name="a", accelerator="cpu"), Node(name="b", accelerator="nvidia"))
    assert get_adapter("ngc_pytorch").figure_origin(a_case("ngc_pytorch"), mixed) == "framework"
    assert get_adapter("ngc_pytorch").figure_origin(a_case("ngc_pytorch"), nodes_of("cpu")) == "dlperf"


def test_the_sources_name_who_prints():
    cpu, gpu = nodes_of("cpu"), nodes_of("nvidia")
    assert "TimeMonitor" in get_adapter("mindspore").figure_source(a_case("mindspore"), cpu)
    assert "Speedometer" in get_adapter("ngc_mxnet").figure_source(a_case("ngc_mxnet"), cpu)
    assert "fit.py" in get_adapter("ngc_mxnet").figure_source(a_case("ngc_mxnet"), gpu)  # DLE's Gluon loop prints
    plsc_cpu = get_adapter("paddle_plsc").figure_source(a_case("paddle_plsc"), cpu)
    assert "PLSC" in plsc_cpu and "substitute" in plsc_cpu  # dlperf's margin_cross_entropy on CPU, said
    assert "dlperf" in get_adapter("oneflow").figure_source(a_case("oneflow"), cpu)
    assert "OneFlow-Benchmark" in get_adapter("oneflow").figure_source(a_case("oneflow"), gpu)
    assert "reference workload" in get_adapter("ngc_pytorch").figure_source(a_case("ngc_pytorch"), cpu)
    assert "DeepLearningExamples" in get_adapter("ngc_pytorch").figure_source(a_case("ngc_pytorch"), gpu)


# --------------------------------------------------------------------------- the record


@pytest.mark.parametrize("origin", [*FIGURE_ORIGINS, None])
def test_the_record_takes_the_known_origins(origin):
    assert result_record(figure_origin=origin).figure_origin == origin


@pytest.mark.parametrize("origin", ["Framework", "seed", ""])
def test_the_record_refuses_anything_else(origin):
    with pytest.raises(ValueError, match="figure origin must be one of"):
        result_record(figure_origin=origin)


def test_from_run_carries_the_origin():
    case = a_case("oneflow")
    outcome = CaseOutcome(T0, T0 + timedelta(seconds=5), [NodeOutcome("n0", 0, 0, "/x.log")], None)
    ok = Measurement("ok", None, 10.0, None, 10)
    record = ResultRecord.from_run("d", "r", case, 0, ok, outcome, figure_origin="dlperf")
    assert record.figure_origin == "dlperf"
    assert ResultRecord.from_run("d", "r", case, 0, ok, outcome).figure_origin is None
    with pytest.raises(ValueError):
        ResultRecord.from_run("d", "r", case, 0, ok, outcome, figure_origin="guess")


# --------------------------------------------------------------------------- a results database of each dialect


@pytest.fixture
def store(dialect_url: str) -> Iterator[ResultStore]:
    result_store = ResultStore(dialect_url)
    result_store.ensure_schema()
    yield result_store
    result_store.dispose()


# --------------------------------------------------------------------------- dlperf import and dlperf parse


def test_dlperf_import_stores_imported(tmp_path):
    folder = tmp_path / "of"
    (folder / "1n2g").mkdir(parents=True)
    (folder / "1n2g" / "r50_b4_fp32_1.log").write_bytes(ONEFLOW_LOG.read_bytes())
    (folder / "1n2g" / "r50_b4_fp32_2.log").write_bytes(ONEFLOW_LOG.read_bytes())
    db = f"sqlite:///{tmp_path / 'i.db'}"
    done = subprocess.run(
        [*DLPERF, "import", str(folder), "--db", db, "--framework", "oneflow"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=cli_env(tmp_path, db),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    store = ResultStore(db)
    try:
        rows = store.results()
    finally:
        store.dispose()
    assert len(rows) == 2 and set(rows["figure_origin"]) == {"imported"}  # even where OneFlow's CPU driver printed


def test_dlperf_parse_json_says_imported(tmp_path):
    done = subprocess.run(
        [*DLPERF, "parse", str(ONEFLOW_LOG), "--json", "--warmup", "5", "--measured", "10"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=cli_env(tmp_path, f"sqlite:///{tmp_path / 'unused.db'}"),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = json.loads(done.stdout)
    assert run["figure_origin"] == "imported" and run["status"] == "ok" and run["format"] == "oneflow_cnns"


# --------------------------------------------------------------------------- migration 0008 -> 0009

RUN = run_record(dag_id="dlperf_benchmark", run_id="manual__before", trigger="manual", status="success")
OLD_ROWS = [
    ("pytorch_reference/resnet50_v1.5/fp32/b8/1n1g", 0, 100.0),
    ("pytorch_reference/resnet50_v1.5/fp32/b8/1n1g", 1, None),  # a failed repeat: backfilled too
    ("pytorch_reference_mpi/resnet50_v1.5/fp32/b8/1n2g", 0, 180.0),  # not certain enough to guess: NULL
    ("ngc_pytorch/resnet50_v1.5/fp32/b8/1n1g", 0, 90.0),  # CPU (dlperf) or GPU (framework)? unknown
    ("oneflow/resnet50_v1.5/fp32/b4/1n2g", 0, 6.2),
    ("mindspore/resnet50_v1.5/fp32/b8/1n1g", 0, 20.0),
]


def _old_records() -> list[ResultRecord]:
    return [
        result_record(
            case_key=key,
            repeat=repeat,
            status="ok" if throughput else "failed",
            reason=None if throughput else "exit code 1",
            throughput=throughput,
            benchmark_run=RUN,
        )
        for key, repeat, throughput in OLD_ROWS
    ]


def test_migrating_a_populated_0008_database_backfills_only_pytorch_reference(dialect_url: str):
    upgrade(dialect_url, "0008")
    store = ResultStore(dialect_url)
    try:
        store_results_before_head(store, _old_records())
        with store.engine.connect() as conn:
            assert "figure_origin" not in {c["name"] for c in sa.inspect(conn).get_columns("results")}
            cases = conn.execute(sa.text("SELECT COUNT(*) FROM case_summary")).scalar_one()

        upgrade(dialect_url)
        assert current_revision(dialect_url) == head_revision()
        rows = store.results()
        assert len(rows) == len(OLD_ROWS)  # every row kept
        origins = {
            (series_base(r.case_key), r.repeat): r.figure_origin  # 0010 marks them +args=unknown
            for r in rows.fillna({"figure_origin": "NULL"}).itertuples()
        }
        assert origins == {
            (key, repeat): ("dlperf" if key.startswith("pytorch_reference/") else "NULL") for key, repeat, _ in OLD_ROWS
        }
        assert len(store.summary()) == cases  # the views on results still read
        # new rows carry theirs; PostgreSQL also refuses a value outside the three
        store.upsert_result(result_record(case_key="oneflow/resnet50_v1.5/fp32/b4/2n1g", figure_origin="framework"))
        if dialect_url.startswith("postgresql"):
            with pytest.raises(sa.exc.IntegrityError), store.engine.begin() as conn:
                conn.execute(sa.text("UPDATE results SET figure_origin = 'guessed'"))

        downgrade(dialect_url, "0008")  # the column goes, the rows stay
        with store.engine.connect() as conn:
            assert "figure_origin" not in {c["name"] for c in sa.inspect(conn).get_columns("results")}
            assert conn.execute(sa.text("SELECT COUNT(*) FROM results")).scalar_one() == len(OLD_ROWS) + 1
        upgrade(dialect_url)
        assert store.results()["figure_origin"].notna().sum() == 2  # the backfill again; pytorch_reference only
    finally:
        store.dispose()


# --------------------------------------------------------------------------- shown: the reports

SHOWN = run_record(dag_id="dlperf_benchmark", run_id="manual__shown", trigger="manual", status="success")


def _shown(store: ResultStore) -> None:
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


def test_the_reports_say_who_printed_each_tables_figure(store: ResultStore, tmp_path):
    _shown(store)
    build_report(store, SHOWN.run_id, fmt=["md", "json", "html"], out_dir=tmp_path)
    markdown = (tmp_path / "report.md").read_text()
    page = (tmp_path / "report.html").read_text()
    for framework, origin in (("pytorch_reference", "dlperf"), ("mindspore", "framework"), ("ngc_mxnet", None)):
        line = f"figure: {ORIGIN_WORDS[origin]}"
        heading = f"### {framework} resnet50_v1.5 fp32 batch 8 (median of repeats)\n\n{line}\n\n| node_num"
        assert heading in markdown
        assert (
            f'<h3>{escape(framework)} resnet50_v1.5 fp32 batch 8 (median of repeats)</h3>\n<p class="figure">' in page
        )
        assert f'<p class="figure">{escape(line)}</p>' in page
    assert "figure: a dlperf driver printing the seed's format" in markdown
    assert "figure: the framework's own logger" in markdown
    cases = {c["case_key"]: c for c in json.loads((tmp_path / "report.json").read_text())["cases"]}
    assert cases["pytorch_reference/resnet50_v1.5/fp32/b8/1n2g"]["figure_origin"] == "dlperf"
    assert cases["mindspore/resnet50_v1.5/fp32/b8/1n1g"]["figure_origin"] == "framework"
    assert cases["ngc_mxnet/resnet50_v1.5/fp32/b8/1n1g"]["figure_origin"] is None
