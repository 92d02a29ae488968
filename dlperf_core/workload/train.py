#!/usr/bin/env python3
"""Reference training workload: ResNet-50 v1.5 trained on one synthetic batch, logging like NGC PyTorch.

Runs as ``python dlperf_core/workload/train.py``, ``python -m dlperf_core.workload.train`` or under
``torchrun`` (one process per device; gloo on CPU, nccl on CUDA, DistributedDataParallel). Imports only
torch and the standard library (and ``mlperf_logging.mllog`` where it is installed), so the ``workload``
folder can be copied alone into a container.

Rank 0 prints DLLogger lines in the NGC PyTorch format (one ``PARAMETER`` line, one line per printed
iteration, one ``Summary`` line); ``train.total_ips`` is always global (all ranks) images per second. Beside
them it prints MLPerf's MLLOG events through ``mlperf_logging.mllog`` where that package is installed
(:class:`MlperfLog`); without it, the DLLogger lines alone.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import inspect
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
from torch import nn

if TYPE_CHECKING or __package__ not in (None, ""):  # a module of dlperf_core.workload (as mypy reads it)
    from .resnet import resnet50
else:  # run as a script: make the sibling module importable
    sys.path.insert(0, str(Path(__file__).absolute().parent))
    from resnet import resnet50

ARCH = "resnet50"
MOMENTUM = 0.9


# --------------------------------------------------------------------------------------------- CLI
def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


# The arguments the training workloads (this one and train_llm.py) share, added in three places so that each
# parser keeps its own order of options in --help; what differs between the two is a parameter.
def add_precision_argument(p: argparse.ArgumentParser, amp: str) -> None:
    """``--precision``; ``amp`` says what ``--precision amp`` does in this workload."""
    p.add_argument(
        "--precision",
        choices=("fp32", "tf32", "amp"),
        default="fp32",
        help=f"fp32: TF32 off; tf32: TF32 on; amp: {amp} (fp32)",
    )


def add_iteration_arguments(
    p: argparse.ArgumentParser, warmup: int, iterations: int, warmup_help: str, iterations_help: str
) -> None:
    """``--warmup-iterations`` and ``--iterations`` with these defaults."""
    p.add_argument("--warmup-iterations", type=_non_negative_int, default=warmup, help=warmup_help)
    p.add_argument("--iterations", type=_positive_int, default=iterations, help=iterations_help)


def add_run_arguments(p: argparse.ArgumentParser, seed_help: str | None) -> None:
    """``--print-freq``, ``--seed``, ``--compile`` and ``--device``."""
    p.add_argument("--print-freq", type=_positive_int, default=1, help="print every N iterations (1)")
    p.add_argument("--seed", type=int, default=0, help=seed_help)
    p.add_argument("--compile", action="store_true", help="wrap the model in torch.compile")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto", help="auto: CUDA if available")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="train.py",
        description="ResNet-50 v1.5 training benchmark on synthetic data (NGC DLLogger output).",
    )
    p.add_argument("--batch-size", type=_positive_int, default=256, help="per-device batch size (256)")
    add_precision_argument(p, amp="autocast, see --amp-dtype")
    p.add_argument(
        "--amp-dtype",
        choices=("bf16", "fp16"),
        default="bf16",
        help="autocast dtype with --precision amp; fp16 adds a GradScaler (bf16)",
    )
    p.add_argument(
        "--static-loss-scale",
        type=_positive_float,
        default=None,
        help="fp16 only: fixed loss scale instead of the dynamic one",
    )
    add_iteration_arguments(
        p, 20, 100, "iterations run before the measured ones (20)", "measured iterations after warm-up (100)"
    )
    p.add_argument("--image-size", type=_positive_int, default=224, help="square input side (224)")
    p.add_argument("--width", type=_positive_int, default=64, help="ResNet base width; 64 is the real model")
    p.add_argument("--num-classes", type=_positive_int, default=1000, help="classifier outputs (1000)")
    p.add_argument(
        "--channels-last",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="NHWC memory format (default: on for CUDA, off for CPU)",
    )
    add_run_arguments(p, seed_help="random seed (0)")
    p.add_argument(
        "--lr",
        type=_positive_float,
        default=None,
        help="SGD learning rate (default: NGC linear scaling, 0.256 * global batch / 256)",
    )
    p.add_argument(
        "--lr-warmup-iterations",
        type=_non_negative_int,
        default=None,
        help="linear learning-rate warm-up from lr/N to lr over the first N iterations, as NGC's recipe "
        "warms up over its first epochs (default: --warmup-iterations; 0: none)",
    )
    p.add_argument(
        "--weight-decay",
        type=float,
        default=3.0517578125e-05,
        help="SGD weight decay of conv/linear weights, not of BN/biases (NGC: 1/32768)",
    )
    p.add_argument("--label-smoothing", type=float, default=0.1, help="cross-entropy label smoothing (0.1)")
    p.add_argument(
        "--zero-init-residual", action="store_true", help="initialise the last BN gamma of each bottleneck to zero"
    )
    p.add_argument(
        "--threads",
        type=_positive_int,
        default=None,
        help="torch intra-op threads (CPU default: cores // local world size)",
    )
    return p


# ------------------------------------------------------------------------------------ environment
@dataclass(frozen=True)
class DistInfo:
    """Where this process sits in a torchrun launch (defaults: a single process)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    launched: bool = False  # torchrun-style environment present

    @classmethod
    def from_env(cls) -> DistInfo:
        env = dict(os.environ)
        if "RANK" not in env and "OMPI_COMM_WORLD_RANK" in env:  # launched by Open MPI's mpirun
            env["RANK"] = env["OMPI_COMM_WORLD_RANK"]
            env["WORLD_SIZE"] = env["OMPI_COMM_WORLD_SIZE"]
            env["LOCAL_RANK"] = env["OMPI_COMM_WORLD_LOCAL_RANK"]
            env["LOCAL_WORLD_SIZE"] = env.get("OMPI_COMM_WORLD_LOCAL_SIZE", env["WORLD_SIZE"])
            os.environ.update({k: env[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")})
        if not all(k in env for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")):
            return cls()
        world_size = int(env["WORLD_SIZE"])
        return cls(
            rank=int(env["RANK"]),
            world_size=world_size,
            local_rank=int(env["LOCAL_RANK"]),
            local_world_size=int(env.get("LOCAL_WORLD_SIZE", world_size)),
            launched=True,
        )


def _cpu_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


CPUS_ENV = "DLPERF_CPUS"
"""The cores dlperf gives this node's ranks (``0,1``; dlperf_core.cluster.cpu_placement.CPUS_ENV, the same name)."""


def pin_rank(info: DistInfo, threads: int) -> list[int]:
    """Pin this process to its own cores: the ``local_rank``-th slice of ``threads`` cores of ``$DLPERF_CPUS``
    (dlperf's placement of a CPU stand-in node's ranks). Returns the cores, or [] when not pinned (no
    ``$DLPERF_CPUS``, too few cores in it, or no ``sched_setaffinity`` on this system)."""
    listed = [int(c) for c in os.environ.get(CPUS_ENV, "").split(",") if c.strip()]
    mine = listed[info.local_rank * threads : (info.local_rank + 1) * threads]
    if len(mine) != threads or not hasattr(os, "sched_setaffinity"):
        return []
    os.sched_setaffinity(0, mine)
    return mine


def set_cpu_threads(threads: int | None, info: DistInfo) -> list[int]:
    """torch's intra-op threads on CPU: ``threads`` when given (dlperf gives one per rank), else this process's
    cores shared between the node's local ranks; the rank is pinned to its own cores when dlperf placed it
    (:func:`pin_rank`). Returns the cores it is pinned to ([]: not pinned)."""
    count = threads if threads is not None else max(1, _cpu_cores() // info.local_world_size)
    pinned = pin_rank(info, count)
    torch.set_num_threads(count)
    return pinned


def resolve_device(choice: str, info: DistInfo) -> torch.device:
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    if choice == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError("--device cuda requested but CUDA is not available")
    if info.local_rank >= torch.cuda.device_count():
        raise RuntimeError(f"LOCAL_RANK {info.local_rank} but only {torch.cuda.device_count()} CUDA device(s)")
    device = torch.device("cuda", info.local_rank)
    torch.cuda.set_device(device)
    return device


def set_precision_flags(precision: str) -> None:
    """TF32 for matmul and cuDNN convolutions: off for fp32, on for tf32 and amp (no-ops on CPU).

    Uses the legacy ``allow_tf32`` switches only: mixing them with the newer ``fp32_precision`` API
    makes ``torch.get_float32_matmul_precision()`` (read by inductor) raise.
    """
    tf32 = precision != "fp32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


# ---------------------------------------------------------------------------------------- logging
class DLLogger:
    """Rank-0 stdout lines in the NGC PyTorch DLLogger format, flushed one by one."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def log(self, when: float, body: str) -> None:
        if self.enabled:
            # Always six microsecond digits (str(datetime) drops them when they are zero).
            stamp = datetime.datetime.fromtimestamp(when).strftime("%Y-%m-%d %H:%M:%S.%f")
            print(f"DLL {stamp} - {body}", flush=True)

    def parameters(self, params: dict[str, object]) -> None:
        self.log(time.time(), "PARAMETER " + "".join(f"{k} : {v}  " for k, v in params.items()).rstrip() + " ")

    def iteration(self, when: float, i: int, loss: float, ips: float) -> None:
        self.log(when, f"Epoch: 0 Iteration: {i}  train.loss : {loss:.5f}  train.total_ips : {ips:.2f} img/s")

    def summary(self, when: float, loss: float, ips: float) -> None:
        self.log(when, f"Summary: train.loss : {loss:.5f}  train.total_ips : {ips:.2f} img/s")


def now_ms() -> float:
    """The time now, to the millisecond: the instant a DLLogger line and an MLLOG event of the same moment share
    (MLLOG's ``time_ms`` holds whole milliseconds), so that both parsers measure the same window."""
    return round(time.time(), 3)


class MlperfLog:
    """Rank 0's MLLOG events (``:::MLLOG {json}`` lines, written by ``mlperf_logging.mllog`` where it is
    installed; nothing without it): the run's settings, ``run_start``, the warm-up as epoch 0 and the measured
    window as epoch 1, the window's throughput and ``run_stop``. ``train_samples`` is the window's samples, so
    that one epoch is the window: dlperf's MLLOG parser (warm-up: the first span) then measures the same samples
    over the same two instants as its DLLogger parser. ``run_stop`` says ``aborted``: a benchmark run stops at its
    iteration count, never at MLPerf's accuracy target."""

    def __init__(self, enabled: bool) -> None:
        self._logger = None
        if enabled and importlib.util.find_spec("mlperf_logging") is not None:
            from mlperf_logging import mllog  # only where installed: the workload folder runs without it

            self._logger = mllog.get_mllogger()

    @property
    def enabled(self) -> bool:
        return self._logger is not None

    def event(self, key: str, value: object = None, when: float | None = None, **metadata: object) -> None:
        self._log("event", key, value, when, metadata)

    def start(self, key: str, when: float, **metadata: object) -> None:
        self._log("start", key, None, when, metadata)

    def end(self, key: str, when: float, **metadata: object) -> None:
        self._log("end", key, None, when, metadata)

    def _log(self, kind: str, key: str, value: object, when: float | None, metadata: dict[str, object]) -> None:
        if self._logger is None:
            return
        time_ms = round(when * 1000) if when is not None else None
        getattr(self._logger, kind)(key=key, value=value, metadata=metadata or None, time_ms=time_ms, stack_offset=2)

    def begin(self, initialised: float, settings: Sequence[tuple[str, object]]) -> None:
        """What MLPerf's rules ask before the run: a cache clear, the initialisation (from ``initialised``,
        the workload's start, to now), the benchmark's settings; then ``run_start``, now."""
        self.event("cache_clear", True)
        self.start("init_start", initialised)
        for key, value in settings:
            self.event(key, value)
        started = now_ms()
        self.end("init_stop", started)
        self.start("run_start", started)

    def window(self, started: float, warmed: float, ended: float, throughput: float) -> None:
        """The spans, in one block of two epochs: epoch 0 from ``started`` to ``warmed`` (the warm-up), epoch 1
        from ``warmed`` to ``ended`` (the measured window, whose ``throughput`` follows), then ``run_stop``."""
        self.start("block_start", started, first_epoch_num=0, epoch_count=2)
        self.start("epoch_start", started, epoch_num=0)
        self.end("epoch_stop", warmed, epoch_num=0)
        self.start("epoch_start", warmed, epoch_num=1)
        self.end("epoch_stop", ended, epoch_num=1)
        self.end("block_stop", ended, first_epoch_num=0)
        self.event("throughput", throughput, ended)
        self.end("run_stop", ended, status="aborted")


# ----------------------------------------------------------------------- shared by the workloads
def run_script(
    prog: str,
    parser: argparse.ArgumentParser,
    run: Callable[[argparse.Namespace, DistInfo], None],
    argv: Sequence[str] | None = None,
) -> int:
    """A workload's ``main``: parse the arguments, run, and end any failure as one clear line on stderr
    (``<prog>: error (rank R): Type: message``, which dlperf names in a failed case's reason) and exit 1."""
    args = parser.parse_args(argv)
    info = DistInfo.from_env()
    try:
        run(args, info)
    except Exception as exc:  # noqa: BLE001 - one clear line, non-zero exit
        print(f"{prog}: error (rank {info.rank}): {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
        return 1
    if dist.is_available() and dist.is_initialized():
        # Every rank is done before any leaves; then leave without tearing the process group down: on gloo a
        # peer that has already gone can abort the teardown ("terminate called without an active exception",
        # SIGABRT) and fail a run that measured fine (seen once in ~50 two-container runs).
        dist.barrier()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


def mean_over_ranks(loss: torch.Tensor, info: DistInfo, device: torch.device) -> float:
    """Mean loss over ranks; waits for the device, so the next timestamp is true."""
    if info.world_size > 1:
        loss = loss.clone()
        dist.all_reduce(loss)
        loss /= info.world_size
    value = loss.item()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return value


def check_no_compilation_in_window(compiled: bool, before_window: int | None, warmup: int) -> None:
    """Fail the run when torch.compile compiled anything after the warm-up (``before_window``: the count
    then): the measured window would time the compiler, not training, so no figure is printed."""
    if compiled and before_window is not None and compilations() > before_window:
        raise RuntimeError(
            f"torch.compile compiled {compilations() - before_window} more frame(s)/graph(s) inside the "
            f"measured window (after warm-up iteration {warmup}): raise --warmup-iterations"
        )


# --------------------------------------------------------------------------------------- training
def compilations() -> int:
    """How many frames and training graphs torch.compile has compiled so far in this process (dynamo's own
    counters: a recompilation adds to them)."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:  # a torch without dynamo: nothing is ever compiled
        return 0
    return int(counters["frames"]["total"]) + int(counters["aot_autograd"]["total"])


def data_parallel(model: nn.Module, device: torch.device, cuda: bool) -> nn.Module:
    """``model`` under DistributedDataParallel, each rank keeping its own BN statistics (no buffer broadcast per
    forward), like NGC. torch 2.13 renamed ``broadcast_buffers`` to ``forward_sync_buffers``; containers may ship
    an older torch."""
    ddp = nn.parallel.DistributedDataParallel
    device_ids = [device.index] if cuda else None
    if "forward_sync_buffers" in inspect.signature(ddp).parameters:
        return ddp(model, device_ids=device_ids, gradient_as_bucket_view=True, forward_sync_buffers=False)
    return ddp(model, device_ids=device_ids, gradient_as_bucket_view=True, broadcast_buffers=False)


def make_optimizer(model: nn.Module, lr: float, args: argparse.Namespace, cuda: bool) -> torch.optim.Optimizer:
    """SGD with momentum; weight decay on conv/linear weights only (NGC default: no BN/bias decay)."""
    decay = [p for p in model.parameters() if p.ndim > 1]
    no_decay = [p for p in model.parameters() if p.ndim <= 1]
    groups = [
        {"params": decay, "weight_decay": args.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    # Fused kernel on CUDA (one launch for all parameters); the default (for-each) path on CPU, and with fp16's
    # loss scaler everywhere: fused SGD takes the scaler's skip into its kernel, and a skipped *first* step
    # leaves its momentum buffers allocated but never written (torch 2.11 to 2.13), so the next step adds
    # garbage to the weights. On an H100 that was fp16 eager's "loss is NaN/inf at iteration 4" (both
    # repeats, docs/benchmarks.md (f)); tests/core/workload/test_workload.py reproduces it on CPU.
    fused = cuda and not uses_loss_scaler(args)
    return torch.optim.SGD(groups, lr=lr, momentum=MOMENTUM, fused=True if fused else None)


def uses_loss_scaler(args: argparse.Namespace) -> bool:
    """Whether the run trains with a GradScaler: AMP in fp16 (bf16 and fp32 need none)."""
    return bool(args.precision == "amp" and args.amp_dtype == "fp16")


def make_scaler(args: argparse.Namespace, device: torch.device) -> torch.amp.GradScaler | None:
    """GradScaler for fp16 autocast. Either way a step whose gradients are not finite is skipped (the
    weights never see a NaN or inf): dynamic (default) halves the scale on such a step and doubles it after
    2000 good ones; static keeps ``--static-loss-scale`` for good (``build_step`` sets it back after every
    update, as NGC's static loss scale does)."""
    if not uses_loss_scaler(args):
        return None
    if args.static_loss_scale is None:
        return torch.amp.GradScaler(device.type)
    return torch.amp.GradScaler(device.type, init_scale=args.static_loss_scale, growth_interval=1_000_000_000)


def lr_at(iteration: int, lr: float, warmup: int) -> float:
    """The learning rate of iteration ``iteration`` (1-based): linear from lr/warmup up to lr over the first
    ``warmup`` iterations (NGC's warm-up, per iteration instead of per epoch), then lr."""
    if warmup <= 0 or iteration >= warmup:
        return lr
    return lr * max(iteration, 1) / warmup


def build_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler | None,
    images: torch.Tensor,
    labels: torch.Tensor,
    args: argparse.Namespace,
) -> Callable[[], torch.Tensor]:
    """One training iteration (forward, loss, backward, SGD update); returns the detached loss."""
    criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    amp = args.precision == "amp"
    amp_dtype = torch.bfloat16 if args.amp_dtype == "bf16" else torch.float16
    device_type = images.device.type
    static_scale = args.static_loss_scale

    def step() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=amp_dtype, enabled=amp):
            loss: torch.Tensor = criterion(model(images), labels)
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)  # unscales, and skips the update when a gradient is not finite
            scaler.update(static_scale)  # static: the same scale again; dynamic (None): back off or grow
        return loss.detach()

    return step


def run(args: argparse.Namespace, info: DistInfo) -> None:
    initialised = now_ms()  # MLLOG's init_start
    device = resolve_device(args.device, info)
    cuda = device.type == "cuda"
    if args.static_loss_scale is not None and (args.precision, args.amp_dtype) != ("amp", "fp16"):
        raise ValueError("--static-loss-scale needs --precision amp --amp-dtype fp16")
    if info.launched:
        dist.init_process_group("nccl" if cuda else "gloo", device_id=device if cuda else None)
    pinned = set_cpu_threads(args.threads, info) if not cuda else []
    set_precision_flags(args.precision)
    if not cuda and os.environ.get("DLPERF_DEVICE_MEMORY_MB"):
        # A CPU stand-in with a device memory limit (dlperf's local runtime): oneDNN reports a failed
        # allocation as "could not create a primitive", like any other failure; the native kernels raise
        # the allocator's "Cannot allocate memory", which is what the max batch search must see.
        # (the stubs type this flag as its ContextProp descriptor; at runtime it is a bool)
        torch.backends.mkldnn.enabled = False  # type: ignore[assignment]
    if cuda:
        torch.backends.cudnn.benchmark = True  # fixed input shape: autotune convolutions once
    channels_last = cuda if args.channels_last is None else args.channels_last
    memory_format = torch.channels_last if channels_last else torch.contiguous_format

    # Same initial weights on every rank (DDP broadcasts rank 0's anyway).
    torch.manual_seed(args.seed)
    model: nn.Module = resnet50(args.width, args.num_classes, args.zero_init_residual)
    # Module.to takes memory_format (documented), but torch's overloads leave it out
    model = model.to(device=device, memory_format=memory_format).train()  # type: ignore[call-overload]
    global_batch = args.batch_size * info.world_size
    lr = args.lr if args.lr is not None else 0.256 * global_batch / 256
    lr_warmup = args.warmup_iterations if args.lr_warmup_iterations is None else args.lr_warmup_iterations
    optimizer = make_optimizer(model, lr_at(1, lr, lr_warmup), args, cuda)
    if info.world_size > 1:
        model = data_parallel(model, device, cuda)
    if args.compile:
        model = torch.compile(model)  # type: ignore[assignment]

    # Synthetic data: one random batch made once on the device (like DALI's synthetic loader).
    torch.manual_seed(args.seed + info.rank)
    images = torch.randn(args.batch_size, 3, args.image_size, args.image_size, device=device)
    images = images.contiguous(memory_format=memory_format)
    labels = torch.randint(0, args.num_classes, (args.batch_size,), device=device)
    step = build_step(model, optimizer, make_scaler(args, device), images, labels, args)

    logger = DLLogger(enabled=info.rank == 0)
    logger.parameters(
        {
            "arch": ARCH,
            "batch_size": args.batch_size,
            "world_size": info.world_size,
            "print_freq": args.print_freq,
            "precision": args.precision,
            "amp": args.precision == "amp",
            "image_size": args.image_size,
            "width": args.width,
            "warmup_iterations": args.warmup_iterations,
            "iterations": args.iterations,
            "device": device.type,
            "amp_dtype": args.amp_dtype,
            "static_loss_scale": args.static_loss_scale if args.static_loss_scale is not None else "dynamic",
            "num_classes": args.num_classes,
            "channels_last": channels_last,
            "compile": args.compile,
            "lr": f"{lr:g}",
            "lr_warmup_iterations": lr_warmup,
            "momentum": MOMENTUM,
            "weight_decay": args.weight_decay,
            "label_smoothing": args.label_smoothing,
            "zero_init_residual": args.zero_init_residual,
            "seed": args.seed,
            "threads": torch.get_num_threads(),
            "pinned_cores": ",".join(map(str, pinned)) or "none",
            "torch_version": torch.__version__,
        }
    )

    mlperf = MlperfLog(enabled=info.rank == 0)
    settings: list[tuple[str, object]] = [
        ("submission_benchmark", "resnet"),
        ("submission_org", "dlperf"),
        ("submission_division", "open"),
        ("submission_status", "research"),
        ("submission_platform", device.type),
        ("seed", args.seed),
        ("global_batch_size", global_batch),
        ("gradient_accumulation_steps", 1),
        ("opt_name", "sgd"),
        ("sgd_opt_base_learning_rate", lr),
        ("sgd_opt_momentum", MOMENTUM),
        ("sgd_opt_weight_decay", args.weight_decay),
        ("opt_learning_rate_warmup_iterations", lr_warmup),
        ("model_bn_span", args.batch_size),
        ("train_samples", args.iterations * global_batch),  # the measured window is epoch 1
        ("eval_samples", 0),  # a benchmark run does not evaluate
    ]

    total = args.warmup_iterations + args.iterations
    if cuda:
        torch.cuda.synchronize(device)
    if info.world_size > 1:
        dist.barrier()  # all ranks start the clock together
    mlperf.begin(initialised, settings)
    last_time = started = now_ms()
    last_i = 0
    measure_start = last_time  # reset at the end of warm-up
    compiled_before_window = compilations() if args.warmup_iterations == 0 else None
    loss_value = float("nan")
    for i in range(1, total + 1):
        if i <= lr_warmup + 1:  # the warm-up's last change is at iteration lr_warmup (then lr stays)
            for group in optimizer.param_groups:
                group["lr"] = lr_at(i, lr, lr_warmup)
        loss = step()
        # Host/device sync only on printed iterations (and the warm-up end and the last one, which the
        # summary needs); throughput is over the interval since the previous printed line.
        if i % args.print_freq == 0 or i == args.warmup_iterations or i == total:
            loss_value = mean_over_ranks(loss, info, device)
            now = now_ms()
            logger.iteration(now, i, loss_value, (i - last_i) * global_batch / max(now - last_time, 1e-9))
            last_time, last_i = now, i
            if i == args.warmup_iterations:
                measure_start = now
                compiled_before_window = compilations()
    check_no_compilation_in_window(args.compile, compiled_before_window, args.warmup_iterations)
    elapsed = max(last_time - measure_start, 1e-9)
    logger.summary(last_time, loss_value, args.iterations * global_batch / elapsed)
    mlperf.window(started, measure_start, last_time, args.iterations * global_batch / elapsed)


def main(argv: Sequence[str] | None = None) -> int:
    return run_script("train.py", build_parser(), run, argv)


if __name__ == "__main__":
    sys.exit(main())
