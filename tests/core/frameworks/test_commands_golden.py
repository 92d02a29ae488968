"""The exact commands of the five seed benchmarks: golden files, and checks against the seeds' own scripts.

Golden files (tests/golden/<framework>.txt) hold every node's command and container settings for every topology
and precision of suites/seeds.yaml on the seeds' cluster (tests/data/seed-cluster.yaml), and tests/golden/releases/
the same for each release the seeds did not run (e.g. ngc_pytorch 25.12). After an
intended change, regenerate them with ``DLPERF_UPDATE_GOLDEN=1 pytest tests/core/frameworks/test_commands_golden.py``
and review the diff.
"""

from __future__ import annotations

import os
import re
import shlex

import pytest

from dlperf_core.cluster.inventory import load_inventory
from dlperf_core.frameworks import ADAPTERS, LaunchContext, get_adapter
from dlperf_core.frameworks.releases import DEFAULT_RELEASE, RELEASES, Release
from dlperf_core.model import Case, CaseRun
from dlperf_core.plan.cases import PlanFilters, expand_cases
from dlperf_core.plan.suite import Suite, load_suite
from dlperf_core.run.commands import GOLDEN_IDS, DryRunDocker, suite_commands
from dlperf_core.run.jobs import build_job
from helpers import REPO, SHARED

GOLDEN = REPO / "tests" / "golden"
SEEDS = SHARED / "seeds"
SEED_FRAMEWORKS = ["ngc_pytorch", "ngc_mxnet", "mindspore", "oneflow", "paddle_plsc"]
TOPOLOGIES = ["1n1g", "1n2g", "1n4g", "1n8g", "2n8g", "4n8g"]


@pytest.fixture(scope="module")
def seed_suite():
    return load_suite(REPO / "suites" / "seeds.yaml")


@pytest.fixture(scope="module")
def cluster():
    return load_inventory(REPO / "tests" / "data" / "seed-cluster.yaml")


@pytest.mark.parametrize("framework", SEED_FRAMEWORKS)
def test_golden_commands(framework, seed_suite, cluster):
    text = suite_commands(seed_suite, cluster, PlanFilters(frameworks=(framework,)))
    path = GOLDEN / f"{framework}.txt"
    if os.environ.get("DLPERF_UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"no golden file {path}; run with DLPERF_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"commands of {framework} changed; review and regenerate {path.name}"
    # every topology of the issue, for every precision the seed ran
    for topo in TOPOLOGIES:
        assert f"/{topo}" in text


def case(framework: str, topo: str, precision: str = "fp32", batch: int | None = None, **options) -> Case:
    adapter = ADAPTERS[framework]
    nodes, gpus = (int(x) for x in re.match(r"(\d+)n(\d+)g", topo).groups())
    return Case(
        framework=framework,
        model=next(iter(adapter.models)),
        precision=precision,
        batch_size_per_device=batch or adapter.default_batch[precision],
        nodes=nodes,
        gpus_per_node=gpus,
        warmup_iterations=adapter.default_warmup,
        measured_iterations=adapter.default_measured,
        options=tuple(sorted(options.items())),
    )


def launches(c: Case, cluster, master_port: int = 29500):
    ctx = LaunchContext(python="python3", workload_dir="/opt/dlperf/workload", master_port=master_port)
    return get_adapter(c.framework).launches(c, cluster.first(c.nodes), ctx)


# ------------------------------------------------------------------------ checks against the seeds' scripts
@pytest.mark.parametrize("topo", ["2n8g", "4n8g"])
def test_ngc_pytorch_matches_the_seed_command_line(topo, cluster):
    """Seed 002 printed its node-0 command (bash -x); ours is the same, token for token."""
    printed = [
        line
        for line in (SEEDS / "002_3dcb0bed4bdf16bb.txt").read_text().splitlines()
        if line.startswith("+ python /workspace/rn50/multiproc.py") and f"--nnodes {topo[0]} " in line
    ]
    assert printed, "seed 002 prints its multi-node command"
    seed_argv = shlex.split(printed[0][2:])
    ours = launches(case("ngc_pytorch", topo, data_dir="/data/image", release="20.03"), cluster, master_port=22333)
    assert list(ours[0].argv) == seed_argv
    # the other nodes differ only in --node_rank
    for rank, launch in enumerate(ours):
        expected = list(seed_argv)
        expected[expected.index("--node_rank") + 1] = str(rank)
        assert list(launch.argv) == expected


def test_ngc_pytorch_amp_loss_scales(cluster):
    dynamic = launches(case("ngc_pytorch", "1n8g", "amp", release="20.03"), cluster)[0].argv
    static = launches(case("ngc_pytorch", "1n8g", "amp", loss_scale="static", release="20.03"), cluster)[0].argv
    assert "--dynamic-loss-scale" in dynamic and "--amp" in dynamic and "-b" in dynamic
    assert dynamic[dynamic.index("-b") + 1] == "256"  # the seed's AMP batch
    assert static[static.index("--static-loss-scale") + 1] == "128"
    synthetic = launches(case("ngc_pytorch", "1n1g", data_backend="syntetic", release="20.03"), cluster)[0].argv
    assert synthetic[synthetic.index("--data-backend") + 1] == "syntetic"


def test_ngc_pytorch_default_release_speaks_dle_last_commit(cluster):
    """The default release (NGC 25.12, DLE's last commit): no --dynamic-loss-scale (AMP's GradScaler is always
    dynamic there), --momentum spelled out, --conv_init fan_in after the data folder instead of -c fanin, DLE's
    new spelling of synthetic data; a static loss scale, which that code has not, is refused at planning."""
    adapter = get_adapter("ngc_pytorch")
    amp = case("ngc_pytorch", "1n8g", "amp")
    argv = launches(amp, cluster)[0].argv
    assert adapter.image(amp, cluster.first(1)) == "dlperf/ngc-pytorch:25.12"
    assert "--amp" in argv and "--dynamic-loss-scale" not in argv and "--mom" not in argv and "-c" not in argv
    assert argv[argv.index("--momentum") + 1] == "0.125"
    assert list(argv[-3:]) == ["/data/imagenet", "--conv_init", "fan_in"]
    synthetic = launches(case("ngc_pytorch", "1n1g", data_backend="syntetic"), cluster)[0].argv
    assert synthetic[synthetic.index("--data-backend") + 1] == "synthetic"
    static = case("ngc_pytorch", "1n8g", "amp", loss_scale="static")
    assert "always dynamic" in adapter.refuses(static, cluster.first(1))
    assert (
        adapter.refuses(case("ngc_pytorch", "1n8g", "amp", loss_scale="static", release="20.03"), cluster.first(1))
        is None
    )


def _seed_local_run_flags() -> dict[str, str]:
    text = (SEEDS / "003_96d2849aa82fcda1.txt").read_text()
    block = text[text.index("python3 ./$BENCH_ROOT_DIR/of_cnn_train_val.py") :]
    block = block[: block.index("```")]
    return dict(m.groups() for m in re.finditer(r"--(\w+)=(\S+?)\s*(?:\\|$)", block, re.M))


def test_oneflow_matches_the_seed_local_run_script(cluster):
    seed = _seed_local_run_flags()
    assert seed["model"] == '"resnet50"' or seed["model"].strip('"') == "resnet50"
    for launch in launches(case("oneflow", "4n8g", release="0.1.8"), cluster):
        ours = dict(a[2:].split("=", 1) for a in launch.argv if a.startswith("--"))
        # same flags, except where the seed's paths were placeholders for its own machine
        assert set(seed) == set(ours), set(seed) ^ set(ours)
        for name in set(seed) - {
            "train_data_dir",
            "log_dir",
            "num_examples",
            "num_nodes",
            "gpu_num_per_node",
            "batch_size_per_device",
            "node_ips",
        }:
            assert ours[name] == seed[name].strip('"'), name
        assert ours["node_ips"] == seed["node_ips"].replace("'", "")  # every node gets every ip
        # NUM_EXAMPLES = nodes x gpus x batch x 200 iterations
        assert int(ours["num_examples"]) == 4 * 8 * 128 * 200
        assert (ours["num_nodes"], ours["gpu_num_per_node"], ours["batch_size_per_device"]) == ("4", "8", "128")


def test_oneflow_default_release_runs_dlperf_driver_under_oneflow_launcher(cluster):
    """OneFlow 1.0 (the default): dlperf's driver under ``oneflow.distributed.launch`` on every node (one process
    per GPU), the seed's script flags without the OFRecord data (synthetic only: a suite's data_dir is refused),
    AMP as --use_fp16; its figure is the driver's."""
    adapter = get_adapter("oneflow")
    amp = case("oneflow", "2n8g", "amp")
    node0, node1 = launches(amp, cluster)
    assert adapter.image(amp, cluster.first(2)) == "dlperf/oneflow:1.0.0"
    assert node0.argv[:6] == ("python3", "-m", "oneflow.distributed.launch", "--nproc_per_node", "8", "--nnodes")
    assert node1.argv[node1.argv.index("--node_rank") + 1] == "1"
    assert node1.argv[node1.argv.index("--master_addr") + 1] == cluster.nodes[0].reach_address
    assert "--use_fp16" in node0.argv and not any(a.startswith("--train_data_dir") for a in node0.argv)
    assert adapter.figure_origin(amp, cluster.first(2)) == "dlperf"
    assert adapter.figure_origin(case("oneflow", "2n8g", release="0.1.8"), cluster.first(2)) == "framework"
    real_data = case("oneflow", "1n8g", data_dir="/data/ofrecord")
    assert "synthetic data only" in adapter.refuses(real_data, cluster.first(1))
    assert (
        adapter.refuses(case("oneflow", "1n8g", data_dir="/data/ofrecord", release="0.1.8"), cluster.first(1)) is None
    )


def test_mindspore_uses_the_seed_train_py_arguments(cluster):
    (one,) = launches(case("mindspore", "1n1g", release="1.1.0"), cluster)
    assert "mpirun" not in one.argv[-1] and "--run_distribute=True" not in one.argv[-1]
    node0, *others = launches(case("mindspore", "2n8g", "amp", release="1.1.0"), cluster)
    script = node0.argv[-1]
    mpirun = shlex.split(script.splitlines()[-1])[1:]
    assert mpirun[:2] == ["mpirun", "--allow-run-as-root"]
    assert mpirun[mpirun.index("-np") + 1] == "16" and mpirun[mpirun.index("-H") + 1] == "10.11.0.2:8,10.11.0.3:8"
    # the seed's patch adds exactly these arguments; 100 warm-up + 100 measured steps in sinks of 10
    for arg in (
        "--batch_size=256",
        "--train_steps=200",
        "--data_sink_steps=10",
        "--dtype=fp16",
        "--run_distribute=True",
    ):
        assert arg in mpirun
    assert [o.role for o in others] == ["sshd"]
    patch = (REPO / "docker" / "mindspore" / "train.py.patch").read_text()
    for flag in ("--batch_size", "--train_steps", "--data_sink_steps", "--dtype", "DynamicLossScaleManager"):
        assert flag in patch


def test_mindspore_default_release_speaks_the_models_train_py(cluster):
    """MindSpore 2.3.1 (the default, its last GPU release): mindspore-ai/models' ResNet train.py takes dlperf's
    config and its keys as flags (--net_name, --data_path); the seed's settings (train steps, sinks, dtype) are keys
    train-r2.0.py.patch reads; across nodes under mpirun as the seed. Its CUDA 11.6 predates Hopper (and Ada):
    preflight refuses it there."""
    node0, *others = launches(case("mindspore", "2n8g", "amp"), cluster)
    mpirun = shlex.split(node0.argv[-1].splitlines()[-1])[1:]
    assert mpirun[:2] == ["mpirun", "--allow-run-as-root"] and [o.role for o in others] == ["sshd"]
    for arg in ("--net_name=resnet50", "--run_distribute=True", "--train_steps=200", "--dtype=fp16"):
        assert arg in mpirun
    assert "--config_path=/workspace/resnet/config/resnet50_imagenet2012_GPU_dlperf.yaml" in mpirun
    config = (REPO / "docker" / "mindspore" / "config" / "resnet50_imagenet2012_GPU_dlperf.yaml").read_text()
    patch = (REPO / "docker" / "mindspore" / "train-r2.0.py.patch").read_text()
    for key in ("train_steps", "data_sink_steps", "dtype"):
        assert f"\n{key}: " in config and f"config.{key}" in patch
    release = get_adapter("mindspore").release(case("mindspore", "1n1g"))
    assert release.name == "2.3.1" and release.cuda == "11.6"
    assert "predates Hopper" in release.runs_on((9, 0)) and "predates Ada" in release.runs_on((8, 9))
    assert release.runs_on((8, 0)) is None


def test_paddle_plsc_gives_every_node_the_cluster_and_its_own_ip(cluster):
    ls = launches(case("paddle_plsc", "4n8g", release="1.8.5"), cluster)
    ips = [n.address for n in cluster.nodes]
    for launch, ip in zip(ls, ips):
        args = dict(a[2:].split("=", 1) for a in launch.argv if a.startswith("--") and "=" in a)
        assert args["cluster_node_ips"] == ",".join(ips) and args["node_ip"] == ip
        assert args["selected_gpus"] == "0,1,2,3,4,5,6,7"
        assert launch.env["DLPERF_MAX_ITERS"] == "150"  # the seed's entry.py exit at batch 150
    assert 'DLPERF_MAX_ITERS", "150"' in (REPO / "docker" / "paddle-plsc" / "entry.py.patch").read_text()


@pytest.mark.parametrize("precision,batch,dtype", [("fp32", 128, "float32"), ("amp", 256, "float16")])
def test_ngc_mxnet_horovod_over_mpirun(precision, batch, dtype, cluster):
    node0, node1 = launches(case("ngc_mxnet", "2n8g", precision, batch), cluster)
    mpirun = shlex.split(node0.argv[-1].splitlines()[-1])[1:]
    assert mpirun[mpirun.index("--kv-store") + 1] == "horovod"
    assert mpirun[mpirun.index("--batch-size") + 1] == str(batch)
    assert mpirun[mpirun.index("--dtype") + 1] == dtype
    assert mpirun[mpirun.index("--benchmark-iters") + 1] == "500"  # as the seed's real logs
    assert node1.role == "sshd" and "exec /usr/sbin/sshd -D" in node1.argv[-1]


# ------------------------------------------------------------------------ the mpirun setup
def test_mpirun_node0_checks_ssh_before_launching(cluster):
    node0, *rest = launches(case("ngc_mxnet", "4n8g"), cluster)
    script = node0.argv[-1]
    assert script.index("ssh -p 2222") < script.index("exec mpirun")
    assert "StrictHostKeyChecking=yes" in script and "exit 97" in script
    assert [r.role for r in rest] == ["sshd"] * 3


def test_keys_are_made_per_case_run_and_never_printed(cluster):
    c = case("ngc_mxnet", "2n8g")
    jobs = [
        build_job(CaseRun(c, r, r, 2), cluster, DryRunDocker(), GOLDEN_IDS, timeout_s=10, watchdog_s=None)
        for r in range(2)
    ]
    keys = [{f.path: f.content for f in job.containers[0].files} for job in jobs]
    assert keys[0]["/etc/dlperf-ssh/id_ed25519"] != keys[1]["/etc/dlperf-ssh/id_ed25519"]
    assert keys[0]["/etc/dlperf-ssh/id_ed25519"].startswith(b"-----BEGIN OPENSSH PRIVATE KEY-----")
    # every node of a case gets the same keys; the private key is never in a repr or the command text
    assert {f.content for f in jobs[0].containers[1].files} == set(keys[0].values())
    assert b"PRIVATE" not in repr(jobs[0].containers[0]).encode()
    single = build_job(
        CaseRun(case("ngc_mxnet", "1n8g"), 0), cluster, DryRunDocker(), GOLDEN_IDS, timeout_s=10, watchdog_s=None
    )
    assert single.containers[0].files == ()  # one node: no ssh at all


def test_no_key_material_in_images_or_repository():
    for dockerfile in (REPO / "docker").rglob("Dockerfile"):
        text = dockerfile.read_text()
        assert "ssh-keygen" not in text and "id_rsa" not in text and "PRIVATE KEY" not in text, dockerfile


# ------------------------------------------------------------------------ every release's command lines
# For each release of a seed framework (dlperf_core/frameworks/releases.py): the seed suite's benchmarks of that
# framework with ``release`` set to it (the benchmarks a release refuses at planning left out, e.g.
# ``loss_scale: static`` where DLE has none). The seeds' own releases are what suites/seeds.yaml names, so their
# text is tests/golden/<framework>.txt itself; every other release has tests/golden/releases/<framework>-<release>.txt
# (DLPERF_UPDATE_GOLDEN=1 regenerates them too).


def release_suite(seeds: Suite, release: Release, cluster) -> Suite:
    """The seed suite's benchmarks of ``release``'s framework, in that release, less those it refuses."""
    adapter = get_adapter(release.framework)
    kept = []
    for benchmark in seeds.benchmarks:
        if benchmark.framework != release.framework:
            continue
        moved = benchmark.model_copy(update={"options": {**benchmark.options, "release": release.name}})
        # the seed's model, else a model the release's image trains
        for model in [benchmark.model, *sorted(adapter.models - {benchmark.model})]:
            candidate = moved.model_copy(update={"model": model})
            one = seeds.model_copy(update={"benchmarks": (candidate,)})
            if not any(adapter.refuses(case, cluster.first(case.nodes)) for case, _ in expand_cases(one)):
                kept.append(candidate)
                break
    return seeds.model_copy(update={"benchmarks": tuple(kept)})


@pytest.mark.parametrize("release", RELEASES, ids=lambda r: f"{r.framework}-{r.name}")
def test_release_golden_commands(release):
    seeds = load_suite(REPO / "suites" / "seeds.yaml")
    cluster = load_inventory(REPO / "tests" / "data" / "seed-cluster.yaml")
    suite = release_suite(seeds, release, cluster)
    text = suite_commands(suite, cluster, PlanFilters(frameworks=(release.framework,)))
    assert f"+release={release.name}+" in text and f"image={release.image} " in text
    if release.seed:  # suites/seeds.yaml names it: the seed's golden file is this release's
        assert text == suite_commands(seeds, cluster, PlanFilters(frameworks=(release.framework,)))
        assert text == (GOLDEN / f"{release.framework}.txt").read_text()
        return
    path = GOLDEN / "releases" / f"{release.framework}-{release.name}.txt"
    if os.environ.get("DLPERF_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no golden file {path}; run with DLPERF_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"commands of {release.framework} {release.name} changed; review {path.name}"


def test_every_non_seed_release_has_a_golden_file_and_no_other():
    expected = {f"{r.framework}-{r.name}.txt" for r in RELEASES if not r.seed}
    assert {p.name for p in (GOLDEN / "releases").glob("*.txt")} == expected
    assert all(any(r.name == name for r in RELEASES) for name in DEFAULT_RELEASE.values())
