"""Framework adapter and container spec: exact commands per node, container needs from the inventory."""

from dataclasses import replace
from pathlib import Path

from dlperf_core.cluster.inventory import load_inventory
from dlperf_core.errors import ConfigError
from dlperf_core.frameworks import LaunchContext, get_adapter
from dlperf_core.model import Case, CaseRun, RunIds
from dlperf_core.plan.cases import check_fits
from dlperf_core.run.jobs import build_job

REPO = Path(__file__).resolve().parents[3]
GPU = load_inventory(REPO / "inventories/example-cluster.yaml")  # the GPU nodes
CPU = load_inventory(REPO / "inventories/docker-local.yaml")  # the CPU stand-in nodes
CASE = Case("pytorch_reference", "resnet50_v1.5", "amp", 256, 2, 8, 20, 100, extra_args=("--device", "cuda"))
PLAIN = LaunchContext(python="python3", workload_dir="/w")
# what mpirun starts in front of each rank's program across nodes (dlperf_core.frameworks.rank_env)
RANK = """bash -c 'if [ -r /etc/dlperf-ssh/environment ]; then . /etc/dlperf-ssh/environment; fi; exec "$@"' dlperf-rank """


def on_one_gpu_node(adapter, case, ctx=PLAIN):
    """The launches of ``case`` on the first GPU node, and the image they run in there."""
    nodes = GPU.first(1)
    return adapter.launches(case, nodes, ctx), adapter.image(case, nodes)


def test_reference_launch_is_one_torchrun_per_node():
    ctx = LaunchContext(python="python3", workload_dir="/opt/dlperf/workload", master_port=29600)
    launches = get_adapter("pytorch_reference").launches(CASE, GPU.first(2), ctx)
    assert [l.node.name for l in launches] == ["gpu-node-0", "gpu-node-1"]
    assert " ".join(launches[1].argv) == (
        "python3 -m torch.distributed.run --nnodes 2 --nproc_per_node 8 --node_rank 1 "
        "--master_addr 10.0.0.10 --master_port 29600 /opt/dlperf/workload/train.py --batch-size 256 "
        "--precision amp --warmup-iterations 20 --iterations 100 --device cuda"
    )


class FakeRuntime:
    """The docker runtime's facts without an engine: every node on one 8-core host it owns."""

    name, python, workload_dir = "docker", "python3", "/opt/dlperf/workload"

    def host_cores(self, _node):
        from dlperf_core.cluster.cpu_placement import HostCores

        return HostCores(host="engine0", cores=tuple(range(8)))


def test_gpu_node_container_spec_has_gpus_infiniband_host_network_memlock(tmp_path):
    job = build_job(
        CaseRun(CASE, 3, 7, 10), GPU, FakeRuntime(), RunIds("d", "r1"), timeout_s=60, watchdog_s=10, log_root=tmp_path
    )
    assert len(job.containers) == 2
    spec = job.containers[0]
    assert spec.gpu_ids == tuple(str(i) for i in range(CASE.gpus_per_node)) and spec.devices == ("/dev/infiniband",)
    assert spec.network == "host" and spec.hostname is None and spec.ipc_host
    assert spec.cap_add == ("IPC_LOCK",) and spec.memlock_unlimited
    assert spec.mounts[0].source == "/data/imagenet" and spec.mounts[0].read_only
    assert spec.mounts[1].source == "/var/log/dlperf" and spec.mounts[1].target == "/dlperf/logs"
    assert not spec.mounts[1].read_only and spec.environment["DLPERF_CASE_LOG_DIR"] == f"/dlperf/logs/{spec.name}"
    assert spec.image == "dlperf/pytorch-reference:cpu"  # the case names none: the adapter's default
    assert spec.labels["dlperf.run_id"] == "r1" and spec.labels["dlperf.repeat"] == "3"
    assert spec.labels["dlperf.case"] == CASE.key
    assert job.containers[0].name != job.containers[1].name
    assert "--threads" not in job.launches[0].argv  # GPU nodes: no CPU thread split


def test_cpu_standin_nodes_use_their_network_and_hostnames(tmp_path):
    case = Case("pytorch_reference", "resnet50_v1.5", "fp32", 8, 2, 1, 3, 10)
    job = build_job(
        CaseRun(case, 0), CPU, FakeRuntime(), RunIds("d", "r"), timeout_s=60, watchdog_s=None, log_root=tmp_path
    )
    a, b = job.containers
    assert (a.network, a.hostname, b.hostname) == ("dlperf-net", "node0", "node1")
    assert not a.gpu_ids and not a.devices and not a.memlock_unlimited and not a.ipc_host and a.shm_size == "1g"
    assert "--master_addr" in a.command and a.command[a.command.index("--master_addr") + 1] == "node0"
    assert "--threads" in a.command


# ---- ngc_mxnet CPU
def test_ngc_mxnet_cpu_launch_is_mpirun_of_dist_sync_workers():
    """CPU nodes: the CPU image, mpirun as on GPUs, each rank a ps-lite worker (mpi-dmlc.sh), DLE's flags with
    the job's total batch, synthetic data and a Speed line every batch."""
    case = Case("ngc_mxnet", "resnet50_v1.5", "fp32", 8, 2, 1, 5, 20, extra_args=("--image-shape", "3,64,64"))
    adapter = get_adapter("ngc_mxnet")
    ctx = LaunchContext(python="python3", workload_dir="/w", master_port=29555, cpu_threads_per_process=1)
    head, peer = adapter.launches(case, CPU.first(2), ctx)
    assert adapter.image(case, CPU.first(2)) == "dlperf/ngc-mxnet:cpu"
    assert peer.role == "sshd" and peer.node.name == "node1" and "exec /usr/sbin/sshd -D" in peer.argv[-1]
    assert head.env == {
        "PYTHONUNBUFFERED": "1",
        "DMLC_PS_ROOT_URI": "node0",
        "DMLC_PS_ROOT_PORT": "29555",
        "OMP_NUM_THREADS": "1",
    }
    script = head.argv[2]
    assert "ssh -p 2222" in script and "cd /workspace/rn50" in script
    assert script.splitlines()[-1].endswith(
        "-np 2 -H node0:1,node1:1 --bind-to none --map-by slot -mca plm_rsh_args '-p 2222 -i "
        "/etc/dlperf-ssh/id_ed25519 -o UserKnownHostsFile=/etc/dlperf-ssh/known_hosts -o "
        "StrictHostKeyChecking=yes -o BatchMode=yes -o ConnectTimeout=5' -x DMLC_PS_ROOT_PORT -x DMLC_PS_ROOT_URI "
        "-x OMP_NUM_THREADS -x PYTHONUNBUFFERED -x PATH "
        f"{RANK}/workspace/rn50/mpi-dmlc.sh python "
        "/workspace/rn50/train.py --arch resnetv15 --num-layers 50 --mode train --kv-store dist_sync "
        "--batch-size 16 --dtype float32 --input-layout NCHW --conv-layout NCHW --batchnorm-layout NCHW "
        "--pooling-layout NCHW --num-epochs 1 --benchmark-iters 25 --disp-batches 1 --no-metrics "
        "--data-backend synthetic --image-shape 3,64,64"
    )
    assert adapter.parse_window(case) == (5, 20)


def test_ngc_mxnet_cpu_single_node_options_and_gpu_branch_untouched():
    adapter = get_adapter("ngc_mxnet")
    case = Case("ngc_mxnet", "resnet50_v1.5", "amp", 4, 1, 2, 3, 10, options=(("display_batches", 5),))
    (launch,) = adapter.launches(case, CPU.first(1), PLAIN)
    line = launch.argv[2].splitlines()[-1]
    assert "-np 2 -H node0:2 " in line and "plm_rsh_args" not in line and "OMP_NUM_THREADS" not in launch.env
    assert "--batch-size 8 --dtype float16 " in line and "--disp-batches 5 " in line  # the driver refuses fp16
    (gpu_launch, *_), image = on_one_gpu_node(adapter, case)
    assert image == "dlperf/ngc-mxnet:24.06"  # the default release (suites/seeds.yaml names 19.07)
    assert "--kv-store horovod" in gpu_launch.argv[2] and "mpi-dmlc.sh" not in gpu_launch.argv[2]


# ---- paddle_plsc CPU
def test_paddle_plsc_cpu_launch_is_paddle3_launcher_with_plsc_engine():
    """CPU nodes: the CPU image, paddle.distributed.launch on every node with PaddlePaddle 3's flags (node 0
    the master), one process per "GPU", PLSC 2.4's train.py + config, batch and max_train_step as -o flags."""
    case = Case("paddle_plsc", "arcface_iresnet50", "fp32", 8, 2, 1, 5, 20, extra_args=("-o", "Model.class_num=100"))
    adapter = get_adapter("paddle_plsc")
    ctx = LaunchContext(python="python3", workload_dir="/w", master_port=29555, cpu_threads_per_process=1)
    launches = adapter.launches(case, CPU.first(2), ctx)
    assert adapter.image(case, CPU.first(2)) == "dlperf/paddle:cpu"
    assert [x.node_rank for x in launches] == [0, 1] and all(x.role == "launcher" for x in launches)
    for rank, launch in enumerate(launches):
        assert launch.env == {"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
        assert launch.argv == (
            "python",
            "-m",
            "paddle.distributed.launch",
            f"--master={('127.0.0.1', 'node0')[rank]}:29555",
            "--nnodes=2",
            f"--rank={rank}",
            "--nproc_per_node=1",
            "--max_restart=0",
            "--log_dir=/tmp/paddle-launch-log",
            "/workspace/plsc/train.py",
            "-c",
            "/workspace/plsc/configs/IResNet50_arcface_synthetic_cpu.yaml",
            "-o",
            "DataLoader.Train.sampler.batch_size=8",
            "-o",
            "Global.max_train_step=25",
            "-o",
            "Model.class_num=100",
        )
    assert adapter.parse_window(case) == (5, 20)


def test_paddle_plsc_cpu_single_node_amp_refused_and_gpu_branch_untouched():
    import pytest

    adapter = get_adapter("paddle_plsc")
    (launch,) = adapter.launches(Case("paddle_plsc", "arcface_iresnet50", "fp32", 4, 1, 2, 3, 10), CPU.first(1), PLAIN)
    assert "--nproc_per_node=2" in launch.argv and "--nnodes=1" in launch.argv and "OMP_NUM_THREADS" not in launch.env
    amp = Case("paddle_plsc", "arcface_iresnet50", "amp", 4, 1, 2, 3, 10)
    # PaddlePaddle's CPU AMP is a no-op: not a real amp row, so planning refuses it before anything runs
    assert "trains fp32 only, not amp" in adapter.refuses(amp, CPU.first(1))
    with pytest.raises(ConfigError, match="paddle_plsc on CPU nodes .* trains fp32 only, not amp"):
        check_fits([(amp, 1)], CPU, "suite.yaml")
    assert adapter.refuses(replace(amp, image="my/paddle:amp-cpu"), CPU.first(1)) is None  # the suite's image wins
    gpu_amp = replace(amp, model="arcface_resnet50", options=(("release", "1.8.5"),))
    assert adapter.refuses(gpu_amp, GPU.first(1)) is None
    (gpu_launch, *_), image = on_one_gpu_node(adapter, gpu_amp)
    assert image == "dlperf/paddle-plsc:1.8.5"
    assert any(a.startswith("--selected_gpus=") for a in gpu_launch.argv) and "--max_restart=0" not in gpu_launch.argv
    # the default release (PaddlePaddle 3.2 + PLSC 2.4's engine): the CPU path's launch with the GPU config
    engine_amp = replace(amp, model="arcface_resnet50")
    assert adapter.refuses(engine_amp, GPU.first(1)) is None
    (engine_launch, *_), image = on_one_gpu_node(adapter, engine_amp)
    assert image == "dlperf/paddle-plsc:3.2.0"
    argv = engine_launch.argv
    assert "--devices=0,1" in argv and "--max_restart=0" in argv and "FP16.level=O1" in argv
    assert argv[argv.index("-c") + 1] == "/workspace/plsc/configs/IResNet50_arcface_synthetic_gpu.yaml"
    assert "Model.class_num=85742" in argv and "FLAGS_cudnn_exhaustive_search" in engine_launch.env


def test_paddle_plsc_each_image_trains_its_own_model_name():
    """The CPU image trains PLSC 2.4's IResNet50 (arcface_iresnet50), the GPU image PLSC 1.8's ResNet50
    (arcface_resnet50, the seed's name): planning refuses the other name on each, saying which to use."""
    import pytest

    adapter = get_adapter("paddle_plsc")
    assert adapter.models == {"arcface_resnet50", "arcface_iresnet50"}
    cpu_case = Case("paddle_plsc", "arcface_iresnet50", "fp32", 4, 1, 1, 3, 10)
    gpu_case = Case("paddle_plsc", "arcface_resnet50", "fp32", 128, 1, 1, 50, 100, options=(("release", "1.8.5"),))
    assert adapter.refuses(cpu_case, CPU.first(1)) is None and adapter.refuses(gpu_case, GPU.first(1)) is None
    on_cpu = adapter.refuses(gpu_case, CPU.first(1))
    assert on_cpu == (
        f"{gpu_case.key}: paddle_plsc on CPU nodes"
        " (dlperf/paddle:cpu) trains arcface_iresnet50 only (PLSC 2.4's IResNet50 at the CPU config's size), not"
        " arcface_resnet50 (the seed's IResNet-50 ArcFace at 112x112, 85742 classes): name the model arcface_iresnet50"
        " there"
    )
    on_gpu = adapter.refuses(replace(cpu_case, options=(("release", "1.8.5"),)), GPU.first(1))
    assert "on GPU nodes (dlperf/paddle-plsc:1.8.5) trains arcface_resnet50 only" in on_gpu
    assert "name the model arcface_resnet50 there" in on_gpu
    # the default release's GPU image (PLSC 2.4's engine) trains the seed's model at the seed's size, under its name
    assert adapter.refuses(replace(gpu_case, options=()), GPU.first(1)) is None
    on_default = adapter.refuses(cpu_case, GPU.first(1))
    assert "on GPU nodes (dlperf/paddle-plsc:3.2.0) trains arcface_resnet50 only" in on_default
    with pytest.raises(ConfigError, match="paddle_plsc on CPU nodes .* trains arcface_iresnet50 only"):
        check_fits([(gpu_case, 1)], CPU, "suite.yaml")
    # a suite's own image is the user's choice, as for precisions
    assert adapter.refuses(replace(gpu_case, image="my/plsc:cpu"), CPU.first(1)) is None
    assert adapter.refuses(replace(cpu_case, image="my/plsc:gpu"), GPU.first(1)) is None


# ---- oneflow CPU


def test_oneflow_cpu_launch_is_one_oneflow_launcher_per_node():
    case = Case("oneflow", "resnet50_v1.5", "fp32", 4, 2, 2, 5, 10, extra_args=("--image_size", "32"))
    ctx = LaunchContext(
        python="python3", workload_dir="/opt/dlperf/workload", master_port=29611, cpu_threads_per_process=1
    )
    adapter = get_adapter("oneflow")
    launches = adapter.launches(case, CPU.first(2), ctx)
    assert adapter.image(case, CPU.first(2)) == "dlperf/oneflow:cpu"
    assert [(l.node.name, l.node_rank, l.role) for l in launches] == [
        ("node0", 0, "launcher"),
        ("node1", 1, "launcher"),
    ]
    assert " ".join(launches[1].argv) == (
        "python3 -m oneflow.distributed.launch --nproc_per_node 2 --nnodes 2 --node_rank 1 "
        "--master_addr node0 --master_port 29611 /workspace/cnns/of_cnn_train_val.py --num_examples=240 "
        "--num_nodes=2 --gpu_num_per_node=2 --model_update=momentum --learning_rate=0.001 "
        "--loss_print_every_n_iter=5 --batch_size_per_device=4 --val_batch_size_per_device=125 --num_epoch=1 "
        "--log_dir=/tmp/oneflow-log --node_ips=node0,node1 --model=resnet50 --image_size 32"
    )
    assert launches[0].argv[:8] == launches[1].argv[:8] and launches[0].argv[9:] == launches[1].argv[9:]
    assert launches[0].argv[7:9] == ("--node_rank", "0")
    assert launches[0].env == {"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    assert not any("data_dir" in a for a in launches[0].argv)  # synthetic data on CPU


def test_oneflow_cpu_print_interval_follows_the_window():
    ctx = LaunchContext(python="python3", workload_dir="/opt/dlperf/workload")
    adapter = get_adapter("oneflow")

    def every(warmup, measured):
        case = Case("oneflow", "resnet50_v1.5", "fp32", 4, 1, 1, warmup, measured)
        (launch,) = adapter.launches(case, CPU.first(1), ctx)
        assert "OMP_NUM_THREADS" not in launch.env
        return [a for a in launch.argv if a.startswith("--loss_print_every_n_iter=")]

    assert every(20, 180) == ["--loss_print_every_n_iter=20"]
    assert every(4, 6) == ["--loss_print_every_n_iter=2"]
    assert every(0, 10) == ["--loss_print_every_n_iter=1"]


def test_oneflow_gpu_nodes_keep_the_gpu_image_and_seed_command():
    """The seed's release runs OneFlow-Benchmark's script itself; the default (OneFlow 1.0) dlperf's driver under
    OneFlow's launcher, on synthetic data."""
    seed = Case("oneflow", "resnet50_v1.5", "fp32", 128, 1, 8, 20, 180, options=(("release", "0.1.8"),))
    ctx = LaunchContext(python="python3", workload_dir="/opt/dlperf/workload")
    (launch,), image = on_one_gpu_node(get_adapter("oneflow"), seed, ctx)
    assert image == "dlperf/oneflow:0.1.8"
    assert launch.argv[:2] == ("python3", "/workspace/cnns/of_cnn_train_val.py")
    assert "--train_data_dir=/data/ofrecord/train" in launch.argv
    default = Case("oneflow", "resnet50_v1.5", "fp32", 128, 1, 8, 20, 180)
    (launch,), image = on_one_gpu_node(get_adapter("oneflow"), default, ctx)
    assert image == "dlperf/oneflow:1.0.0"
    assert launch.argv[:3] == ("python3", "-m", "oneflow.distributed.launch")
    assert "/workspace/cnns/of_cnn_train_val.py" in launch.argv
    assert not any(a.startswith("--train_data_dir") for a in launch.argv)


# ---- mindspore CPU
def test_mindspore_cpu_standalone_and_mpirun_launches():
    """CPU nodes: the CPU image; 1 device runs train.py directly, more under mpirun with the dynamic
    cluster's scheduler address (node 0, the case's port); the seed's flags with CPU and no dataset path."""
    adapter = get_adapter("mindspore")
    ctx = LaunchContext(python="python3", workload_dir="/w", master_port=29577, cpu_threads_per_process=1)
    one = Case(
        "mindspore",
        "resnet50_v1.5",
        "fp32",
        8,
        1,
        1,
        10,
        10,
        extra_args=("--image_size", "64"),
        options=(("data_sink_steps", 5),),
    )
    (launch,) = adapter.launches(one, CPU.first(1), ctx)
    assert adapter.image(one, CPU.first(1)) == "dlperf/mindspore:cpu"
    assert launch.env == {"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    assert launch.argv == (
        "bash",
        "-c",
        "cd /workspace/resnet && exec python /workspace/resnet/train.py "
        "--net=resnet50 --dataset=imagenet2012 --device_target=CPU --batch_size=8 "
        "--train_steps=20 --data_sink_steps=5 --dtype=fp32 --image_size 64",
    )
    two = Case("mindspore", "resnet50_v1.5", "amp", 4, 2, 1, 3, 7)
    head, peer = adapter.launches(two, CPU.first(2), ctx)
    assert peer.role == "sshd" and peer.node.name == "node1"
    assert head.env == {
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": "1",
        "MS_SCHED_HOST": "node0",
        "MS_SCHED_PORT": "29577",
    }
    line = head.argv[2].splitlines()[-1]
    assert line.startswith("exec mpirun --allow-run-as-root --tag-output -np 2 -H node0:1,node1:1 ")
    assert line.endswith(
        f"-x MS_SCHED_HOST -x MS_SCHED_PORT -x OMP_NUM_THREADS -x PYTHONUNBUFFERED -x PATH {RANK}python "
        "/workspace/resnet/train.py --net=resnet50 --run_distribute=True --dataset=imagenet2012 "
        "--device_target=CPU --batch_size=4 --train_steps=10 --data_sink_steps=10 --dtype=fp16"
    )
    assert adapter.parse_window(two) == (3, 7)


def test_mindspore_gpu_branch_untouched_by_cpu():
    seed = Case("mindspore", "resnet50_v1.5", "fp32", 128, 1, 1, 100, 100, options=(("release", "1.1.0"),))
    (launch,), image = on_one_gpu_node(get_adapter("mindspore"), seed)
    assert image == "dlperf/mindspore:1.1.0"
    assert "--device_target=GPU" in launch.argv[2] and "--dataset_path=/data/imagenet/train" in launch.argv[2]
    assert launch.env == {"PYTHONUNBUFFERED": "1", "NVIDIA_TF32_OVERRIDE": "0"}  # fp32 without TF32
    # the default (MindSpore 2.3.1): the models repository's train.py, the same settings as its config's keys
    case = Case("mindspore", "resnet50_v1.5", "fp32", 128, 1, 1, 100, 100)
    (launch,), image = on_one_gpu_node(get_adapter("mindspore"), case)
    assert image == "dlperf/mindspore:2.3.1"
    line = launch.argv[2]
    assert "--config_path=/workspace/resnet/config/resnet50_imagenet2012_GPU_dlperf.yaml" in line
    assert "--data_path=/data/imagenet/train" in line and "--net_name=resnet50" in line and "--dataset_path" not in line
    assert launch.env == {"PYTHONUNBUFFERED": "1", "NVIDIA_TF32_OVERRIDE": "0"}
