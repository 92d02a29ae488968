"""End to end on the docker runtime: dag.test() -> containers as nodes on a docker network -> torchrun
(gloo) across them -> parse -> PostgreSQL. Real Docker Engine, real image built from docker/."""

import math
import subprocess
import time

from dlperf_core.model import series_base
from dlperf_core.storage import ResultStore
from helpers import DLPERF, REPO, cli_env, dlperf_containers, docker_marks, run_id_of

IMAGE = "dlperf/pytorch-reference:cpu"
pytestmark = docker_marks(IMAGE)


def run_cli(tmp_path, pg_url, *args, timeout=1200):
    return subprocess.run(
        [*DLPERF, "run", *args],
        cwd=REPO,
        env=cli_env(tmp_path, pg_url),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_smoke_suite_on_container_nodes_twice_without_duplicates(tmp_path, pg_url):
    args = ["suites/smoke.yaml", "--runtime", "docker", "--run-date", "2026-01-01T02:00:00+00:00"]
    first = run_cli(tmp_path, pg_url, *args)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-4000:]
    store = ResultStore(pg_url)
    run_id = run_id_of(first.stdout)
    rows = store.results(run_id=run_id)
    assert len(rows) == 6  # 1n1g, 1n2g (two processes in one container), 2n1g (two containers) x 2 repeats
    assert set(rows["status"]) == {"ok"}, rows[["case_key", "reason"]]
    assert all(math.isfinite(t) and t > 0 for t in rows["throughput"])
    assert sorted(rows["repeat"].tolist()) == [0, 0, 0, 1, 1, 1]
    summary = store.summary(run_id=run_id)
    assert len(summary) == 3 and (summary["n"] == 2).all()
    assert summary["speedup"].notna().all() and (summary["speedup"] > 0).all()
    assert dlperf_containers() == []  # every container it started is gone

    second = run_cli(tmp_path, pg_url, *args)  # the same DAG run again (same logical date, same run_id)
    assert second.returncode == 0, second.stderr[-4000:]
    assert run_id_of(second.stdout) == run_id
    again = store.results(run_id=run_id)
    assert len(again) == 6
    assert sorted(again["id"]) == sorted(rows["id"])  # rows updated in place, none added
    assert dlperf_containers() == []


def test_killed_container_fails_only_its_case_and_leaves_nothing(tmp_path, pg_url):
    proc = subprocess.Popen(
        [*DLPERF, "run", "tests/data/kill-suite.yaml", "--runtime", "docker"],
        cwd=REPO,
        env=cli_env(tmp_path, pg_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    killed = None
    deadline = time.time() + 300
    try:
        while killed is None and time.time() < deadline and proc.poll() is None:
            out = subprocess.run(
                [
                    "docker",
                    "ps",
                    "--filter",
                    "label=dlperf.case",
                    "--format",
                    '{{.Names}} {{.Label "dlperf.case"}}',
                ],
                capture_output=True,
                text=True,
            ).stdout.splitlines()
            out = [  # the 1n1g case's container (its key ends with the configuration's +args=)
                line.split()[0]
                for line in out
                if series_base(line.split()[-1]) == "pytorch_reference/resnet50_v1.5/fp32/b4/1n1g"
            ]
            if out:
                logs = subprocess.run(["docker", "logs", out[0]], capture_output=True, text=True).stdout
                if "Iteration: 3 " in logs:  # training is under way
                    subprocess.run(["docker", "kill", out[0]], check=True, capture_output=True)
                    killed = out[0]
            time.sleep(0.5)
        output, _ = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert killed, "the long case never started training"
    assert proc.returncode == 1, output[-3000:]  # the DAG run ends failed
    rows = ResultStore(pg_url).results(run_id=run_id_of(output))
    by_topo = {(r.nodes, r.gpus_per_node): r for r in rows.itertuples()}
    dead = by_topo[(1, 1)]
    assert dead.status == "failed" and "killed" in dead.reason, dead.reason
    assert dead.throughput is None or math.isnan(dead.throughput)
    assert by_topo[(1, 2)].status == "ok" and by_topo[(1, 2)].throughput > 0  # the other case still ran
    assert dlperf_containers() == []
