"""dlperf's thin MindSpore ResNet-50 v1.5 driver for CPU (seed 000's train.py flags, synthetic data).

Takes the flags the seed's patched model_zoo ``train.py`` takes (``--net --dataset --device_target --dataset_path
--batch_size --train_steps --data_sink_steps --dtype --run_distribute``) plus a few CPU extras (``--image_size
--num_classes --base_width --lr --seed``), builds MindCV's ``resnet50`` (v1.5: the stride on the 3x3 conv) and
trains it with MindSpore's own ``Model.train`` and its ``TimeMonitor`` / ``LossMonitor`` callbacks, so the
``Train epoch time: ... ms, per step time: ... ms`` and ``epoch: N step: N, loss is X`` lines are MindSpore's.
This file prints only the ``args_opt: Namespace(...)`` line (through MindSpore's logger, as the seed's patch
does). MindSpore runs CPU training without dataset sink (``Model.train`` says so and falls back), so one
"sink" of ``data_sink_steps`` steps is one pass over a synthetic dataset of ``data_sink_steps`` batches:
``train_steps / data_sink_steps`` epochs, one TimeMonitor line each, as the GPU run prints.

Distributed (``--run_distribute=True``, one process per "GPU" under mpirun): MindSpore 2.x does not build its
CPU collectives (MCCL) from Open MPI; it needs its dynamic cluster, i.e. ``MS_ROLE``/``MS_WORKER_NUM``/
``MS_NODE_ID``/``MS_SCHED_HOST``/``MS_SCHED_PORT`` (+ ``MS_WORKER_IP``) and one scheduler process. This driver maps Open MPI's
``OMPI_COMM_WORLD_RANK``/``OMPI_COMM_WORLD_SIZE`` to them and starts the scheduler (``MS_ROLE=MS_SCHED``) as a
child of rank 0, which waits for it at exit. ``MS_SCHED_HOST``/``MS_SCHED_PORT`` come from the launch
(node 0's address, resolved here to an IP address, and the case's port); without them, 127.0.0.1:8118.
"""

import argparse
import atexit
import os
import socket
import subprocess
import sys


def bool_flag(text):
    if text in ("True", "true", "1"):
        return True
    if text in ("False", "false", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected True or False, got {text!r}")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="MindSpore ResNet-50 v1.5 on synthetic data (dlperf CPU driver)")
    # The seed's (model_zoo train.py + the seed's patch) flags.
    p.add_argument("--net", type=str, default="resnet50", choices=["resnet50"])
    p.add_argument("--dataset", type=str, default="imagenet2012", choices=["imagenet2012"])
    p.add_argument("--run_distribute", type=bool_flag, default=False)
    p.add_argument("--device_target", type=str, default="CPU", choices=["CPU", "GPU", "Ascend"])
    p.add_argument("--dataset_path", type=str, default=None, help="ignored: the data is synthetic")
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--train_steps", type=int, default=-1, help="-1: one epoch of data_sink_steps steps")
    p.add_argument("--data_sink_steps", type=int, default=1)
    p.add_argument("--dtype", type=str, default="fp32", choices=["fp32", "fp16"])
    # CPU extras (a suite's extra_args): a smaller problem, the learning rate (a huge one makes NaN).
    p.add_argument("--image_size", type=int, default=224)
    p.add_argument("--num_classes", type=int, default=1000)
    p.add_argument("--base_width", type=int, default=64, help="MindCV ResNet base_width (bottleneck width)")
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    if args.batch_size < 1 or args.data_sink_steps < 1 or args.image_size < 32 or args.num_classes < 2:
        p.error("batch_size and data_sink_steps must be >= 1, image_size >= 32, num_classes >= 2")
    return args


def start_dynamic_cluster():
    """Open MPI rank/size -> MindSpore dynamic-cluster variables; rank 0 starts the scheduler process."""
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    # MindSpore's TCP layer takes an IP address only ("Parse ip failed" for a host name such as node0)
    os.environ["MS_SCHED_HOST"] = socket.gethostbyname(os.environ.get("MS_SCHED_HOST", "127.0.0.1"))
    os.environ.setdefault("MS_SCHED_PORT", "8118")
    os.environ["MS_WORKER_NUM"] = str(size)
    if "MS_WORKER_IP" not in os.environ:  # this node's address on the route to the scheduler
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((os.environ["MS_SCHED_HOST"], int(os.environ["MS_SCHED_PORT"])))
            os.environ["MS_WORKER_IP"] = probe.getsockname()[0]
    if rank == 0:
        env = dict(os.environ, MS_ROLE="MS_SCHED")
        code = "import mindspore as ms; ms.set_device('CPU'); from mindspore.communication import init; init()"
        scheduler = subprocess.Popen([sys.executable, "-c", code], env=env)

        def wait_for_scheduler():  # registered before mindspore's own exit handlers, so it runs after them
            try:
                scheduler.wait(timeout=120)
            except subprocess.TimeoutExpired:
                scheduler.kill()

        atexit.register(wait_for_scheduler)
    os.environ["MS_ROLE"] = "MS_WORKER"
    os.environ["MS_NODE_ID"] = str(rank)
    return rank, size


class SyntheticImages:
    """Random images and labels made here, ``length`` samples over a pool of ``pool`` distinct ones."""

    def __init__(self, length, pool, image_size, num_classes, seed):
        import numpy as np

        rng = np.random.default_rng(seed)
        self.length = length
        self.images = rng.standard_normal((pool, 3, image_size, image_size), dtype=np.float32)
        self.labels = rng.integers(0, num_classes, size=(pool,), dtype=np.int32)

    def __getitem__(self, index):
        k = index % len(self.labels)
        return self.images[k], self.labels[k]

    def __len__(self):
        return self.length


def main():
    args = parse_args()
    rank, size = start_dynamic_cluster() if args.run_distribute else (0, 1)

    import mindspore as ms
    import mindspore.dataset as ds
    from mindcv.models import resnet50
    from mindspore import log as logger
    from mindspore import nn
    from mindspore.communication import get_group_size, get_rank, init
    from mindspore.train import LossMonitor, Model, TimeMonitor
    from mindspore.train.loss_scale_manager import FixedLossScaleManager

    logger.warning(f"\nargs_opt: {args}")
    ms.set_seed(args.seed)
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU" if args.device_target == "GPU" else args.device_target)
    threads = os.environ.get("OMP_NUM_THREADS")
    if threads and threads.isdigit() and int(threads) > 0:
        ms.device_context.cpu.op_tuning.threads_num(int(threads))
        ds.config.set_num_parallel_workers(int(threads))
    if args.run_distribute:
        init()
        rank, size = get_rank(), get_group_size()
        # all_reduce_fusion_config: the seed's model_zoo train.py sets [85, 160] for ResNet-50 (three fused
        # all-reduces per step instead of one per parameter; across containers each costs a round trip)
        ms.set_auto_parallel_context(
            device_num=size,
            parallel_mode=ms.ParallelMode.DATA_PARALLEL,
            gradients_mean=True,
            all_reduce_fusion_config=[85, 160],
        )

    steps = args.data_sink_steps  # one "sink" = one epoch of the synthetic dataset
    epochs = max(1, args.train_steps // steps) if args.train_steps > 0 else 1
    source = SyntheticImages(
        length=args.batch_size * steps * size,
        pool=min(args.batch_size, 64),
        image_size=args.image_size,
        num_classes=args.num_classes,
        seed=args.seed,
    )
    data = ds.GeneratorDataset(
        source, ["image", "label"], shuffle=False, num_shards=size, shard_id=rank, python_multiprocessing=False
    )
    data = data.batch(args.batch_size, drop_remainder=True)

    net = resnet50(num_classes=args.num_classes, base_width=args.base_width)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    # fp16: O2 mixed precision as the seed's patch; MindSpore on CPU takes no dynamic loss scale (the seed's
    # DynamicLossScaleManager), only a fixed one that never drops updates: model_zoo's own 1024.
    scale = FixedLossScaleManager(1024, drop_overflow_update=False) if args.dtype == "fp16" else None
    opt = nn.Momentum(
        net.trainable_params(),
        learning_rate=args.lr,
        momentum=0.875,
        weight_decay=1e-4,
        loss_scale=1024 if scale else 1.0,
    )
    model = Model(
        net,
        loss_fn=loss,
        optimizer=opt,
        loss_scale_manager=scale,
        amp_level="O2" if args.dtype == "fp16" else "O0",
        keep_batchnorm_fp32=False,
    )
    callbacks = [TimeMonitor(data_size=steps), LossMonitor(per_print_times=steps)]
    model.train(epochs, data, callbacks=callbacks, sink_size=steps, dataset_sink_mode=True)


if __name__ == "__main__":
    main()
