"""A Slurm case run through the real DAG in ``dag.test()``: ``run_case`` submits, defers to the Slurm trigger (which
``dag.test()`` runs inline, as Airflow 3.3 does), resumes when the job ended and hands over the same ExecutedRun a
docker case run does; ``store_result`` stores it as any other.

The login node is a real sshd on loopback (tests/airflow_plugin/test_ssh_preflight.py's) reached through a real
Airflow SSH connection (host key checked) by both sides: the worker's SSHHook (paramiko: sbatch, SFTP for the batch
script and the logs) and the trigger's SSHHookAsync (asyncssh: scontrol). Slurm itself is a stand-in of a few
lines of bash on the login node's PATH: ``sbatch`` runs the batch script dlperf wrote (the core's, as on a real
cluster) in the background on this machine as a one-node job, ``srun`` starts its node's launch, ``scontrol`` says
the job's state in Slurm 22.05's one-line form and names its host, ``scancel`` kills it, ``sinfo`` gives a version,
``squeue`` lists nothing, ``sacct`` has no slurmdbd; ``python3`` is this virtual environment's python with the
workload where the framework images have it (``/opt/dlperf/workload``). The training is real (the smoke suite's
reference ResNet, 1n1g). The same on a real deployment (scheduler, triggerer, PostgreSQL): while deferred the task
holds the dlperf_cluster pool (it counts deferred tasks), and a deferred task marked failed cancels its job through
the trigger's on_kill. A real Slurm: tests/e2e/test_slurm_cluster.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from test_ssh_preflight import SSHD, Sshd, _free_port

from airflow_stack import prepare_stack, start_stack
from dlperf_core.run.runtime.local import WORKLOAD_DIR
from helpers import REPO, cli_env

CONN_ID = "dlperf_slurm_test_login"

SBATCH = r"""#!/bin/bash
# stand-in sbatch --parsable SCRIPT: the job runs SCRIPT on this machine, in the background, after a second PENDING
script="${@: -1}"
id=$(( $(cat "@LOGIN@/next" 2>/dev/null || echo 100) + 1 )); echo "$id" > "@LOGIN@/next"
d="@LOGIN@/jobs/$id"; mkdir -p "$d"
echo PENDING > "$d/state"; date +%Y-%m-%dT%H:%M:%S > "$d/submit"
out=$(sed -n 's/^#SBATCH --output=//p' "$script")
nodes=$(sed -n 's/^#SBATCH --nodes=//p' "$script")
# the job's environment is the submitter's (as Slurm's), the stand-ins first, and not an ssh session's (whose bash
# would read ~/.bashrc again)
setsid env -u SSH_CLIENT -u SSH2_CLIENT -u SSH_CONNECTION PATH="@LOGIN@/bin:$PATH" bash -c '
  d=$0; sleep 1; echo RUNNING > "$d/state"; date +%Y-%m-%dT%H:%M:%S > "$d/start"
  while [ -e "@LOGIN@/hold" ]; do sleep 0.2; done  # a test holds its jobs RUNNING while this file exists
  SLURM_JOB_ID=$1 SLURM_JOB_NODELIST=localhost SLURM_NNODES=$3 bash "$2" > "$4" 2>&1; rc=$?
  date +%Y-%m-%dT%H:%M:%S > "$d/end"; echo "$rc:0" > "$d/exit"
  if [ -e "$d/cancelled" ]; then echo CANCELLED > "$d/state"; elif [ "$rc" = 0 ]; then echo COMPLETED > "$d/state";
  else echo FAILED > "$d/state"; fi
' "$d" "$id" "$script" "$nodes" "$out" < /dev/null > /dev/null 2>&1 &
echo $! > "$d/pid"
echo "$id"
"""
SCONTROL = r"""#!/bin/bash
# stand-in scontrol: show hostnames LIST (this machine, once per node), show job -o ID (22.05's one line)
if [ "$1 $2" = "show hostnames" ]; then for i in $(seq 1 "${SLURM_NNODES:-1}"); do echo localhost; done; exit 0; fi
id="${@: -1}"; d="@LOGIN@/jobs/$id"
echo "$*" >> "@LOGIN@/scontrol.calls"
if [ ! -d "$d" ]; then echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1; fi
v() { cat "$d/$1" 2>/dev/null || echo "$2"; }
echo "JobId=$id JobName=$(basename "$(dirname "$(v script x)")") UserId=$(id -un)($(id -u)) GroupId=root(0)" \
  "MCS_label=N/A Priority=1 Nice=0 Account=(null) QOS=(null) JobState=$(v state PENDING) Reason=None" \
  "Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=$(v exit 0:0) RunTime=00:00:01" \
  "TimeLimit=00:30:00 TimeMin=N/A SubmitTime=$(v submit Unknown) EligibleTime=$(v submit Unknown)" \
  "StartTime=$(v start Unknown) EndTime=$(v end Unknown) Deadline=N/A Partition=debug" \
  "AllocNode:Sid=login:1 NodeList=localhost BatchHost=localhost NumNodes=1 NumCPUs=1"
"""
SRUN = r"""#!/bin/bash
# stand-in srun [options] COMMAND...: COMMAND once per node (SLURM_NODEID), its output in --output (%n: the node)
n=1; out=/dev/null
while [ $# -gt 0 ]; do case "$1" in --nodes=*) n=${1#--nodes=};; --output=*) out=${1#--output=};; --*) ;; *) break;;
esac; shift; done
pids=(); for i in $(seq 0 $((n - 1))); do SLURM_NODEID=$i "$@" > "${out//%n/$i}" 2>&1 & pids+=($!); done
rc=0; for p in "${pids[@]}"; do wait "$p" || rc=$?; done; exit "$rc"
"""
SCANCEL = r"""#!/bin/bash
d="@LOGIN@/jobs/$1"; echo "$1" >> "@LOGIN@/scancel.calls"
[ -d "$d" ] || exit 0
touch "$d/cancelled"; kill -- -"$(cat "$d/pid")" 2>/dev/null
case "$(cat "$d/state")" in PENDING|RUNNING) echo "0:15" > "$d/exit"; echo CANCELLED > "$d/state";; esac
"""
PYTHON3 = r"""#!/bin/bash
# the nodes' python3: this virtual environment's, with the workload where the framework images have it
args=(); for a in "$@"; do args+=("${a//\/opt\/dlperf\/workload/@WORKLOAD@}"); done
PYTHONPATH="@REPO@${PYTHONPATH:+:$PYTHONPATH}" exec "@PYTHON@" "${args[@]}"
"""
OTHERS = {
    "sinfo": '#!/bin/sh\necho "slurm-wlm 22.05.8"\n',
    "squeue": "#!/bin/sh\nexit 0\n",
    "sacct": '#!/bin/sh\necho "sacct: error: Slurm accounting storage is disabled" >&2\nexit 1\n',
}

RUN = r"""
import json, sys
import sqlalchemy as sa
from dlperf_cli.embedded import prepare_environment, run_dag
from dlperf_core.storage import default_db_url

prepare_environment()  # Airflow's configuration first (as run_dag sets it), then Airflow
import airflow.sdk.definitions.dag as dag_module

inline = dag_module._run_inline_trigger  # what dag.test() calls for a task that deferred: seen, not changed
triggers = []

def seen(trigger, ti):
    event = inline(trigger, ti)
    triggers.append({"task": ti.task_id, "trigger": trigger.serialize(), "event": event.payload if event else None})
    return event

dag_module._run_inline_trigger = seen
run = run_dag(json.loads(sys.argv[1]))
engine = sa.create_engine(default_db_url())
with engine.connect() as c:
    rows = [dict(r._mapping) for r in c.execute(sa.text("SELECT case_key, status, reason, throughput, launch_spec FROM results"))]
engine.dispose()
from airflow.models.pool import Pool

pool = Pool.get_pool("dlperf_cluster")
print("RESULT:" + json.dumps({
    "pool": {"slots": pool.slots, "include_deferred": pool.include_deferred},
    "state": str(run.state),
    "tasks": {f"{ti.task_id}[{ti.map_index}]": str(ti.state) for ti in run.get_task_instances()},
    "rows": rows,
    "triggers": triggers,
}, default=str))
"""


@pytest.fixture(scope="module")
def login(tmp_path_factory):
    if not Path(SSHD).exists() or shutil.which("ssh-keygen") is None:
        pytest.skip("openssh-server not installed (scripts/ensure-sshd.sh installs it)")
    if os.geteuid() != 0 and not Path("/run/sshd").is_dir():
        pytest.skip("sshd needs /run/sshd, which only root can create")
    folder = tmp_path_factory.mktemp("slurm-login")
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    scripts = {"sbatch": SBATCH, "scontrol": SCONTROL, "srun": SRUN, "scancel": SCANCEL, "python3": PYTHON3, **OTHERS}
    values = {"@LOGIN@": str(folder), "@WORKLOAD@": str(WORKLOAD_DIR), "@REPO@": str(REPO), "@PYTHON@": sys.executable}
    for name, text in scripts.items():
        for key, value in values.items():
            text = text.replace(key, value)
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (folder / "sshd").mkdir()
    sshd = Sshd(folder / "sshd")
    with sshd.config.open("a") as config:
        config.write(f"SetEnv PATH={bin_dir}:/usr/local/bin:/usr/bin:/bin\nSubsystem sftp internal-sftp\n")
    sshd.start()
    yield folder, sshd
    sshd.stop()
    for pid in (folder / "jobs").glob("*/pid"):  # no job left running
        subprocess.run(["kill", "--", f"-{pid.read_text().strip()}"], capture_output=True)


@pytest.mark.skipif(
    os.environ.get("DLPERF_CHAOS") != "all",
    reason="runs in `make chaos` (DLPERF_CHAOS=all): tests/e2e/test_slurm_e2e.py runs the DAG on a real Slurm in CI",
)
def test_a_slurm_case_defers_while_its_job_runs_and_is_stored_as_any_other(login, tmp_path):
    folder, sshd = login
    inventory = tmp_path / "slurm-inventory.yaml"
    inventory.write_text(
        "name: slurm-stand-in\n"
        f"slurm: {{connection: {CONN_ID}, partition: debug, work_dir: {tmp_path / 'shared'}, poll_s: 1}}\n"
        "nodes:\n  - {name: slot0, gpus: 1}\n"
    )
    connection = {
        "conn_type": "ssh",
        "host": "127.0.0.1",
        "port": sshd.port,
        "login": sshd.user,
        "extra": {"key_file": str(sshd.client_key), "host_key": sshd.host_public_key},
    }
    db = f"sqlite:///{tmp_path / 'dlperf.db'}"
    env = cli_env(
        tmp_path,
        db,
        DLPERF_HOME=str(REPO),
        DLPERF_REPORT_DIR=str(tmp_path / "reports"),
        **{f"AIRFLOW_CONN_{CONN_ID.upper()}": json.dumps(connection)},
    )
    conf = {"suite": "suites/smoke.yaml", "inventory": str(inventory), "topologies": ["1n1g"], "repeats": 1}
    out = subprocess.run(
        [sys.executable, "-c", RUN, json.dumps(conf)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=tmp_path,
    )
    (tmp_path / "dag-test.log").write_text(out.stderr)  # kept with the test's folder
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT:")]
    assert out.returncode == 0 and lines, (out.stdout[-3000:], out.stderr[-8000:])
    got = json.loads(lines[-1].removeprefix("RESULT:"))
    logs = out.stderr  # dlperf run's progress lines (the embedded run keeps Airflow's logs quiet)
    assert got["state"].endswith("success"), (got, logs[-8000:])
    # the pool the embedded run made counts deferred tasks: a case waiting for its job still holds the cluster
    assert got["pool"] == {"slots": 1, "include_deferred": True}
    # each case run's run_case deferred to the Slurm trigger, which dag.test() ran inline from its serialized form,
    # and resumed when the trigger saw its job end
    waits = got["triggers"]
    assert [w["task"] for w in waits] == ["case_run.run_case", "case_run.run_case"], waits
    for wait in waits:
        classpath, kwargs = wait["trigger"]
        assert classpath == "dlperf_airflow.slurm_trigger.SlurmJobTrigger" and kwargs["ssh_conn_id"] == CONN_ID
        assert (kwargs["poll_s"], kwargs["on_drained"]) == (1.0, "wait")
        end = wait["event"]
        assert (end["status"], end["state"], end["reason"]) == ("ended", "COMPLETED", None), end
        assert end["job"]["node_list"] == "localhost" and end["job_id"] == kwargs["job_id"]
    assert sorted(w["event"]["job_id"] for w in waits) == ["101", "102"]
    assert all(state.endswith("success") for task, state in got["tasks"].items() if "case_run." in task), got
    # stored as any other case run: the training's figure (the fabric probe's one rank: in fabric_probes)
    (row,) = got["rows"]
    assert row["case_key"].startswith("pytorch_reference/") and row["status"] == "ok" and row["throughput"] > 0, row
    spec = json.loads(row["launch_spec"]) if isinstance(row["launch_spec"], str) else row["launch_spec"]
    assert spec.get("slurm") and spec["slurm"]["job_id"] in ("101", "102"), sorted(spec)
    assert spec["slurm"]["node_list"] == "localhost" and spec["slurm"]["slurm_version"] == "22.05.8", spec["slurm"]
    assert "allreduce_probe" in logs and "one rank: no fabric to measure" in logs, logs[-3000:]
    looks = (folder / "scontrol.calls").read_text().splitlines()
    assert sum("show job" in line for line in looks) >= 4  # the trigger's looks and the resumed task's, per job
    assert not (folder / "scancel.calls").exists()


def _connection(sshd: Sshd, port: int | None = None) -> str:
    extra = {"key_file": str(sshd.client_key), "host_key": sshd.host_public_key}
    return json.dumps(
        {"conn_type": "ssh", "host": "127.0.0.1", "port": port or sshd.port, "login": sshd.user, "extra": extra}
    )


def test_the_login_shell_runs_commands_and_moves_files_over_ssh(login, tmp_path, monkeypatch):
    from dlperf_airflow.slurm_shell import SshLoginShell

    _, sshd = login
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", _connection(sshd))
    shell = SshLoginShell(CONN_ID)
    try:
        path = f"{tmp_path}/shared/a/b/batch.sh"
        shell.write_file(path, "#!/bin/bash\necho héllo\n")  # its folders made
        assert Path(path).read_text() == "#!/bin/bash\necho héllo\n"
        assert shell.read_file(path) == "#!/bin/bash\necho héllo\n".encode()
        result = shell.run(f"bash {path}; sinfo --version; echo oops >&2; exit 3", 30)
        assert (result.exit_code, result.stdout, result.stderr) == (3, "héllo\nslurm-wlm 22.05.8\n", "oops\n")
        with pytest.raises(FileNotFoundError):
            shell.read_file(f"{tmp_path}/no-such-file")
    finally:
        shell.close()


def test_a_login_node_that_cannot_be_reached_is_named_in_the_cases_reason(login, monkeypatch):
    from dlperf_airflow.runtimes import make_runtime, runtime_error
    from dlperf_airflow.slurm_shell import LoginNodeError
    from dlperf_core.cluster.inventory import Inventory, Node, SlurmSettings

    _, sshd = login
    port = _free_port()
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", _connection(sshd, port))
    slurm = SlurmSettings(connection=CONN_ID, work_dir="/shared/dlperf")
    runtime = make_runtime("slurm", Inventory(name="s", nodes=[Node(name="slot0")], slurm=slurm))
    assert runtime.name == "slurm"
    with pytest.raises(LoginNodeError) as raised:
        runtime.shell.run("sinfo --version", 10)  # type: ignore[attr-defined]
    reason = runtime_error(runtime, [], raised.value)
    assert reason.startswith(f"runtime error: LoginNodeError: login node {sshd.user}@127.0.0.1:{port} "), reason
    assert f"(ssh connection {CONN_ID}): cannot connect" in reason


@pytest.mark.postgres
def test_a_real_scheduler_and_triggerer_hold_the_pool_while_deferred_and_a_failed_task_cancels_its_job(
    login, tmp_path, metadata_url, pg_url
):
    """The same DAG on a real deployment (api-server, scheduler with the LocalExecutor, dag-processor, triggerer; a
    PostgreSQL metadata database): the first case run's job is held RUNNING, its run_case is deferred (no worker)
    and still holds the dlperf_cluster pool (a deferred slot, none open: the next case run waits); marked failed
    from the REST API, the triggerer calls the trigger's on_kill and its job is cancelled (scancel); released, the
    next case run submits, defers and succeeds."""
    folder, sshd = login
    for name in ("scancel.calls", "scontrol.calls", "next"):  # this test's jobs are 101, 102 whatever ran before
        (folder / name).unlink(missing_ok=True)
    shutil.rmtree(folder / "jobs", ignore_errors=True)
    inventory = tmp_path / "slurm-inventory.yaml"
    inventory.write_text(
        "name: slurm-stand-in\n"
        f"slurm: {{connection: {CONN_ID}, partition: debug, work_dir: {tmp_path / 'shared'}, poll_s: 1}}\n"
        "nodes:\n  - {name: slot0, gpus: 1}\n"
    )
    stack = prepare_stack(
        tmp_path / "airflow",
        metadata_url,
        pg_url,
        "dlperf",
        f"pw-{uuid.uuid4().hex[:10]}",
        extra_env={f"AIRFLOW_CONN_{CONN_ID.upper()}": _connection(sshd)},
    )
    hold = folder / "hold"
    hold.touch()
    try:
        start_stack(stack)
        stack.start("triggerer", "triggerer")
        token = stack.token()
        dag = "/api/v2/dags/dlperf_benchmark"
        assert stack.request("PATCH", dag, {"is_paused": False}, token=token)[0] == 200
        conf = {"suite": "suites/smoke.yaml", "inventory": str(inventory), "topologies": ["1n1g"], "repeats": 1}
        status, body = stack.request("POST", f"{dag}/dagRuns", {"logical_date": None, "conf": conf}, token=token)
        assert status == 200, body
        run = f"{dag}/dagRuns/{body['dag_run_id']}"  # type: ignore[index]

        def run_cases() -> list[dict]:
            tis = stack.request("GET", f"{run}/taskInstances?limit=100", token=token)[1]
            return [t for t in tis["task_instances"] if t["task_id"] == "case_run.run_case"]  # type: ignore[index]

        deferred = stack.wait_until(
            "a deferred run_case", lambda: [t for t in run_cases() if t["state"] == "deferred"], 420
        )
        (waiting,) = deferred
        pool = stack.request("GET", "/api/v2/pools/dlperf_cluster", token=token)[1]
        assert pool["include_deferred"] is True, pool  # type: ignore[index]
        assert (pool["deferred_slots"], pool["open_slots"], pool["running_slots"]) == (1, 0, 0), pool  # type: ignore[index]
        time.sleep(5)  # the other case run stays out of the cluster while this one waits
        others = [t for t in run_cases() if t["map_index"] != waiting["map_index"]]
        assert all(t["state"] in (None, "scheduled") for t in others), others
        assert sorted(p.name for p in (folder / "jobs").iterdir()) == ["101"]  # one job submitted

        path = f"{run}/taskInstances/case_run.run_case/{waiting['map_index']}"
        status, body = stack.request("PATCH", path, {"new_state": "failed"}, token=token)
        assert status == 200, body
        stack.wait_until("the job cancelled by on_kill", lambda: (folder / "scancel.calls").exists(), 120)
        assert (folder / "scancel.calls").read_text().split() == ["101"]

        hold.unlink()
        final = stack.wait_until(
            "the DAG run to end",
            lambda: (s := stack.request("GET", run, token=token)[1]["state"]) in ("success", "failed") and s,  # type: ignore[index]
            420,
        )
        assert final == "failed"  # one case run was marked failed
        states = {t["map_index"]: t["state"] for t in run_cases()}
        assert states[waiting["map_index"]] == "failed"
        assert [s for i, s in states.items() if i != waiting["map_index"]] == ["success"], states
        assert (folder / "jobs" / "102" / "state").read_text().strip() == "COMPLETED"
        assert (folder / "jobs" / "101" / "state").read_text().strip() == "CANCELLED"
    finally:
        hold.unlink(missing_ok=True)
        stack.stop()
