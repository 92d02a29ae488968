"""Logs for the parser tests (tests/core/parsing/), their fuzz corpus and the CLI, fault and end-to-end tests:
synthetic logs of every parsed format, written the way the frameworks print them, and where the real NGC
PyTorch logs are, with their published figures.

What each format's fixtures stand for (the seed reports' verbatim lines, the DLPerf scripts' arguments, the
frameworks' print statements) is told by its tests, ``tests/core/parsing/test_<module>.py``. The real logs live in
``$DLPERF_SHARED/reallogs`` (default: the repository's ``../shared``).
"""

from __future__ import annotations

import json
import random
import re
from datetime import UTC, datetime, timedelta

import pytest

from helpers import SHARED  # seeds and reallogs, $DLPERF_SHARED

# ==================================================================================== NGC PyTorch DLLogger
NGC = SHARED / "reallogs" / "ngc_pytorch"
NGC_PUBLISHED = {  # reallogs/PROVENANCE.md: each equals the log's Summary train.total_ips
    "pytorch_gpu1_fp32_bs128.txt": 364.3,
    "pytorch_gpu1_amp_bs128.txt": 828.7,
    "pytorch_gpu1_amp_bs256.txt": 841.6,
    "pytorch_gpu8_fp32_bs128.txt": 2826.8,
    "pytorch_gpu8_amp_bs128.txt": 6014.7,
    "pytorch_gpu8_amp_bs248.txt": 6230.1,
}

needs_ngc_logs = pytest.mark.skipif(not NGC.is_dir(), reason=f"no real logs at {NGC}")


def ngc_log(name: str) -> str:
    """The real NGC PyTorch log ``name``."""
    return (NGC / name).read_text(encoding="utf-8")


# ---- synthetic DLLogger logs
DLL_T0 = datetime(2021, 4, 9, 16, 50, 0)


def dll_stamp(seconds: float) -> str:
    return (DLL_T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%d %H:%M:%S.%f")


def param_line(batch: int | None = 32, world: int | None = 2, print_freq: int = 1, **more: object) -> str:
    kv = {"arch": "resnet50", "batch_size": batch, "print_freq": print_freq, "world_size": world, **more}
    body = "".join(f"{k} : {v}  " for k, v in kv.items() if v is not None)
    return f"DLL {dll_stamp(0)} - PARAMETER {body}".rstrip() + " \n"


def iter_line(seconds: float, epoch: int | None, it: int, loss: float, rate: float, prefix: str = "") -> str:
    step = f"Epoch: {epoch} Iteration: {it}" if epoch is not None else f"Iteration: {it}"
    return f"{prefix}DLL {dll_stamp(seconds)} - {step}  train.loss : {loss:.5f}  train.total_ips : {rate:.2f} img/s\n"


def summary_line(seconds: float, rate: float) -> str:
    return f"DLL {dll_stamp(seconds)} - Summary: train.loss : 6.90000  train.total_ips : {rate:.2f} img/s\n"


def synthetic(
    iters_per_epoch: int,
    *,
    epochs: int = 1,
    print_freq: int = 1,
    batch: int = 32,
    world: int = 2,
    per_iter: float = 0.1,
    zero_based: bool = False,
    prefix: str = "",
    summary: bool = True,
    params: bool = True,
) -> str:
    """A DLLogger log whose every iteration takes ``per_iter`` s: throughput is batch*world/per_iter."""
    rate = batch * world / per_iter
    out = [param_line(batch, world, print_freq)] if params else []
    done = 0
    for e in range(epochs):
        first = 0 if zero_based else 1
        for i in range(first, iters_per_epoch + first):
            if i % print_freq == 0:
                out.append(iter_line((done + i - first + 1) * per_iter, e, i, 7.0, rate, prefix))
        done += iters_per_epoch
    if summary:
        out.append(summary_line(done * per_iter + 0.5, rate))
    return "".join(out)


# ==================================================================================== NGC MXNet
MX_T0 = datetime(2020, 12, 16, 8, 2, 0, tzinfo=UTC)


def mx_stamp(seconds: float) -> str:
    t = MX_T0 + timedelta(seconds=seconds)
    return t.strftime("%Y-%m-%d %H:%M:%S,") + f"{t.microsecond // 1000:03d}"


def mx_args(gpus: int, bs: int, iters: int | None, epochs: int, disp: int, **more: object) -> str:
    listed = ", ".join(str(g) for g in range(gpus))
    bench = f"benchmark_iters={iters}, " if iters is not None else "benchmark_iters=None, "
    extra = "".join(f"{k}={v}, " for k, v in more.items())
    return (
        f"Namespace(amp=False, arch='resnetv15', batch_size={gpus * bs}, begin_epoch=0, {bench}"
        f"disp_batches={disp}, dtype='float16', gpus=[{listed}], kv_store='horovod', {extra}"
        f"mode='train', num_epochs={epochs}, num_examples=32000, report='benchmark_report_fp16.json-{gpus},{bs}', "
        f"wd=3.0517578125e-05)"
    )


def mx_run(
    gpus: int,
    bs: int,
    *,
    t0: float = 0.0,
    epochs: int = 3,
    iters: int = 500,
    disp: int = 20,
    per_iter: float = 0.25,
    prefix: bool = True,
    stamps: bool = True,
    args: bool = True,
    bench_arg: bool = True,
    lie: bool = False,
    loss: str | None = None,
    finished: bool = True,
) -> str:
    """One DeepLearningExamples MXNet run whose every iteration takes ``per_iter`` s on every rank (rank r
    prints r ms later; rank order rotates): the global rate is gpus*bs/per_iter."""
    rate = gpus * bs / per_iter
    ranks = list(range(gpus)) if prefix else [None]

    def line(rank: int | None, seconds: float, body: str) -> str:
        pre = f"[1,{rank}]<stderr>:" if rank is not None else ""
        head = f"{mx_stamp(seconds)}:INFO: " if stamps else "INFO:root:"
        return f"{pre}{head}{body}\n"

    out: list[str] = []
    if args:
        for r in reversed(ranks):
            arguments = mx_args(gpus, bs, iters if bench_arg else None, epochs, disp)
            out.append(line(r, t0, "Start with arguments " + arguments))
    out.append("[1,0]<stdout>:NCCL version 2.4.7+cuda10.1\n")
    for e in range(epochs):
        for r in ranks:
            out.append(line(r, t0 + 1 + e * iters * per_iter, f"Starting epoch {e}"))
        for k, end in enumerate(range(disp - 1, iters, disp)):
            order = ranks[k % len(ranks) :] + ranks[: k % len(ranks)]
            for r in order:
                seconds = t0 + 1 + (e * iters + end + 1) * per_iter + 0.001 * (r or 0)
                speed = rate * (3 if lie and r == 1 else 1)
                extra = f"\tcross-entropy={loss}" if loss is not None and e == 1 and end == disp * 3 - 1 else ""
                out.append(
                    line(
                        r,
                        seconds,
                        f"Epoch[{e}] Batch [{end - disp + 1}-{end}]\tSpeed: {speed!r} samples/sec"
                        f"{extra}\tLR: 0.0033916\t",
                    )
                )
    if finished:
        for r in ranks:
            took = epochs * iters * per_iter
            out.append(line(r, t0 + 2 + took, f"Experiment took: {took + 1} sec"))
    return "".join(out)


def mx_table(rows: dict[int, float], bs: int) -> str:
    body = "".join(f"     {g}     |  {v:^8} |\n" for g, v in rows.items())
    return f"train.total_ips\n           |{bs:^11d}|\n------------------------\n{body}\n"


def mx_bench(bs: int = 128, table: bool = True, **kw: object) -> str:
    """benchmark.py -n 1,8: a 1-GPU run, an 8-GPU run, then the total_ips table."""
    text = mx_run(1, bs, **kw) + mx_run(8, bs, t0=1000.0, **kw)  # type: ignore[arg-type]
    return text + (mx_table({1: 500.5, 8: 4000.25}, bs) if table else "")


# ==================================================================================== TF2 official ResNet
TF_T0 = datetime(2021, 1, 15, 10, 12, 0)
TID = 140234567890112


def tf_full(seconds: float) -> str:
    return (TF_T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%d %H:%M:%S.%f")


def absl(seconds: float, where: str, msg: str, level: str = "I") -> str:
    return f"{level}{(TF_T0 + timedelta(seconds=seconds)).strftime('%m%d %H:%M:%S.%f')} {TID} {where}] {msg}\n"


def tf_startup(gpus: int, workers: int = 1) -> str:
    lib = "I tensorflow/stream_executor/platform/default/dso_loader.cc:48] Successfully opened dynamic library"
    out = [f"{tf_full(0.5)}: {lib} libcudart.so.10.1\n", f"{tf_full(2.1)}: {lib} libcuda.so.1\n"]
    for g in range(gpus):
        out.append(
            f"{tf_full(2.4)}: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1716] Found device {g} with properties: \n"
            f"pciBusID: 0000:{0x1A + g:02x}:00.0 name: Tesla V100-SXM2-16GB computeCapability: 7.0\n"
            "coreClock: 1.53GHz coreCount: 80 deviceMemorySize: 15.78GiB deviceMemoryBandwidth: 836.37GiB/s\n"
        )
    out.append(
        f"{tf_full(3.0)}: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1858] Adding visible gpu devices: "
        + ", ".join(map(str, range(gpus)))
        + "\n"
    )
    out.append(
        f"{tf_full(3.1)}: W tensorflow/core/platform/profile_utils/cpu_utils.cc:104] CPU Frequency: 2499995000 Hz\n"
    )
    for g in range(gpus):
        out.append(
            f"{tf_full(4.0)}: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1402] Created TensorFlow device "
            f"(/job:localhost/replica:0/task:0/device:GPU:{g} with 14951 MB memory) -> physical GPU (device: {g}, "
            f"name: Tesla V100-SXM2-16GB, pci bus id: 0000:{0x1A + g:02x}:00.0, compute capability: 7.0)\n"
        )
    if workers > 1:
        local = ", ".join(f"'/job:worker/task:0/device:GPU:{g}'" for g in range(gpus))
        spec = "{'worker': [" + ", ".join(f"'10.0.0.{w + 1}:12345'" for w in range(workers)) + "]}"
        msg = (
            f"MultiWorkerMirroredStrategy with cluster_spec = {spec}, task_type = 'worker', task_id = 0, "
            f"num_workers = {workers}, local_devices = ({local}), communication = CollectiveCommunication.NCCL"
        )
        out.append(f"INFO:tensorflow:{msg}\n" + absl(4.2, "collective_all_reduce_strategy.py:315", msg))
    elif gpus > 1:
        devs = ", ".join(f"'/job:localhost/replica:0/task:0/device:GPU:{g}'" for g in range(gpus))
        msg = f"Using MirroredStrategy with devices ({devs})"
        out.append(f"INFO:tensorflow:{msg}\n" + absl(4.2, "mirrored_strategy.py:341", msg))
    out.append(absl(4.3, "dataset_factory.py:176", "Using augmentation: autoaugment=None"))
    out.append(
        "W0115 10:12:05.000000 140234567890112 optimizer_factory.py:123] "
        "Warning: lr_schedule (piecewise_constant_with_warmup) is deprecated.\n"
    )
    return "".join(out)


def tf_log(
    *,
    steps: int = 600,
    epochs: int = 1,
    log_steps: int = 100,
    gpus: int = 2,
    bs: int = 128,
    step_time: float = 0.25,
    startup: float = 30.0,
    legacy: bool = False,
    finished: bool = True,
    workers: int = 1,
    prefix: str = "",
    loss_at: dict[int, str] | None = None,
) -> str:
    """A classifier_trainer.py log: ``epochs`` x ``steps`` steps at ``step_time`` s each (the first window
    also ``startup`` s more), a TimeHistory line (``legacy``: TF 2.1's BenchmarkMetric) every ``log_steps``."""
    total = workers * gpus * bs
    out = [tf_startup(gpus, workers)]
    t, last = 10.0, 0
    for e in range(epochs):
        out.append(f"Epoch {e + 1}/{epochs}\n")
        if e == 0:
            out.append(
                f"{tf_full(12)}: I tensorflow/stream_executor/platform/default/dso_loader.cc:48] "
                "Successfully opened dynamic library libcublas.so.10\n"
            )
        for step in range(e * steps + 1, (e + 1) * steps + 1):
            if step - last >= log_steps:
                secs = (step - last) * step_time + (startup if last == 0 else 0.0)
                t += secs
                rate = (step - last) * total / secs
                for lk, lv in (loss_at or {}).items():
                    if last < lk <= step:
                        out.append(
                            f"{prefix}I0115 10:30:00.000000 {TID} controller.py:479] train | step: {lk:6d} | "
                            f"steps/sec: 4.0 | output: {{'train_accuracy': 0.001, 'train_loss': {lv}}}\n"
                        )
                if legacy:
                    msg = (
                        f"BenchmarkMetric: {{'global step':{step}, 'time_taken': {secs:f},"
                        f"'examples_per_second': {rate:f}}}"
                    )
                else:
                    msg = f"TimeHistory: {secs:.2f} seconds, {rate:.2f} examples/second between steps {last} and {step}"
                out.append(prefix + absl(t, "keras_utils.py:145", msg))
                last = step
        out.append(
            f"{steps}/{steps} - {steps * step_time:.0f}s - loss: 6.9512 - accuracy: 0.0012 - top_5_accuracy: 0.0061\n"
        )
        if legacy:
            out.append(
                absl(t, "keras_utils.py:152", f"BenchmarkMetric: {{'epoch':{e}, 'time_taken': {steps * step_time:f}}}")
            )
    if finished:
        out.append(absl(t + 1, "classifier_trainer.py:455", "Run stats:"))
        out.append(
            "{'loss': 6.9512, 'training_accuracy_top_1': 0.0012, 'step_timestamp_log': ['BatchTimestamp<...>'], "
            "'train_finish_time': 1610705600.1}\n"
        )
    return "".join(out)


# ==================================================================================== MindSpore model_zoo
MS_WARN = "[WARNING] ME({pid}:1404050068{rank:02d}376,MainProcess):2021-01-19-14:50:{sec:02d}.575.226 [train.py:57] \n"
MS_ARGS = (
    "args_opt: Namespace(batch_size={batch}, data_sink_steps={sink}, dataset='imagenet2012', "
    "dataset_path='/workspace/resnet/data/ImageNet/train', device_num={device_num}, device_target='GPU', "
    "dtype='{dtype}', net='resnet50', parameter_server=False, pre_trained=None, run_distribute={dist}, "
    "train_steps={steps})\n"
)
MS_NCCL = (
    "node{node}:{pid}:{tid} [{dev}] NCCL INFO comm 0x7f5f1c0a{rank:04x} rank {rank} nranks {nranks} "
    "cudaDev {dev} busId {bus}000 - Init COMPLETE\n"
)
MS_NOISE = (
    "[WARNING] PRE_ACT({pid},python):2021-01-19-14:50:31.201.317 [mindspore/ccsrc/backend/session/"
    "gpu_session.cc:102] SelectKernel] The node [Cast] cannot find valid kernel, use fp32\n"
)
MS_TIME = "epoch time: {:5.3f} ms, per step time: {:5.3f} ms\n"
JITTER = (0.004, -0.003, 0.002, -0.001, 0.0, 0.001, -0.002, 0.003, -0.004, 0.0)  # sums to 0 over 10 epochs


def ms_epoch_ms(epoch: int, rank: int, ranks: int, per_step: float, sink: int) -> float:
    """Epoch 1 compiles the graph, 2-3 warm up, then steady with a jitter that sums to zero over 10 epochs;
    ranks differ by a few ms around the same mean."""
    base = sink * per_step
    if epoch == 1:
        t = 84213.517 + base
    elif epoch <= 3:
        t = base * (1.8 if epoch == 2 else 1.2)
    else:
        t = base * (1 + JITTER[epoch % 10])
    return t + (rank - (ranks - 1) / 2) * 0.037


def ms_log(
    *,
    nodes: int = 1,
    per_node: int = 1,
    batch: int = 128,
    rate: float = 369.81,
    steps: int = 200,
    sink: int = 10,
    logged: str = "all",  # "all" ranks or "rank0"
    prefix: bool = False,
    nccl: bool = False,
    args: bool = True,
    device_num: int | None = None,
    dtype: str = "fp32",
    stop_after_epoch: int | None = None,
    time_fmt: str = MS_TIME,
    seed: int = 0,
) -> str:
    """A MindSpore model_zoo ResNet log as DLPerf's scripts write it (mpirun ... | tee: all ranks' lines
    interleaved); steady per-step time = batch x devices / ``rate``."""
    rnd = random.Random(seed)
    gpus = nodes * per_node
    ranks = list(range(gpus)) if logged == "all" else [0]
    per_step = batch * gpus * 1000.0 / rate
    dist = gpus > 1

    def pfx(r: int, stream: str = "stdout") -> str:
        return f"[1,{r}]<{stream}>:" if prefix else ""

    out: list[str] = []
    for r in ranks:
        if args:
            out.append(pfx(r, "stderr") + MS_WARN.format(pid=27314 + r, rank=r, sec=8 + r % 50))
            out.append(
                pfx(r, "stderr")
                + MS_ARGS.format(
                    batch=batch,
                    sink=sink,
                    device_num=device_num or (per_node if dist else 1),
                    dtype=dtype,
                    dist=dist,
                    steps=steps,
                )
            )
    if nccl and dist:
        for r in ranks:
            out.append(
                pfx(r)
                + MS_NCCL.format(
                    node=r // 8 + 1,
                    pid=27314 + r,
                    tid=27401 + r,
                    dev=r % 8,
                    rank=r,
                    nranks=gpus,
                    bus=hex(0x1A + r % 8)[2:],
                )
            )
    out.append(pfx(ranks[0], "stderr") + MS_NOISE.format(pid=27314))
    epochs = steps // sink if stop_after_epoch is None else stop_after_epoch
    for e in range(1, epochs + 1):
        pending = {
            r: [
                f"epoch: {e} step: {sink}, loss is {6.95 - 0.013 * e + 0.001 * r:.6f}\n",
                time_fmt.format(
                    ms_epoch_ms(e, r, gpus, per_step, sink), ms_epoch_ms(e, r, gpus, per_step, sink) / sink
                ),
            ]
            for r in ranks
        }
        while pending:  # interleave the ranks, each rank's loss line before its time line
            r = rnd.choice(sorted(pending))
            out.append(pfx(r) + pending[r].pop(0))
            if not pending[r]:
                del pending[r]
    return "".join(out)


# ==================================================================================== OneFlow cnns
OF_SEED_LINES = """\
train: epoch 0, iter 20, loss: 6.505637, top_1: 0.000000, top_k: 0.000000, samples/s: 288.088
train: epoch 0, iter 40, loss: 5.736447, top_1: 0.020313, top_k: 0.117578, samples/s: 385.628
train: epoch 0, iter 60, loss: 4.274485, top_1: 0.817969, top_k: 0.991797, samples/s: 386.264
train: epoch 0, iter 80, loss: 2.331075, top_1: 1.000000, top_k: 1.000000, samples/s: 385.723
train: epoch 0, iter 100, loss: 1.236110, top_1: 1.000000, top_k: 1.000000, samples/s: 384.622
train: epoch 0, iter 120, loss: 1.078446, top_1: 1.000000, top_k: 1.000000, samples/s: 385.367
train: epoch 0, iter 140, loss: 1.054016, top_1: 1.000000, top_k: 1.000000, samples/s: 384.704
train: epoch 0, iter 160, loss: 1.048110, top_1: 1.000000, top_k: 1.000000, samples/s: 384.927
train: epoch 0, iter 180, loss: 1.050786, top_1: 1.000000, top_k: 1.000000, samples/s: 384.109
train: epoch 0, iter 200, loss: 1.047857, top_1: 1.000000, top_k: 1.000000, samples/s: 384.517
"""  # seeds/003, verbatim


# Two real lines of a timestamped 2n8g bs128 log (DLPerf OneFlow/.../extract_cnn_result.py docstring)
OF_TS20 = (
    "train: epoch 0, iter 20, loss: 7.087004, top_1: 0.000000, top_k: 0.000000, samples/s: 3988.891 1597933942.9863544"
)
OF_TS120 = (
    "train: epoch 0, iter 120, loss: 1.050499, top_1: 1.000000, top_k: 1.000000, samples/s: 5917.583 1597933977.6064055"
)


def of_header(
    nodes: int = 1,
    gpn: int = 1,
    batch: int = 128,
    every: int = 20,
    epochs: int = 1,
    iters: int = 200,
    banner: bool = True,
    per_epoch_line: bool = True,
    prefix: str = "",
) -> str:
    """print_args' block (config.py order) and of_cnn_train_val.py's start lines, as local_run.sh runs it."""
    examples = nodes * gpn * batch * iters
    args = {
        "dtype": "float32",
        "gpu_num_per_node": gpn,
        "num_nodes": nodes,
        "node_ips": "['10.11.0.2', '10.11.0.3', '10.11.0.4', '10.11.0.5']",
        "ctrl_port": 50051,
        "model": "resnet50",
        "use_fp16": None,
        "use_xla": None,
        "channel_last": None,
        "pad_output": None,
        "num_epochs": epochs,
        "model_load_dir": None,
        "batch_size_per_device": batch,
        "val_batch_size_per_device": 125,
        "nccl_fusion_threshold_mb": 0,
        "nccl_fusion_max_ops": 0,
        "fuse_bn_relu": False,
        "fuse_bn_add_relu": False,
        "gpu_image_decoder": False,
        "image_path": "test_img/tiger.jpg",
        "num_classes": 1000,
        "num_examples": examples,
        "num_val_examples": 50000,
        "rgb_mean": [123.68, 116.779, 103.939],
        "rgb_std": [58.393, 57.12, 57.375],
        "image_shape": [3, 224, 224],
        "label_smoothing": 0.1,
        "model_save_dir": "./output/snapshots/model_save-20200808153355",
        "log_dir": "./log",
        "loss_print_every_n_iter": every,
        "train_data_dir": "/path/to/ofrecord/train",
        "train_data_part_num": 44,
        "val_data_dir": None,
        "model_update": "momentum",
        "learning_rate": 0.001,
    }
    out = []
    if banner:
        out += ["=" * 66, f"Running resnet50: num_gpu_per_node = {gpn}, num_nodes = {nodes}.", "=" * 66]
    out += [f"{k} = {v}" for k, v in args.items()]
    out += ["-" * 66, "Time stamp: 2020-08-08-15:33:55", "Start time: 2020-08-08-15:33:55", "Init model on demand."]
    if per_epoch_line:
        out.append(f" {iters} iter per epoch...")
    out.append("Loading data from /path/to/ofrecord/train")
    return "".join(prefix + ln + "\n" for ln in out)


def of_train(epoch: int, it: int, rate: float, loss: float = 1.05, stamp: float | None = None) -> str:
    line = f"train: epoch {epoch}, iter {it}, loss: {loss:.6f}, top_1: 1.000000, top_k: 1.000000, samples/s: {rate:.3f}"
    return line + (f" {stamp!r}" if stamp is not None else "") + "\n"


OF_END = (
    "Saving model to ./output/snapshots/model_save-20200808153355/snapshot_epoch_0.\n"
    "End time: 2020-08-08-15:35:12\nTotal time: 77.04131889343262s\n"
)


def of_log(
    rates: list[float],
    *,
    every: int = 20,
    stamps: list[float] | None = None,
    end: bool = True,
    epochs: int = 1,
    **header: object,
) -> str:
    """A OneFlow cnns log: header, one train line per ``every`` iterations, end lines."""
    per_epoch = len(rates) * every // epochs
    out = [of_header(every=every, epochs=epochs, iters=per_epoch, **header)]  # type: ignore[arg-type]
    for k, rate in enumerate(rates):
        done = (k + 1) * every
        out.append(
            of_train((done - 1) // per_epoch, (done - 1) % per_epoch + 1, rate, stamp=stamps[k] if stamps else None)
        )
    return "".join(out) + (OF_END if end else "")


def ts_rates_2n8g() -> tuple[list[float], list[float]]:
    """Rates and timestamps of a 2n8g bs128 run through the two real lines (iterations 20 and 120)."""
    t20, t120 = 1597933942.9863544, 1597933977.6064055
    dt = (t120 - t20) / 5
    wobble = (0.003, -0.002, 0.001, -0.002, 0.0)  # sums to 0: iteration 120 lands on the real timestamp
    stamps, t = [t20], t20
    for k in range(9):
        t += dt * (1 + wobble[k % 5])
        stamps.append(t120 if k == 4 else t)
    rates = [3988.891] + [2048 * 20 / (stamps[k + 1] - stamps[k]) for k in range(9)]
    rates[5] = 5917.583
    return rates, stamps


def of_ts_log(**kw: object) -> str:
    """A timestamped 2n8g bs128 log holding the two real lines verbatim."""
    rates, stamps = ts_rates_2n8g()
    text = of_log(rates, stamps=stamps, nodes=2, gpn=8, **kw)  # type: ignore[arg-type]
    text = re.sub(r"(?m)^train: epoch 0, iter 20, .*$", OF_TS20, text)
    return re.sub(r"(?m)^train: epoch 0, iter 120, .*$", OF_TS120, text)


# ==================================================================================== PaddleClas, PaddleCV
CLAS_T0 = datetime(2020, 12, 16, 18, 0, 0)
BANNER = (
    "===========================================================\n"
    "==        PaddleClas is powered by PaddlePaddle !        ==\n"
    "===========================================================\n"
)


def clas_log(
    times: list[float],
    *,
    batch: int = 128,
    gpus: int = 1,
    print_interval: int = 1,
    epochs: int = 1,
    end: bool = True,
    gpu_lines: str | None = None,
    config: bool = True,
    loss: str = "7.0000",
    prefix: str = "",
    start: float = 0.0,
) -> str:
    """A PaddleClas static log whose step k of every epoch takes ``times[k]`` seconds, printed as the real
    program does: running average of the step times since the epoch start, reset at step 5."""
    clock = start
    out: list[str] = []

    def stamp() -> str:
        return (CLAS_T0 + timedelta(seconds=int(clock))).strftime("%Y-%m-%d %H:%M:%S")

    if gpu_lines is None:
        gpu_lines = "" if gpus == 1 else f"worker_key:_worker, size: {{'_worker': {gpus}}}\n"
    if config:
        out.append(f"{prefix}{stamp()} INFO: \n" + "".join(f"{prefix}{x}\n" for x in BANNER.splitlines()))
        for key, value in (
            ("TRAIN", ""),
            ("    batch_size", batch * gpus),
            ("    num_workers", 4),
            ("VALID", ""),
            ("    batch_size", 64),
            ("epochs", epochs),
            ("is_distributed", gpus > 1),
            ("print_interval", print_interval),
            ("total_images", len(times) * batch * gpus),
        ):
            out.append(f"{prefix}{stamp()} INFO: {key} : {value}\n")
    out.append(gpu_lines)
    for e in range(epochs):
        total, count = 0.0, 0
        for k, dt in enumerate(times):
            clock += dt
            if k == 5:
                total, count = 0.0, 0
            total, count = total + dt, count + 1
            avg = total / count
            if k % print_interval == 0:
                out.append(
                    f"{prefix}{stamp()} INFO: epoch:{e:<3d} train step:{k:<4d} loss: {loss} top1: 0.0000 "
                    f"top5: 0.0000 lr: 0.100000 elapse: {avg:.3f}s ips: {batch / avg:.5f} images/sec.\n"
                )
        if end:
            out.append(
                f"{prefix}{stamp()} INFO: END epoch:{e:<3d} train loss:  6.9 top1: 0.0 top5: 0.0  "
                f"elapse_sum: {total:.3f}s ips: {batch / (total / count):.5f} images/sec.\n"
            )
    return "".join(out)


def steady(n: int = 200, dt: float = 0.1, slow: dict[int, float] | None = None) -> list[float]:
    """Step times: a slow start (steps 0-4), ``dt`` afterwards, ``slow`` overrides."""
    times = [1.0, 0.5, 0.3, 0.2, 0.15] + [dt] * (n - 5)
    for k, v in (slow or {}).items():
        times[k] = v
    return times


def cv_log(
    n: int,
    *,
    batch: int | None = 256,
    elapse: float = 0.5,
    step: int = 1,
    extra: str = "",
    stamps: bool = False,
    passes: int = 1,
) -> str:
    out = ["-----------  Configuration Arguments -----------\n"]
    if batch is not None:
        out.append(f"batch_size: {batch}\n")
    out.append("model: ResNet50\n------------------------------------------------\n" + extra)
    clock = 0.0
    for p in range(passes):
        for b in range(n):
            clock += elapse
            if b % step == 0:
                t = (CLAS_T0 + timedelta(seconds=clock)).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3] + " " if stamps else ""
                out.append(
                    f"{t}[Pass {p}, train batch {b}] \tloss 6.90000, acc1 0.00000, acc5 0.00000, "
                    f"lr 0.10000, elapse {elapse:.4f} sec\n"
                )
    return "".join(out)


# ==================================================================================== PLSC arcface
A0 = datetime(2021, 9, 28, 11, 6, 33, 524000)


def arc_stamp(seconds: float) -> str:
    return (A0 + timedelta(seconds=seconds)).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]


def arc_log(
    lines: int,
    *,
    interval: int = 100,
    world: int = 8,
    batch: int = 128,
    step_time: float = 0.1,
    pauses: dict[int, tuple[str, float]] | None = None,
    form: str = "throughput",
    header: bool = True,
    total_steps: int | None = None,
    startup: float = 60.0,
    prefix: str = "",
    loss: str = "37.6789",
) -> str:
    """An arcface_paddle log: a line every ``interval`` steps of ``step_time`` s; ``pauses[step]`` =
    (kind, seconds) adds validation or a checkpoint save after that step's line."""
    total = world * batch
    clock, out = 0.0, []

    def put(message: str) -> None:
        out.append(f"{prefix}Training: {arc_stamp(clock)} - {message}\n")

    if header:
        put("rank: 0")
        put("--------args----------")
        put(f"batch_size: {batch}")
        put(f"log_interval_step: {interval}")
        put("------------------------")
        put(f"world_size: {world}")
        put(f"total_batch_size: {total}")
        put(f"total_steps: {total_steps or lines * interval}")
    last = clock
    clock += startup
    for i in range(1, lines + 1):
        step = i * interval
        clock += interval * step_time
        rate = total * interval / (clock - last)
        last = clock
        head = f"loss {loss}, lr: 0.200000, epoch: 0, step: {step}, eta: 4.72 hours, "
        if form == "throughput":
            put(head + f"throughput: {rate:.2f} imgs/sec")
        else:
            samples = batch if form == "ips_per_card" else total
            put(
                head + f"avg_reader_cost: 0.00100 sec, avg_batch_cost: {step_time:.5f} sec, "
                f"avg_samples: {samples:.5f}, ips: {rate * samples / total:.5f} images/sec"
            )
        kind, seconds = (pauses or {}).get(step, ("", 0.0))
        if kind == "validation":
            clock += seconds
            put(f"[lfw][{step}]XNorm: 4.269427")
            put(f"[lfw][{step}]Accuracy-Flip: 0.97933+-0.00554")
            put(f"test time: {seconds:.4f}")
        elif kind == "save":
            clock += seconds
            put(f"Save model to MS1M_v3_arcface_static_0.1/FresResNet50/{step}.")
    return "".join(out)


def mllog_log(
    spans: int = 6,
    kind: str = "epoch",
    samples: int = 1000,
    seconds: float = 2.0,
    status: str = "success",
    prefix: str = "",
    noise: bool = True,
) -> str:
    """An MLPerf MLLOG run: run_start, train_samples, global_batch_size, ``spans`` epochs (or blocks of 2 epochs)
    of ``seconds`` each with a throughput event after each epoch, an evaluation between spans, run_stop."""
    out: list[str] = []
    t = 1_600_000_000_000

    def event(key: str, value: object = None, **metadata: object) -> None:
        body = {"namespace": "", "time_ms": t, "event_type": "POINT_IN_TIME", "key": key, "value": value}
        out.append(f"{prefix}:::MLLOG {json.dumps({**body, 'metadata': metadata})}\n")

    event("submission_org", "dlperf")
    event("global_batch_size", 256)
    event("opt_name", "lars")
    event("run_start")
    event("train_samples", samples)
    epochs = 1 if kind == "epoch" else 2
    for i in range(spans):
        number = 1 + i * epochs
        if kind == "epoch":
            event("epoch_start", epoch_num=number)
        else:
            event("block_start", first_epoch_num=number, epoch_count=epochs)
        t += int(seconds * 1000)
        if kind == "epoch":
            event("epoch_stop", epoch_num=number)
            event("throughput", samples / seconds)
        else:
            event("block_stop", first_epoch_num=number)
        if noise:
            out.append("+ echo 'evaluation'\n")
        t += 300  # evaluation: not training time
        event("eval_accuracy", 0.5, epoch_num=number + epochs - 1)
    event("run_stop", status=status)
    return "".join(out)
