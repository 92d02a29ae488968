"""dlperf through a real Slurm cluster, end to end (issue 37, part 4): ``dlperf run`` (the real DAG under dag.test())
on an inventory with a ``slurm:`` block for the test cluster (tests/slurm_cluster.py: Slurm 22.05, login node over
SSH, partitions torch and mxnet): each case run is sbatch'ed from the login node, its task defers to
SlurmJobTrigger while the job queues and runs, resumes and stores its row in PostgreSQL as the docker runtime does.

One cluster for the module, and two suite runs at once (one per partition: an inventory names one partition),
which cover every ok case and two faults on the way:

- partition torch: ``pytorch_reference`` 1n1g, 1n2g, 2n1g, and one longer case (batch 4) that the test scancels
  from the login node while its job runs: its row is failed with CANCELLED's reason, the other rows are ok;
- partition mxnet: ``ngc_mxnet`` (mpirun, the NGC MXNet CPU image) 1n1g, 1n2g, 2n1g with mxnet1 drained from the
  start (``on_drained: wait``): the 2n1g job pends on ReqNodeNotAvail, the test resumes the node after a few of
  the trigger's polls and the case completes.

Then a third run on torch with ``on_drained: fail`` and torch1 drained: its 2n1g case fails with Slurm's reason,
its 1n1g case is ok. The time limit (a training longer than ``time_limit: 1`` allows: TIMEOUT's reason) runs only
under ``DLPERF_CHAOS=all`` (make chaos): it costs two minutes.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from dlperf_core.storage import ResultStore
from helpers import DLPERF, REPO, cli_env, docker_marks, run_id_of
from slurm_cluster import FRAMEWORK_IMAGES, SlurmCluster, module_cluster

pytestmark = [*docker_marks(FRAMEWORK_IMAGES["torch"]), *docker_marks(FRAMEWORK_IMAGES["mxnet"])[3:]]

LONG = os.environ.get("DLPERF_CHAOS") == "all"
SECONDS: dict[str, float] = {}
CONN_ID = "dlperf_slurm_e2e"
TOPOLOGIES = ["1n1g", "1n2g", "2n1g"]
CANCEL_BATCH = 4  # the torch case the test scancels: batch 4, many iterations (the others are batch 8)
POLL_S = 1

# the columns every ok row fills, on the docker runtime as here (a docker row of these suites: tests/e2e/)
FILLED = (
    "throughput",
    "iterations",
    "log_path",
    "started_at",
    "finished_at",
    "environment_id",
    "window_first",
    "window_last",
    "figure_origin",
    "configuration",
    "launch_spec",
)


def suite_yaml(framework: str, **overrides: object) -> dict:
    """A tiny suite of one framework at 1n1g, 1n2g and 2n1g (the CPU e2e suites' sizes: a case trains in seconds)."""
    if framework == "pytorch_reference":
        bench = {
            "framework": "pytorch_reference",
            "model": "resnet50_v1.5",
            "batch_size_per_device": 8,
            "extra_args": ["--image-size", "32", "--width", "8", "--device", "cpu"],
        }
    else:
        bench = {
            "framework": "ngc_mxnet",
            "model": "resnet50_v1.5",
            "batch_size_per_device": 8,
            "extra_args": ["--image-shape", "3,32,32", "--num-classes", "10"],
        }
    suite = {
        "name": f"slurm-{framework}",
        "runtime": "docker",  # the inventory's slurm: block runs it on the slurm runtime
        "repeats": 1,
        "precisions": ["fp32"],
        "topologies": TOPOLOGIES,
        "warmup_iterations": 2,
        "measured_iterations": 5,
        "timeout_s": 600,
        "watchdog_s": 180,
        "benchmarks": [bench],
    }
    suite.update(overrides)
    return suite


def inventory_yaml(partition: str, **slurm: object) -> dict:
    """Two CPU slots of 2 'GPUs' (the test cluster's nodes declare 2 CPUs) on ``partition``, software none."""
    block = {
        "connection": CONN_ID,
        "partition": partition,
        "time_limit": "00:10:00",
        "work_dir": "/shared/dlperf",
        "on_drained": "wait",
        "poll_s": POLL_S,
        "setup": ["export PATH=/opt/venv/bin:$PATH"],  # the images' venv: the login shell's PATH has none
    } | slurm
    nodes = [
        {"name": f"slot{i}", "gpus": 2, "accelerator": "cpu", "env": {"GLOO_SOCKET_IFNAME": "eth0"}} for i in (0, 1)
    ]
    return {"name": f"slurm-test-{partition}", "slurm": block, "nodes": nodes}


@dataclass
class SuiteRun:
    """A `dlperf run` started in the background: its folder, environment and, once ended, output and DAG run id."""

    name: str
    folder: Path
    env: dict[str, str]
    proc: subprocess.Popen[str]
    started: float = field(default_factory=time.monotonic)
    output: str = ""
    seconds: float = 0.0

    def wait(self, timeout: float, *, failed: bool = False) -> str:
        """The DAG run's id once `dlperf run` ended: success, or (``failed``) failed after running every case (a
        failed case fails the DAG run, and `dlperf run` exits 1)."""
        self.output, _ = self.proc.communicate(timeout=timeout)
        self.seconds = time.monotonic() - self.started
        (self.folder / "dlperf-run.log").write_text(self.output)
        ended = re.search(r"^DAG run \S+: (\w+);", self.output, re.M)
        want = ("failed", 1) if failed else ("success", 0)
        assert ended and (ended[1], self.proc.returncode) == want, f"dlperf run {self.name}:\n{self.output[-6000:]}"
        return run_id_of(self.output)


def start_run(cluster: SlurmCluster, folder: Path, db: str, name: str, suite: dict, inventory: dict) -> SuiteRun:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "suite.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    (folder / "inventory.yaml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    env = cli_env(
        folder,
        db,
        DLPERF_HOME=str(REPO),
        DLPERF_REPORT_DIR=str(folder / "reports"),
        **{f"AIRFLOW_CONN_{CONN_ID.upper()}": json.dumps(cluster.airflow_connection())},
    )
    argv = [*DLPERF, "run", str(folder / "suite.yaml"), "--inventory", str(folder / "inventory.yaml")]
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return SuiteRun(name, folder, env, proc)


def squeue(cluster: SlurmCluster, partition: str) -> list[dict[str, str]]:
    """The partition's jobs: id, name, state, reason (squeue), and the case the batch script runs (its comment)."""
    _, out, _ = cluster.run(f"squeue -h -p {partition} -o '%i|%j|%T|%r|%o'", check=False)
    jobs = []
    for line in out.splitlines():
        job_id, name, state, reason, command = (line.split("|") + [""] * 5)[:5]
        jobs.append({"id": job_id, "name": name, "state": state, "reason": reason, "command": command})
    return jobs


def script_has(cluster: SlurmCluster, job: dict[str, str], text: str) -> bool:
    """Whether the job's batch script (squeue's command) holds ``text`` (dlperf's real scripts name no case key)."""
    status, _, _ = cluster.run(f"grep -qF -- {shlex.quote(text)} {shlex.quote(job['command'])}", check=False)
    return status == 0


@pytest.fixture(scope="module")
def cluster() -> Iterator[SlurmCluster]:
    with module_cluster(SECONDS, "Slurm runtime") as started:
        yield started


@pytest.fixture(scope="module")
def module_pg_url(pg_server) -> Iterator[str]:
    from conftest import _fresh_database

    yield from _fresh_database(pg_server, "dlperf_slurm")


@pytest.fixture(autouse=True)
def _timed(request: pytest.FixtureRequest) -> Iterator[None]:
    started = time.monotonic()
    yield
    SECONDS[request.node.name] = time.monotonic() - started


@dataclass
class Runs:
    store: ResultStore
    torch: SuiteRun
    mxnet: SuiteRun
    torch_id: str
    mxnet_id: str
    cancelled: dict[str, str]  # the scancel'd job: id, case
    drained: dict[str, object]  # what the mxnet 2n1g job looked like while mxnet1 was drained


def _cancel_the_long_case(cluster: SlurmCluster, found: dict[str, str], stop: threading.Event) -> None:
    """scancel the torch job of the batch-4 case mid-training: once node 0's log has its first iteration's line."""
    while not stop.is_set():
        for job in squeue(cluster, "torch"):
            if job["state"] == "RUNNING" and script_has(cluster, job, f"--batch-size {CANCEL_BATCH} "):
                log = shlex.quote(f"{job['command'].rsplit('/', 1)[0]}/node0.log")
                deadline = time.monotonic() + 60
                while (
                    cluster.run(f"grep -q '^DLL .* Iteration: ' {log}", check=False)[0] != 0
                    and time.monotonic() < deadline
                ):
                    time.sleep(0.5)
                training = time.monotonic() < deadline
                cluster.run(f"scancel {job['id']}")
                found.update(id=job["id"], training=str(training))
                return
        time.sleep(0.5)


def _resume_after_polls(cluster: SlurmCluster, seen: dict[str, object], stop: threading.Event) -> None:
    """Once the mxnet 2n1g job pends on the drained mxnet1, let the trigger look a few times, then resume it."""
    while not stop.is_set():
        for job in squeue(cluster, "mxnet"):
            if job["state"] == "PENDING" and re.search(r"ReqNodeNotAvail|DRAINED", job["reason"]):
                two_nodes = script_has(cluster, job, "#SBATCH --nodes=2")
                seen.update(id=job["id"], reason=job["reason"], two_nodes=two_nodes, since=time.monotonic())
                time.sleep(4 * POLL_S)
                seen["still"] = next((j["state"] for j in squeue(cluster, "mxnet") if j["id"] == job["id"]), "")
                cluster.resume("mxnet1")
                return
        time.sleep(0.5)
    cluster.resume("mxnet1")


def _watching(watch, cluster: SlurmCluster, found: dict, stop: threading.Event) -> None:
    """``watch`` in a thread: an error it raised is kept in ``found`` (the test shows it) rather than lost."""
    try:
        watch(cluster, found, stop)
    except Exception as exc:  # noqa: BLE001 - shown by the test that reads ``found``
        found["error"] = repr(exc)
        cluster.resume("mxnet1")


@pytest.fixture(scope="module")
def runs(cluster: SlurmCluster, module_pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    """Both partitions' suite runs at once, with the scancel and the drained node on the way."""
    started = time.monotonic()
    folder = tmp_path_factory.mktemp("slurm-runtime")
    torch_suite = suite_yaml("pytorch_reference")
    long_case = dict(torch_suite["benchmarks"][0], batch_size_per_device=CANCEL_BATCH, topologies=["1n1g"])
    long_case.update(measured_iterations=1000)
    torch_suite["benchmarks"].append(long_case)
    cluster.drain("mxnet1", "dlperf-e2e-drain")
    torch = start_run(cluster, folder / "torch", module_pg_url, "torch", torch_suite, inventory_yaml("torch"))
    mxnet = start_run(
        cluster, folder / "mxnet", module_pg_url, "mxnet", suite_yaml("ngc_mxnet"), inventory_yaml("mxnet")
    )
    cancelled: dict[str, str] = {}
    drained: dict[str, object] = {}
    stop = threading.Event()
    watchers = [
        threading.Thread(target=_watching, args=(_cancel_the_long_case, cluster, cancelled, stop), daemon=True),
        threading.Thread(target=_watching, args=(_resume_after_polls, cluster, drained, stop), daemon=True),
    ]
    for watcher in watchers:
        watcher.start()
    try:
        torch_id = torch.wait(600, failed=True)  # its scancel'd case
        mxnet_id = mxnet.wait(600)
    finally:
        stop.set()
        for watcher in watchers:
            watcher.join(30)
        for run in (torch, mxnet):
            if run.proc.poll() is None:
                run.proc.kill()
    SECONDS["suite runs"] = time.monotonic() - started
    SECONDS["torch run"], SECONDS["mxnet run"] = torch.seconds, mxnet.seconds
    yield Runs(ResultStore(module_pg_url), torch, mxnet, torch_id, mxnet_id, cancelled, drained)


def _spec(row) -> dict:
    spec = row["launch_spec"]
    return json.loads(spec) if isinstance(spec, str) else spec


def test_a_every_case_runs_through_slurm_and_is_stored_as_the_docker_runtimes(runs: Runs, cluster: SlurmCluster):
    torch = runs.store.results(run_id=runs.torch_id)
    mxnet = runs.store.results(run_id=runs.mxnet_id)
    ok = torch[torch["batch_size_per_device"] != CANCEL_BATCH]
    assert len(ok) == 3 and len(mxnet) == 3, (torch, mxnet)
    for frame, framework, partition, hosts in (
        (ok, "pytorch_reference", "torch", ("torch0", "torch1")),
        (mxnet, "ngc_mxnet", "mxnet", ("mxnet0", "mxnet1")),
    ):
        assert sorted(f"{n}n{g}g" for n, g in zip(frame["nodes"], frame["gpus_per_node"])) == sorted(TOPOLOGIES)
        for _, row in frame.iterrows():
            assert row["framework"] == framework and row["status"] == "ok", row.to_dict()
            assert row["throughput"] > 0 and row["repeat"] == 0, row.to_dict()
            missing = [column for column in FILLED if row[column] is None or row[column] != row[column]]
            assert not missing, (missing, row.to_dict())
            slurm = _spec(row)["slurm"]
            assert re.fullmatch(r"\d+", str(slurm["job_id"])), slurm
            assert slurm["partition"] == partition and re.fullmatch(r"22\.05\.\d+", slurm["slurm_version"]), slurm
            want = f"{partition}[0-1]" if row["nodes"] == 2 else hosts
            assert slurm["node_list"] in want and slurm["software"] == "none", slurm
            nodes = _spec(row)["nodes"]  # each node named by the host Slurm gave it
            assert {n["address"] for n in nodes} <= set(hosts) and all(n["runtime"] == "slurm" for n in nodes), nodes
            # the stored environment is what the job's nodes probed (their hostnames, not this worker's), with the
            # job's facts: its id, node list, partition and Slurm's version
            (environment,) = runs.store.environments([int(row["environment_id"])]).to_dict("records")
            assert environment["hostnames"] == ",".join(n["address"] for n in nodes), (environment, nodes)
            assert environment["framework"] == framework and environment["framework_version"], environment
            scheduler = environment["data"]["scheduler"]
            assert scheduler == {
                "scheduler": "slurm",
                "version": slurm["slurm_version"],
                "partition": partition,
                "job_id": str(slurm["job_id"]),
                "node_list": slurm["node_list"],
            }, scheduler
        # as on docker: who printed the lines (MXNet's Speedometer; dlperf's reference workload), and the framework's
        # own figure where it prints one (the reference workload's DLLogger Summary; MXNet's train.py prints none)
        if framework == "ngc_mxnet":
            assert set(frame["figure_origin"]) == {"framework"} and frame["reported_throughput"].isna().all()
        else:
            assert set(frame["figure_origin"]) == {"dlperf"} and (frame["reported_throughput"] > 0).all(), frame
    assert cluster.nodes() and set(cluster.nodes().values()) <= {"idle", "mix", "alloc"}


def test_b_dlperf_reproduce_prints_the_batch_script(runs: Runs):
    torch = runs.store.results(run_id=runs.torch_id)
    row = torch[(torch["nodes"] == 2) & (torch["status"] == "ok")].iloc[0]
    out = subprocess.run(
        [*DLPERF, "reproduce", runs.torch_id, row["case_key"]],
        cwd=REPO,
        env=runs.torch.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    job = _spec(row)["slurm"]["job_id"]
    assert "#!/bin/bash" in out.stdout and "#SBATCH --nodes=2" in out.stdout, out.stdout[-3000:]
    assert "#SBATCH --partition=torch" in out.stdout and "srun " in out.stdout, out.stdout[-3000:]
    assert str(job) in out.stdout, out.stdout[-3000:]


def test_c_a_job_scancelled_mid_case_is_a_failed_row_with_slurms_reason(runs: Runs):
    assert runs.cancelled and "error" not in runs.cancelled, f"the batch-4 case's job not scancel'd: {runs.cancelled}"
    torch = runs.store.results(run_id=runs.torch_id)
    (row,) = torch[torch["batch_size_per_device"] == CANCEL_BATCH].to_dict("records")
    assert row["status"] == "failed" and (row["throughput"] is None or row["throughput"] != row["throughput"]), row
    assert "CANCELLED" in row["reason"] and f"slurm job {runs.cancelled['id']} " in row["reason"], row["reason"]
    assert runs.cancelled["training"] == "True", runs.cancelled  # its log had training lines when it was cancelled
    assert (torch[torch["batch_size_per_device"] != CANCEL_BATCH]["status"] == "ok").all()


def test_d_a_case_pending_on_a_drained_node_waits_and_completes_once_resumed(runs: Runs):
    seen = runs.drained
    assert seen and seen["two_nodes"] and "error" not in seen, seen
    assert seen["still"] == "PENDING", seen  # still waiting after 4 of the trigger's polls
    # Slurm 22.05 says either, by when it looks (squeue writes the second with blanks, scontrol with underscores)
    assert re.match(r"ReqNodeNotAvail|Nodes[_ ]required[_ ]for[_ ]job[_ ]are[_ ]DOWN", str(seen["reason"])), seen
    mxnet = runs.store.results(run_id=runs.mxnet_id)
    (row,) = mxnet[mxnet["nodes"] == 2].to_dict("records")
    assert row["status"] == "ok" and str(_spec(row)["slurm"]["job_id"]) == seen["id"], row


def test_e_on_drained_fail_fails_the_two_node_case_with_slurms_reason(
    runs: Runs, cluster: SlurmCluster, module_pg_url: str, tmp_path: Path
):
    """torch1 drained, on_drained fail: the 2n1g case is cancelled after two looks and fails with the reason; the
    1n1g case of the same run is ok (it runs on torch0)."""
    suite = suite_yaml("pytorch_reference", topologies=["1n1g", "2n1g"])
    cluster.drain("torch1", "dlperf-e2e-fail")
    try:
        run = start_run(cluster, tmp_path, module_pg_url, "drained", suite, inventory_yaml("torch", on_drained="fail"))
        run_id = run.wait(300, failed=True)
    finally:
        cluster.resume("torch1")
    SECONDS["drained-fail run"] = run.seconds
    rows = runs.store.results(run_id=run_id)
    by_nodes = {row["nodes"]: row for row in rows.to_dict("records")}
    assert by_nodes[1]["status"] == "ok" and by_nodes[1]["throughput"] > 0, by_nodes[1]
    failed = by_nodes[2]
    assert failed["status"] == "failed" and "on_drained: fail" in failed["reason"], failed
    assert re.search(
        r"ReqNodeNotAvail,_UnavailableNodes:torch1|Nodes[_ ]required[_ ]for[_ ]job[_ ]are[_ ]DOWN", failed["reason"]
    ), failed
    assert squeue(cluster, "torch") == []  # its job was cancelled, none left


@pytest.mark.skipif(not LONG, reason="runs in `make chaos` (DLPERF_CHAOS=all): a time limit costs 2 minutes")
def test_f_a_case_past_its_time_limit_fails_with_timeouts_reason(
    runs: Runs, cluster: SlurmCluster, module_pg_url: str, tmp_path: Path
):
    """time_limit 1 (minute) and a training longer than the minute plus slurmctld's check (every 30 s): 6000
    iterations, about 200 s at 1n1g on an idle 2-core machine; slurmctld ends the job TIMEOUT (KillWait 5 s) between
    60 and 95 s after its start."""
    suite = suite_yaml("pytorch_reference", topologies=["1n1g"], measured_iterations=6000)
    run = start_run(cluster, tmp_path, module_pg_url, "timeout", suite, inventory_yaml("torch", time_limit=1))
    run_id = run.wait(400, failed=True)
    SECONDS["timeout run"] = run.seconds
    (row,) = runs.store.results(run_id=run_id).to_dict("records")
    assert row["status"] == "failed" and "TIMEOUT" in row["reason"], row
    assert _spec(row)["slurm"]["job_id"] and "time limit" in row["reason"].lower(), row["reason"]
