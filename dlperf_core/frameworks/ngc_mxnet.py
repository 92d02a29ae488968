"""NGC MXNet ResNet-50 v1.5 (seed 001): DeepLearningExamples' RN50v1.5 in the NGC MXNet image, Horovod.

One rank per GPU through mpirun with ``--kv-store horovod`` (what DLE's ``runner`` does), across nodes over
the case's sshd. FP32 trains in float32/NCHW, AMP in float16/NHWC as DLE's benchmark configs do. The seed
ran DLE's ``benchmark.py`` (``-b`` 128/256, 1 and 8 GPUs, ``--benchmark-iters 500``, display every 20
batches); here each topology is its own case with warm-up + measured = benchmark iterations. DLE's ``fit.py``
trains with Gluon and Horovod's ``DistributedTrainer`` and prints the ``Epoch[e] Batch [a-b]\tSpeed: ...
samples/sec\tLR: ...`` lines itself (the seed's logs: the figure unrounded, an ``LR`` field).

On CPU nodes (``accelerator: cpu``) the case trains for real in ``dlperf/ngc-mxnet:cpu`` (docker/ngc-mxnet-cpu/):
MXNet 1.9.1's CPU build from PyPI, GluonCV's ResNet-50 v1b, MXNet's own ``Module.fit`` + ``Speedometer``, driven
by a thin ``train.py`` that takes DLE's flags. The launch is the same mpirun (one rank per "GPU", sshd on nodes
1..N-1); Horovod has no CPU wheel, so the ranks use MXNet's ps-lite kvstore ``dist_sync`` instead:
``mpi-dmlc.sh`` maps Open MPI ranks to DMLC workers, rank 0 also runs the scheduler and the one server at
node 0's address and ``master_port``. ``--batch-size`` is the job's total batch there (DLE's meaning, what the
``ngc_mxnet`` parser reads from the argument line); Speedometer prints every batch unless the suite sets
``display_batches`` (its first line comes after batch index 1, so with a print every batch the measured window
is exactly the case's iterations).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from dlperf_core.cluster.inventory import Node
from dlperf_core.frameworks.base import FrameworkAdapter, LaunchContext, fp32_env, on_cpu
from dlperf_core.frameworks.mpi import mpi_launches
from dlperf_core.frameworks.releases import DEFAULT_RELEASE, default_release, release_names
from dlperf_core.frameworks.shape import FullSize, ModelShape, as_int, flag_values, shape_against
from dlperf_core.measure.origin import Figure
from dlperf_core.model import Case, NodeLaunch, OptionValue

RN50 = "/workspace/rn50"


class NgcMxnet(FrameworkAdapter):
    name: ClassVar[str] = "ngc_mxnet"
    models: ClassVar[frozenset[str]] = frozenset({"resnet50_v1.5"})
    precisions: ClassVar[frozenset[str]] = frozenset({"fp32", "amp"})
    log_format: ClassVar[str] = "ngc_mxnet"
    default_image: ClassVar[str] = default_release("ngc_mxnet").image
    cpu_image: ClassVar[str | None] = "dlperf/ngc-mxnet:cpu"
    cpu_precisions: ClassVar[frozenset[str] | None] = frozenset({"fp32"})  # the CPU driver trains float32 only
    # DLE's RN50v1.5 trains with Gluon (hvd.DistributedTrainer) and its fit.py prints the Speed lines itself
    # ("Speed: <unrounded> samples/sec\tLR: ..."), not MXNet's Speedometer ("%.2f"), as the seed's logs show
    gpu_figure: ClassVar[Figure] = Figure(
        "framework", "DeepLearningExamples RN50v1.5's fit.py (its Gluon training loop prints the Speed lines)"
    )
    cpu_figure: ClassVar[Figure | None] = Figure(
        "framework", "MXNet's Module.fit and Speedometer, started by dlperf's thin train.py"
    )
    launcher: ClassVar[Literal["per_node", "mpirun"]] = "mpirun"
    default_batch: ClassVar[dict[str, int]] = {"fp32": 128, "amp": 256}
    default_warmup: ClassVar[int | None] = 100
    default_measured: ClassVar[int | None] = 400
    option_defaults: ClassVar[dict[str, OptionValue]] = {
        "data_backend": "dali-gpu",
        "data_root": "/data/imagenet/train-val-recordio-passthrough",
        "display_batches": 20,
        "release": DEFAULT_RELEASE["ngc_mxnet"],
    }
    option_choices: ClassVar[dict[str, tuple[OptionValue, ...] | None]] = {
        "data_backend": ("dali-gpu", "dali-cpu", "mxnet", "synthetic"),
        "release": release_names("ngc_mxnet"),
    }

    def _dle_flags(
        self, case: Case, *, kv_store: str, gpus: bool, batch: int, display: object, data_backend: str
    ) -> list[str]:
        """DLE's ``train.py`` flags, GPU and CPU alike (the CPU driver refuses float16 with a clear error)."""
        half = case.precision == "amp"
        layout = "NHWC" if half else "NCHW"
        return [
            "python",
            f"{RN50}/train.py",
            "--arch",
            "resnetv15",
            "--num-layers",
            "50",
            "--mode",
            "train",
            "--kv-store",
            kv_store,
            *(["--gpus", "0"] if gpus else []),
            "--batch-size",
            str(batch),
            "--dtype",
            "float16" if half else "float32",
            "--input-layout",
            "NCHW",
            "--conv-layout",
            layout,
            "--batchnorm-layout",
            layout,
            "--pooling-layout",
            layout,
            "--num-epochs",
            "1",
            "--benchmark-iters",
            str(case.warmup_iterations + case.measured_iterations),
            "--disp-batches",
            str(display),
            "--no-metrics",
            "--data-backend",
            data_backend,
        ]

    def train_args(self, case: Case) -> list[str]:
        root = self.option(case, "data_root")
        args = self._dle_flags(
            case,
            kv_store="horovod",
            gpus=True,
            batch=case.batch_size_per_device,
            display=self.option(case, "display_batches"),
            data_backend=str(self.option(case, "data_backend")),
        )
        if self.option(case, "data_backend") != "synthetic":
            args += [
                "--data-train",
                f"{root}/train.rec",
                "--data-train-idx",
                f"{root}/train.idx",
                "--data-val",
                f"{root}/val.rec",
                "--data-val-idx",
                f"{root}/val.idx",
            ]
        return args + list(case.extra_args)

    def model_shape(self, model: str, extra_args: tuple[str, ...]) -> ModelShape | None:  # noqa: ARG002 - the same flags for every model
        """DLE's ``--image-shape C,H,W`` (the CPU driver's synthetic images) and the CPU driver's
        ``--num-classes``; MXNet's drivers have no width flag."""
        found = flag_values(extra_args, ["--image-shape", "--num-classes"])
        dims = [as_int(x) for x in found.get("--image-shape", "").split(",")]
        height, width = (dims[1], dims[2]) if len(dims) == 3 else (None, None)
        return shape_against(
            FullSize(None, 224, 1000),
            image_size=width,
            image_height=height,
            num_classes=as_int(found.get("--num-classes")),
        )

    def launches(self, case: Case, nodes: tuple[Node, ...], ctx: LaunchContext) -> list[NodeLaunch]:
        if on_cpu(nodes):
            return self.cpu_launches(case, nodes, ctx)
        env = {"PYTHONUNBUFFERED": "1", "MXNET_UPDATE_ON_KVSTORE": "0", "NCCL_DEBUG": "WARN", **fp32_env(case)}
        return mpi_launches(case, nodes, ctx, self.train_args(case), env=env, cwd=RN50)

    def cpu_train_args(self, case: Case) -> list[str]:
        """The CPU image's ``train.py`` (DLE's flags): dist_sync instead of Horovod, no GPU list, the job's
        total batch, synthetic data, a Speed line every batch unless the suite sets ``display_batches``."""
        return [
            *self._dle_flags(
                case,
                kv_store="dist_sync",
                gpus=False,
                batch=case.batch_size_per_device * case.total_gpus,
                display=dict(case.options).get("display_batches", 1),
                data_backend="synthetic",
            ),
            *case.extra_args,
        ]

    def cpu_launches(self, case: Case, nodes: tuple[Node, ...], ctx: LaunchContext) -> list[NodeLaunch]:
        """mpirun as on GPUs; every rank runs ``mpi-dmlc.sh`` (DMLC worker; rank 0 also the ps-lite
        scheduler + server at node 0's address and ``ctx.master_port``)."""
        env = {
            "PYTHONUNBUFFERED": "1",
            "DMLC_PS_ROOT_URI": nodes[0].reach_address,
            "DMLC_PS_ROOT_PORT": str(ctx.master_port),
        }
        if ctx.cpu_threads_per_process:
            env["OMP_NUM_THREADS"] = str(ctx.cpu_threads_per_process)
        program = [f"{RN50}/mpi-dmlc.sh", *self.cpu_train_args(case)]
        return mpi_launches(case, nodes, ctx, program, env=env, cwd=RN50)
