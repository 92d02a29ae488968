"""Reproduce any data point with one command: every result the DAG stores keeps its launch spec
(``results.launch_spec``, :mod:`dlperf_core.run.launch_spec`), and ``dlperf reproduce RUN_ID CASE_KEY`` prints it as
shell commands or, with ``--run``, re-runs the point through the DAG as a new run. The DAG's store step keeping
the spec, and collect_case merging the node tasks' specs: tests/airflow_plugin/test_steps.py, test_node_step.py.

Real parts throughout: jobs built by ``build_job`` for the real runtimes, the real store (SQLite), the real CLI;
the docker test runs a suite on the docker-local stand-in nodes, runs the printed lines with bash, parses the
log they write and re-runs the point with ``--run``."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from dataclasses import replace
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml

from dlperf_core.cluster.inventory import Inventory, load_inventory
from dlperf_core.errors import ConfigError
from dlperf_core.model import RunIds, series_base
from dlperf_core.parsing import parse_file
from dlperf_core.plan.cases import PlanFilters, plan_searches, plan_suite
from dlperf_core.plan.form_overrides import apply_form
from dlperf_core.plan.reproduce import reproduce_form, reproduce_params
from dlperf_core.plan.suite import load_suite
from dlperf_core.plan.trigger_form import TriggerForm
from dlperf_core.run.commands import DryRunDocker
from dlperf_core.run.jobs import build_job
from dlperf_core.run.launch_spec import (
    REMOVED,
    ContainerSettings,
    ImageRef,
    LaunchSpec,
    dlperf_version,
    docker_node,
    is_secret_name,
    pick_digest,
    scrub_argv,
    scrub_env,
    shell_script,
)
from dlperf_core.run.runtime.local import LocalRuntime
from dlperf_core.storage import ResultStore
from e2e_helpers import docker_output, run_ok
from helpers import (
    DLPERF,
    REPO,
    TINY_DOCKER_SUITE,
    cli_env,
    dlperf_containers,
    docker_marks,
    result_record,
    run_id_of,
    run_record,
)

IDS = RunIds("dlperf_benchmark", "manual__repro")
IMAGE = "dlperf/pytorch-reference:cpu"
SECRETS = {
    "HF_TOKEN": "hf_s3cr3tvalue",
    "AWS_SECRET_ACCESS_KEY": "aws-s3cr3t",
    "WANDB_API_KEY": "wandb-s3cr3t",
    "DOCKER_AUTH_CONFIG": "auth-s3cr3t",
    "DB_PASSWORD": "pw-s3cr3t",
}
PLAIN = {
    "PYTHONUNBUFFERED": "1",
    "TOKENIZERS_PARALLELISM": "false",  # "tokenizers" is not a token
    "SSH_KEY_FILE": "/keys/id",  # names where a key is, and is kept
    "DLPERF_REGISTRY_PASSWORD_ENV": "REG_PW",
    "MASTER_PORT": "29500",
}


def smoke_job(inventory: Inventory, topology: str = "1n1g", runtime=None, env: dict[str, str] | None = None):
    """The job of the smoke suite's ResNet-50 at ``topology`` (repeat 0) on ``inventory``, with ``env`` added to
    every node's launch and container: what the runtime would start."""
    runs = plan_suite(load_suite(REPO / "suites/smoke.yaml"), inventory)
    run = next(r for r in runs if r.case.framework == "pytorch_reference" and r.case.topology == topology)
    job = build_job(run, inventory, runtime or DryRunDocker(), IDS, timeout_s=60, watchdog_s=None)
    if env:
        launches = tuple(replace(launch, env={**launch.env, **env}) for launch in job.launches)
        containers = tuple(replace(c, environment={**c.environment, **env}) for c in job.containers)
        job = replace(job, launches=launches, containers=containers)
    return run, job


def real_cluster() -> Inventory:
    """Two nvidia nodes as a GPU cluster's inventory says them: host network, InfiniBand, memlock, a mount."""
    common = dict(
        gpus=2,
        accelerator="nvidia",
        network="host",
        infiniband=True,
        memlock=True,
        mounts=[{"source": "/data/imagenet", "target": "/data", "read_only": True}],
        docker_url="tcp://bench:other@10.0.0.1:2376",  # a fake the secret scanner knows
        docker={"insecure": True},
    )
    return Inventory.model_validate(
        {"name": "gpu", "nodes": [{"name": "g0", "address": "10.0.0.1", **common}, {"name": "g1", **common}]}
    )


# --------------------------------------------------------------------------- (a) the spec: round trip, secrets


def test_secret_names_are_told_from_plain_ones():
    assert all(is_secret_name(name) for name in SECRETS)
    assert all(is_secret_name(flag) for flag in ("--api-key", "--hf-token", "password", "--client-secret", "apikey"))
    assert not any(is_secret_name(name) for name in PLAIN)
    assert not any(is_secret_name(flag) for flag in ("--batch-size", "--image-size", "--keep-going", "--width"))


def test_secrets_are_removed_from_environment_and_argv():
    env, removed = scrub_env({**SECRETS, **PLAIN, "DB_URL": "postgresql://dlperf:pw@db:5432/r"})
    assert env == {**PLAIN, "DB_URL": "postgresql://dlperf:" + REMOVED + "@db:5432/r"}
    assert set(removed) == {f"env {name}" for name in SECRETS} | {"env DB_URL (URL password)"}

    argv, removed = scrub_argv(
        ("train.py", "--api-key=k-s3cr3t", "--password", "pw-s3cr3t", "--batch-size", "8", "--data", "s3://a:other@c/d")
    )
    assert argv == (
        "train.py",
        f"--api-key={REMOVED}",
        "--password",
        REMOVED,
        "--batch-size",
        "8",
        "--data",
        "s3://a:" + REMOVED + "@c/d",
    )
    assert removed == ("argv --api-key", "argv --password", "argv URL password")


def test_the_docker_spec_keeps_every_setting_and_survives_json_without_any_secret():
    inventory = real_cluster()
    run, job = smoke_job(inventory, topology="2n1g", env=SECRETS)  # 2n1g: a container on each node
    image = ImageRef(IMAGE, "sha256:" + "a" * 64, "registry.example.com/dlperf/pytorch-reference@sha256:" + "b" * 64)
    nodes = tuple(docker_node(launch, spec, image, "/workspace") for launch, spec in zip(job.launches, job.containers))
    spec = LaunchSpec(
        case_key=run.case.key,
        repeat=run.repeat,
        nodes=nodes,
        suite="suites/smoke.yaml",
        inventory="inv.yaml",
        log_format="ngc_pytorch_dllogger",
        warmup=3,
        measured=10,
    )
    text = json.dumps(spec.to_json())
    assert LaunchSpec.from_json(json.loads(text)) == spec
    assert not any(value in text for value in (*SECRETS.values(), "bench:other@"))
    g0 = spec.nodes[0]
    assert (g0.node, g0.address, g0.rank, g0.runtime, g0.working_dir) == ("g0", "10.0.0.1", 0, "docker", "/workspace")
    assert g0.engine == "tcp://10.0.0.1:2376"  # the engine, never its credentials
    assert g0.dlperf_version == version("dlperf") == dlperf_version()
    assert g0.argv == job.containers[0].command and g0.env["PYTHONUNBUFFERED"] == "1"
    assert set(g0.removed) == {f"env {name}" for name in SECRETS}
    settings = g0.container
    assert settings == ContainerSettings.of(job.containers[0])
    assert settings is not None
    assert (settings.network, settings.gpus, settings.ipc, settings.devices) == (
        "host",
        "device=0",  # 2n1g: one GPU of each node
        "host",
        ("/dev/infiniband:/dev/infiniband:rwm",),
    )
    assert (settings.cap_add, settings.ulimits) == (("IPC_LOCK",), ("memlock=-1:-1",))
    assert [(m.source, m.target, m.read_only) for m in settings.mounts] == [("/data/imagenet", "/data", True)]
    assert settings.labels["dlperf.run_id"] == IDS.run_id and settings.labels["dlperf.node"] == "g0"

    script = shell_script(spec, run_id=IDS.run_id, dag_id=IDS.dag_id, figure="812.50 samples/s")
    assert "all nodes at once" in script and "env HF_TOKEN" in script  # said, not its value
    assert not any(value in script for value in SECRETS.values())
    runs = [shlex.split(line.split(" 2>&1 | tee ")[0]) for line in script.splitlines() if line.startswith("docker run")]
    assert len(runs) == 2
    first = runs[0]
    assert (
        first[:3] == ["docker", "run", "--rm"] and "--gpus" in first and first[first.index("--gpus") + 1] == "device=0"
    )
    assert first[first.index("--ulimit") : first.index("--ulimit") + 2] == ["--ulimit", "memlock=-1:-1"]
    assert "type=bind,source=/data/imagenet,target=/data,readonly" in first
    assert first[first.index("HF_TOKEN") - 1 : first.index("HF_TOKEN") + 1] == ["--env", "HF_TOKEN"]  # your value
    assert first[first.index(image.id) + 1 :] == list(g0.argv)  # run by image ID, then exactly the argv that ran
    assert f"docker pull {image.digest}" in script


def test_per_case_ssh_keys_are_kept_by_path_only():
    """An mpirun case across two stand-in nodes: its containers get fresh ssh keys before start; the spec names
    the files, never their content, and the printed commands say so (sshd node first)."""
    inventory = load_inventory(REPO / "inventories/docker-local.yaml")
    suite = load_suite(REPO / "tests/data/mpi-suite.yaml")
    run = next(r for r in plan_suite(suite, inventory) if r.case.topology == "2n1g")
    job = build_job(run, inventory, DryRunDocker(), IDS, timeout_s=60, watchdog_s=None)
    assert all(c.files for c in job.containers)
    nodes = tuple(docker_node(launch, c, ImageRef(IMAGE)) for launch, c in zip(job.launches, job.containers))
    spec = LaunchSpec(case_key=run.case.key, repeat=0, nodes=nodes)
    text = json.dumps(spec.to_json())
    assert "PRIVATE KEY" not in text and not any(f.content.decode() in text for f in job.containers[0].files)
    assert nodes[0].container is not None
    assert nodes[0].container.files == tuple(f.path for f in job.containers[0].files)
    script = shell_script(spec, run_id="r", dag_id="d")
    assert "per-case ssh keys) are not stored" in script
    assert script.index("# node node1: rank 1 (sshd)") < script.index("# node node0: rank 0 (launcher)")


def test_the_local_spec_is_the_command_the_runtime_starts():
    inventory = load_inventory(REPO / "inventories/local.yaml")
    runtime = LocalRuntime()
    run, job = smoke_job(inventory, topology="1n2g", runtime=runtime)  # 1n2g
    nodes = runtime.node_specs(job)
    argv, env = runtime.node_command(job, 0)
    assert len(nodes) == 1 and nodes[0].argv == argv and nodes[0].env == env and nodes[0].image is None
    assert nodes[0].runtime == "local" and nodes[0].working_dir == str(Path.cwd())
    spec = LaunchSpec(case_key=run.case.key, repeat=0, nodes=nodes)
    assert LaunchSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec
    script = shell_script(spec, run_id="r", dag_id="d")
    command = [line for line in script.splitlines() if not line.startswith("#") and line][0]
    assert command.startswith(f"(cd {shlex.quote(str(Path.cwd()))} && env ")
    inner = shlex.split(command[command.index("env ") : command.rindex(") 2>&1")])
    assert inner[0] == "env" and inner[len(env) + 1 :] == list(argv)


STORED_SPECS = REPO / "tests/data/json_forms/launch_specs.json"
"""Launch specs as ``results.launch_spec`` held them when the form was still written by hand (a docker case on two
nodes with secrets removed, an mpirun case with per-case ssh keys, a local case)."""


def test_a_stored_launch_spec_reads_back_and_is_written_again_unchanged():
    """The column's JSON is generated from the types now: a spec stored before reads back, and its JSON form is
    the stored text again (same keys, same order, same values), so old rows keep decoding and new rows look the
    same."""
    stored = json.loads(STORED_SPECS.read_text())
    assert set(stored) == {"docker_2n1g", "mpi_2n1g", "local_1n2g"}
    for name, data in stored.items():
        spec = LaunchSpec.from_json(data)
        assert json.dumps(spec.to_json()) == json.dumps(data), name
        assert LaunchSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec
        assert shell_script(spec, run_id="r", dag_id="d").startswith(f"# dlperf reproduce: {spec.case_key} ")
    docker = LaunchSpec.from_json(stored["docker_2n1g"])
    g0 = docker.nodes[0]
    assert (docker.format, docker.warmup, docker.measured, docker.log_format) == (1, 3, 10, "ngc_pytorch_dllogger")
    assert g0.image is not None and g0.image.digest and g0.image.id == "sha256:" + "a" * 64
    assert g0.container is not None and g0.container.mounts[0].target == "/data" and g0.container.mounts[0].read_only
    assert isinstance(g0.argv, tuple) and isinstance(g0.container.devices, tuple)
    assert "env HF_TOKEN" in g0.removed and g0.engine == "tcp://10.0.0.1:2376"
    mpi = LaunchSpec.from_json(stored["mpi_2n1g"])
    assert [n.role for n in mpi.nodes] == ["launcher", "sshd"] and all(
        n.container and n.container.files for n in mpi.nodes
    )
    local = LaunchSpec.from_json(stored["local_1n2g"])
    assert local.runtime == "local" and local.nodes[0].image is None and local.nodes[0].container is None


def test_node_routing_merges_what_each_node_saw_itself():
    inventory = real_cluster()
    run, job = smoke_job(inventory, topology="2n1g")
    tags = [docker_node(launch, spec, ImageRef(IMAGE)) for launch, spec in zip(job.launches, job.containers)]
    base = LaunchSpec(case_key=run.case.key, repeat=0, nodes=tuple(tags))
    seen_by_g1 = LaunchSpec(
        case_key=run.case.key,
        repeat=0,
        nodes=(tags[0], docker_node(job.launches[1], job.containers[1], ImageRef(IMAGE, "sha256:1"))),
    )
    merged = base.merged({"g0": base, "g1": seen_by_g1})
    assert [n.image.id if n.image else None for n in merged.nodes] == [None, "sha256:1"]
    assert base.merged({}) == base  # no node said more than the plan
    # collect_case's merge of the node tasks' reports: tests/airflow_plugin/test_node_step.py


def test_the_registry_digest_is_the_tags_repository():
    digests = ["mirror.example.com/x@sha256:1", "registry.example.com/dlperf/pt@sha256:2"]
    assert pick_digest(digests, "registry.example.com/dlperf/pt:24.01") == "registry.example.com/dlperf/pt@sha256:2"
    assert pick_digest(digests, "other:tag") == "mirror.example.com/x@sha256:1"
    assert pick_digest([], IMAGE) is None and pick_digest(None, IMAGE) is None


# --------------------------------------------------------------------------- planning one case by its key


def test_the_plan_can_hold_one_case_by_its_key():
    suite = load_suite(REPO / "suites/smoke.yaml")
    inventory = load_inventory(REPO / "inventories/local.yaml")
    every = plan_suite(suite, inventory)
    key = every[0].case.key
    assert {r.case.framework for r in every} >= {"pytorch_reference", "allreduce_probe"}
    only = plan_suite(suite, inventory, PlanFilters(case_keys=(key,), repeats=1))
    assert [(r.case.key, r.repeat) for r in only] == [(key, 0)]  # no fabric probe beside it
    probe = next(r.case.key for r in every if r.case.framework == "allreduce_probe")
    assert [r.case.key for r in plan_suite(suite, inventory, PlanFilters(case_keys=(probe,)))] == [probe]
    maxbatch = load_suite(REPO / "tests/data/maxbatch/suite.yaml")
    assert plan_searches(maxbatch, load_inventory(REPO / "inventories/docker-local.yaml"))
    assert plan_searches(maxbatch, inventory, PlanFilters(case_keys=(key,))) == []  # a search is not a case


def test_a_case_key_the_suite_does_not_plan_is_refused_before_any_work():
    suite = load_suite(REPO / "suites/smoke.yaml")
    key = plan_suite(suite, load_inventory(REPO / "inventories/local.yaml"))[0].case.key
    other = series_base(key) + "+args=00000000"
    with pytest.raises(ConfigError) as refused:
        apply_form(suite, TriggerForm(case_keys=(other,)))
    assert other in str(refused.value) and f"the suite has {key}" in str(refused.value)
    # the batch size override comes first: b4 is a case of the suite at batch 4
    b4 = plan_suite(apply_form(suite, TriggerForm(batch_size=4)), load_inventory(REPO / "inventories/local.yaml"))
    b4_key = b4[0].case.key
    with pytest.raises(ConfigError):
        apply_form(suite, TriggerForm(case_keys=(b4_key,)))
    assert apply_form(suite, TriggerForm(case_keys=(b4_key,), batch_size=4)).batch_size_per_device == 4


def test_reproduce_params_rebuild_the_stored_configuration_or_say_how_the_suite_changed(tmp_path):
    suite = load_suite(REPO / "suites/smoke.yaml")
    case = plan_suite(suite, load_inventory(REPO / "inventories/local.yaml"))[0].case
    params = reproduce_params(suite, case.configuration, case.key)
    assert params == {"case_keys": [case.key], "repeats": 1, "batch_size": 32, "compile": "eager"}
    form = reproduce_form(suite, case.configuration, case.key)  # the typed form those params are
    assert form == TriggerForm(case_keys=(case.key,), repeats=1, batch_size=32, compile="eager")
    assert form.to_params() == params and TriggerForm.from_params(params) == form
    data = yaml.safe_load((REPO / "suites/smoke.yaml").read_text())
    data["benchmarks"][0]["extra_args"] = ["--image-size", "32", "--width", "16", "--device", "cpu"]
    changed = tmp_path / "smoke.yaml"
    changed.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as refused:
        reproduce_params(load_suite(changed), case.configuration, case.key)
    assert "differs from the stored configuration in extra_args: stored [" in str(refused.value)


# --------------------------------------------------------------------------- (c) refusals


def _cli(tmp_path: Path, db: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DLPERF, "reproduce", *args, "--db", db],
        cwd=REPO,
        env=cli_env(tmp_path, db),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_reproduce_refuses_what_it_cannot_reproduce_and_prints_nothing(tmp_path, monkeypatch, capsys):
    """The command itself (a subprocess) prints a stored spec; then each refusal, through dlperf's ``main`` in
    this process (a subprocess each would spend seconds on imports): exit 2, a reason, nothing on stdout."""
    from dlperf_cli.main import main

    db = f"sqlite:///{tmp_path / 'r.db'}"
    monkeypatch.setenv("DLPERF_DB_URL", db)  # what --db sets (and monkeypatch restores)
    inventory = load_inventory(REPO / "inventories/local.yaml")
    runtime = LocalRuntime()
    run, job = smoke_job(inventory, runtime=runtime)
    key = run.case.key
    changed = tmp_path / "smoke.yaml"  # the suite the row was planned from, changed since
    data = yaml.safe_load((REPO / "suites/smoke.yaml").read_text())
    data["measured_iterations"] = 12
    changed.write_text(yaml.safe_dump(data))
    inventory_file = str(REPO / "inventories/local.yaml")
    spec = LaunchSpec(
        case_key=key,
        repeat=0,
        nodes=runtime.node_specs(job),
        suite=str(changed),
        inventory=inventory_file,
        log_format="ngc_pytorch_dllogger",
        warmup=3,
        measured=10,
    )
    gone = replace(spec, suite=str(tmp_path / "gone.yaml"), log_format=None, warmup=None, measured=None)
    common = dict(case_key=key, configuration=run.case.configuration)
    store = ResultStore(db)
    store.ensure_schema()
    store.upsert_results(
        [
            result_record(run_id="r1", repeat=0, status="failed", reason="boom", throughput=None, **common),
            result_record(run_id="r1", repeat=1, launch_spec=replace(spec, repeat=1).to_json(), **common),
            result_record(run_id="r1", repeat=2, **common),  # before migration 0010: no launch spec
            result_record(run_id="r2", repeat=0, launch_spec=gone.to_json(), **common),
            result_record(
                benchmark_run=run_record(run_id="imported", trigger="import"), figure_origin="imported", **common
            ),
        ]
    )
    store.dispose()

    printed = _cli(tmp_path, db, "r1", key)  # the first ok repeat: 1
    assert printed.returncode == 0, printed.stderr
    assert (
        printed.stdout.startswith(f"# dlperf reproduce: {key} repeat 1 of run r1")
        and "100.00 samples/s" in printed.stdout
    )
    assert main(["reproduce", "r1", series_base(key), "--repeat", "1", "--db", db]) == 0  # without +args=: one case
    assert capsys.readouterr().out == printed.stdout

    refusals = {
        ("nope", key): "no results for run nope",
        ("r1", "pt/resnet50/fp32/b8/1n1g"): "has no case pt/resnet50/fp32/b8/1n1g",
        ("r1", key, "--repeat", "7"): "has no repeat 7 (its repeats: 0, 1, 2)",
        ("r1", key, "--repeat", "0"): "without a launch spec",  # failed, and stored by an older dlperf
        ("r1", key, "--repeat", "2"): "before migration 0010",
        ("imported", key): "imported from a log (dlperf import)",
        ("r1", key, "--run"): "differs from the stored configuration in measured_iterations: stored 30, now 12",
        ("r2", key, "--run"): f"the suite file it was planned from ({tmp_path / 'gone.yaml'}) is not here",
    }
    for args, reason in refusals.items():
        code = main(["reproduce", *args, "--db", db])
        out, err = capsys.readouterr()
        assert (code, out) == (2, ""), (args, out, err)
        assert "dlperf reproduce: " in err and reason in err, (args, err)


# --------------------------------------------------------------------------- (b) on the docker runtime


def _remove_reproduced_containers() -> None:
    ids = docker_output("ps", "-aq", "--filter", "label=dlperf.reproduced=true").split()
    if ids:
        subprocess.run(["docker", "rm", "-f", *ids], capture_output=True, check=False)


def test_reproduce_on_docker_prints_what_ran_and_reruns_it(tmp_path, pg_url):
    """1n1g of the smoke workload on the docker-local stand-in nodes through `dlperf run`; the printed lines run
    by bash write a log dlperf's parser reads a figure from; `--run` stores a second row as a new run."""
    suite = tmp_path / "tiny.yaml"
    suite.write_text(yaml.safe_dump({**TINY_DOCKER_SUITE, "name": "reproduce-tiny"}))
    env = cli_env(tmp_path, pg_url, DLPERF_REPORT_DIR=str(tmp_path / "reports"))
    out = run_ok([*DLPERF, "run", str(suite), "--runtime", "docker"], env=env, timeout=600)
    run_id, store = run_id_of(out.stdout), ResultStore(pg_url)
    row = store.results(run_id=run_id).iloc[0]
    assert row["status"] == "ok", row["reason"]
    key, spec = row["case_key"], LaunchSpec.from_json(row["launch_spec"])
    image_id = docker_output("image", "inspect", "--format", "{{.Id}}", IMAGE).strip()
    node = spec.nodes[0]
    assert (spec.runtime, spec.suite, node.node, node.image) == (
        "docker",
        str(suite),
        "node0",
        ImageRef(IMAGE, image_id),
    )
    assert node.container is not None and node.container.network == "dlperf-net" and node.container.shm_size == "1g"

    script = run_ok([*DLPERF, "reproduce", run_id, key], env=env, timeout=120).stdout
    assert f"id {image_id}" in script
    run_line = next(line for line in script.splitlines() if line.startswith("docker run --rm "))
    flags = shlex.split(run_line.split(" 2>&1 | tee ")[0])
    settings = ["--network", "dlperf-net", "--hostname", "node0", "--network-alias", "node0", "--shm-size", "1g"]
    assert " ".join(settings) in " ".join(flags) and flags[flags.index(image_id) + 1 :] == list(node.argv)
    by_hand = tmp_path / "by-hand"
    by_hand.mkdir()
    try:  # the printed lines, as printed, with bash
        ran = subprocess.run(["bash", "-c", script], cwd=by_hand, capture_output=True, text=True, timeout=300)
    finally:
        _remove_reproduced_containers()
    log = by_hand / "node0.log"
    assert log.is_file(), ran.stderr[-3000:]
    parsed = parse_file(log, format=spec.log_format, warmup=spec.warmup, measured=spec.measured)
    assert parsed and parsed[0].status == "ok" and parsed[0].throughput > 0, (parsed, ran.stderr[-3000:])
    assert docker_output("ps", "-aq", "--filter", "label=dlperf.reproduced=true").split() == []  # --rm

    again = run_ok([*DLPERF, "reproduce", run_id, key, "--run"], env=env, timeout=600)
    line = again.stdout.strip().splitlines()[-1]
    found = re.fullmatch(
        rf"reproduced {re.escape(key)}: ([\d.]+) samples/s vs ([\d.]+) in {re.escape(run_id)} "
        r"\(([+-][\d.]+)%\); new run (\S+)",
        line,
    )
    assert found, again.stdout
    rows = store.results()
    rows = rows[rows["case_key"] == key]
    assert sorted(rows["run_id"]) == sorted([run_id, found[4]]) and found[4] != run_id
    new = rows[rows["run_id"] == found[4]].iloc[0]
    assert new["status"] == "ok" and float(found[1]) == pytest.approx(new["throughput"], abs=0.01)
    assert LaunchSpec.from_json(new["launch_spec"]).nodes[0].image == node.image
    assert dlperf_containers() == []
    store.dispose()


for _mark in docker_marks(IMAGE):  # docker, postgres, and skipped without an engine or the image
    test_reproduce_on_docker_prints_what_ran_and_reruns_it = _mark(
        test_reproduce_on_docker_prints_what_ran_and_reruns_it
    )
