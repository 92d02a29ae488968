"""NGC PyTorch ResNet-50 v1.5 (seed 002): DeepLearningExamples' ConvNets in the NGC PyTorch image.

One ``multiproc.py`` launcher per node, all started at once (the seed started ``single_node_train.sh`` on
every node by hand with ``--node_rank`` edited per node). DALI data loading from ``/data/imagenet`` by
default, or synthetic data (``options: {data_backend: syntetic}``, DLE's own spelling). AMP with dynamic
(default) or static loss scale 128, as the seed's two AMP tables. ``--prof`` = warm-up + measured + 1
iterations (the seed's 121 with its 20 + 100 window); ``-p 1`` prints every iteration.

Releases (option ``release``, :mod:`dlperf_core.frameworks.releases`): ``20.03`` is the seed's (NGC 20.03, DLE at
the seed's commit, CUDA 10.2: not Ampere, not Hopper); the default ``25.12`` is NGC 25.12 with DLE's last commit,
whose flags differ (:meth:`NgcPytorch.seed_flags`) and which has no static loss scale. The flags of each release
are checked against its argument parser's sources (tests/data/argparse/).

On CPU nodes (``accelerator: cpu``) the row trains for real with PyTorch's CPU build from PyPI: DLE's ConvNets
is not packaged (it lives only in the NGC image), so the model and loop are dlperf's reference ResNet-50 v1.5
(:mod:`dlperf_core.workload`, image ``dlperf/pytorch-reference:cpu``), launched the same way (one launcher per
node, all at once, one process per "GPU", torch.distributed's launcher) and printing the same DLLogger lines.
"""

from __future__ import annotations

from typing import ClassVar

from dlperf_core.cluster.inventory import Node
from dlperf_core.frameworks.base import FrameworkAdapter, LaunchContext, on_cpu
from dlperf_core.frameworks.pytorch_reference import PytorchReference, reference_resnet_shape
from dlperf_core.frameworks.releases import DEFAULT_RELEASE, default_release, release_names, releases_of
from dlperf_core.frameworks.shape import ModelShape
from dlperf_core.measure.origin import Figure
from dlperf_core.model import Case, NodeLaunch, OptionValue

RN50 = "/workspace/rn50"
SEED_RELEASES = tuple(r.name for r in releases_of("ngc_pytorch") if r.seed)


class NgcPytorch(FrameworkAdapter):
    name: ClassVar[str] = "ngc_pytorch"
    models: ClassVar[frozenset[str]] = frozenset({"resnet50_v1.5"})
    precisions: ClassVar[frozenset[str]] = frozenset({"fp32", "tf32", "amp"})
    log_format: ClassVar[str] = "ngc_pytorch_dllogger"
    default_image: ClassVar[str] = default_release("ngc_pytorch").image
    cpu_image: ClassVar[str | None] = PytorchReference.default_image
    shm_size: ClassVar[str | None] = "16g"
    gpu_figure: ClassVar[Figure] = Figure("framework", "DeepLearningExamples ConvNets main.py and its DLLogger")
    cpu_figure: ClassVar[Figure | None] = Figure(
        "dlperf", "dlperf's reference workload printing NGC PyTorch's DLLogger lines (DLE's ConvNets is not on PyPI)"
    )
    default_batch: ClassVar[dict[str, int]] = {"fp32": 128, "tf32": 128, "amp": 256}
    default_warmup: ClassVar[int | None] = 20
    default_measured: ClassVar[int | None] = 100
    option_defaults: ClassVar[dict[str, OptionValue]] = {
        "data_backend": "dali-cpu",
        "data_dir": "/data/imagenet",
        "loss_scale": "dynamic",
        "workers": 8,
        "release": DEFAULT_RELEASE["ngc_pytorch"],
    }
    option_choices: ClassVar[dict[str, tuple[OptionValue, ...] | None]] = {
        # synthetic data: "syntetic" is DLE's spelling at the seed's commit, "synthetic" at its last; either one
        # is passed in the spelling of the case's release
        "data_backend": ("dali-cpu", "dali-gpu", "pytorch", "syntetic", "synthetic"),
        "loss_scale": ("dynamic", "static"),
        "release": release_names("ngc_pytorch"),
    }

    def seed_flags(self, case: Case) -> bool:
        """Whether ``case`` trains in a release with DLE at the seed's commit (its 2020 flags), else DLE's last
        commit: ``-c fanin`` became ``--conv_init fan_in`` (a model argument, parsed from what main.py's parser
        leaves), ``--momentum`` is spelled out (the seed's ``--mom`` is argparse's abbreviation of it, at both commits),
        ``--dynamic-loss-scale`` is gone (AMP's GradScaler is always dynamic), synthetic data is ``synthetic``."""
        release = self.release(case)
        return release is None or release.seed

    def main_args(self, case: Case) -> list[str]:
        seed = self.seed_flags(case)
        backend = str(self.option(case, "data_backend"))
        if backend in ("syntetic", "synthetic"):
            backend = "syntetic" if seed else "synthetic"
        args = [
            f"{RN50}/main.py",
            "--data-backend",
            backend,
            "--raport-file",
            f"{RN50}/raport.json",
            f"-j{self.option(case, 'workers')}",
            "-p",
            "1",
            "--lr",
            "1.024",
            "--optimizer-batch-size",
            "-1",
            "--warmup",
            "8",
            "--arch",
            "resnet50",
            *(["-c", "fanin"] if seed else []),
            "--label-smoothing",
            "0.1",
            "--lr-schedule",
            "cosine",
            "--mom" if seed else "--momentum",
            "0.125",
            "--wd",
            "3.0517578125e-05",
            "--workspace",
            RN50,
            "-b",
            str(case.batch_size_per_device),
            "--epochs",
            "1",
            "--prof",
            str(case.warmup_iterations + case.measured_iterations + 1),
            "--training-only",
            "--no-checkpoints",
        ]
        if case.precision == "amp":
            if self.option(case, "loss_scale") == "static":
                args += ["--amp", "--static-loss-scale", "128"]
            elif seed:
                args += ["--amp", "--dynamic-loss-scale"]
            else:
                args += ["--amp"]
        # DLE's last commit: the model's arguments go to the model's parser, which reads what main.py's parser
        # leaves; after the data folder, so that main.py's positional argument is not taken from among them
        model_args = [] if seed else ["--conv_init", "fan_in"]
        return args + list(case.extra_args) + [str(self.option(case, "data_dir")), *model_args]

    def refuses(self, case: Case, nodes: tuple[Node, ...]) -> str | None:
        """The base class's refusals, then a static loss scale where DLE has none: at its last commit AMP's
        GradScaler always grows the scale (``--static-loss-scale`` is only its initial value)."""
        refusal = super().refuses(case, nodes)
        if refusal or case.image or on_cpu(nodes) or case.precision != "amp" or self.seed_flags(case):
            return refusal
        if self.option(case, "loss_scale") == "static":
            return (
                f"{case.key}: loss_scale static needs DLE's 2020 ConvNets (release {', '.join(SEED_RELEASES)}):"
                f" at its last commit (release {self.option(case, 'release')}) AMP's loss scale is always dynamic"
            )
        return None

    def model_shape(self, model: str, extra_args: tuple[str, ...]) -> ModelShape | None:  # noqa: ARG002 - the same flags for every model
        """The shrinking flags of dlperf's reference workload (``--image-size``, ``--width``, ``--num-classes``),
        which this adapter trains on CPU nodes, where its suites shrink the model."""
        return reference_resnet_shape(extra_args)

    def launches(self, case: Case, nodes: tuple[Node, ...], ctx: LaunchContext) -> list[NodeLaunch]:
        if on_cpu(nodes):  # DLE's code is not on PyPI: the reference workload, launched the same way
            return PytorchReference().launches(case, nodes, ctx)
        out = []
        for rank, node in enumerate(nodes):
            argv = [
                "python",
                f"{RN50}/multiproc.py",
                "--nnodes",
                str(case.nodes),
                "--node_rank",
                str(rank),
                "--nproc_per_node",
                str(case.gpus_per_node),
                "--master_addr",
                nodes[0].reach_address,
                f"--master_port={ctx.master_port}",
                *self.main_args(case),
            ]
            env = {"PYTHONUNBUFFERED": "1", "NVIDIA_TF32_OVERRIDE": "0" if case.precision == "fp32" else "1"}
            out.append(NodeLaunch(node=node, node_rank=rank, argv=tuple(argv), env=env))
        return out
