"""dlperf's thin stand-in for OneFlow-Benchmark's ``Classification/cnns/of_cnn_train_val.py`` on CPU.

OneFlow-Benchmark is not on PyPI and github.com is not reachable where dlperf's CPU images are built, so this
driver accepts the flags the seed's command passes (``--num_examples``, ``--num_nodes``, ``--gpu_num_per_node``,
``--batch_size_per_device``, ``--loss_print_every_n_iter``, ...) and trains flowvision 0.2.1's ResNet-50
(v1.5: the stride is on the bottleneck's 3x3 conv) with OneFlow 0.9.0 in eager mode on CPU, one process per
"GPU" started by ``python3 -m oneflow.distributed.launch`` on every node, gradients all-reduced by
``oneflow.nn.parallel.DistributedDataParallel``. The data are synthetic: one random batch per process, made
by OneFlow in the container (OneFlow-Benchmark's synthetic mode also feeds one constant batch).

THE LOG LINES ARE PRINTED BY THIS DRIVER, imitating OneFlow-Benchmark's ``config.print_args`` (the
``Running ...`` banner and ``name = value`` lines) and its ``Metric`` callback (``train: epoch E, iter I,
loss: ..., top_1: ..., top_k: ..., samples/s: R <unix time>``). Only rank 0 prints them. ``samples/s`` is
GLOBAL: (world size x batch per process x iterations since the previous print) / wall seconds since the
previous print on rank 0 (the first interval starts right before the first iteration, so it holds
start-up, as OneFlow-Benchmark's does). ``loss`` is the last iteration's loss averaged over the ranks;
top_1/top_k are the accuracies over the interval's samples of every rank.

CPU extras (not in OneFlow-Benchmark): --image_size, --num_classes, --width_per_group (flowvision's
``width_per_group``: the bottlenecks' 3x3 width is planes x width_per_group / 64), --momentum,
--weight_decay, --seed, --num_threads.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from datetime import datetime


def str2bool(value):
    if isinstance(value, bool):
        return value
    if value.lower() in ("yes", "true", "t", "y", "1"):
        return True
    if value.lower() in ("no", "false", "f", "n", "0"):
        return False
    raise argparse.ArgumentTypeError(f"boolean value expected, got {value!r}")


def get_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="dlperf CPU stand-in for OneFlow-Benchmark cnns of_cnn_train_val.py")
    # OneFlow-Benchmark's flags, as the seed passes them
    p.add_argument("--model", default="resnet50", choices=["resnet50"])
    p.add_argument("--num_nodes", type=int, default=1)
    p.add_argument("--gpu_num_per_node", type=int, default=1, help="processes per node on CPU")
    p.add_argument("--node_ips", default="127.0.0.1", help="comma-separated; node 0 is the rendezvous master")
    p.add_argument("--num_examples", type=int, default=None, help="examples per epoch (default: 100 iterations)")
    p.add_argument("--num_epoch", "--num_epochs", dest="num_epochs", type=int, default=1)
    p.add_argument("--batch_size_per_device", type=int, default=32)
    p.add_argument("--val_batch_size_per_device", type=int, default=8, help="accepted; no validation is run")
    p.add_argument("--loss_print_every_n_iter", type=int, default=20)
    p.add_argument("--model_update", default="momentum", choices=["momentum", "sgd"])
    p.add_argument("--learning_rate", "--lr", dest="learning_rate", type=float, default=0.001)
    p.add_argument("--log_dir", default="./output")
    p.add_argument("--use_fp16", type=str2bool, nargs="?", const=True, default=False)
    p.add_argument("--train_data_dir", default=None, help="real OFRecord data: not supported here")
    p.add_argument("--train_data_part_num", type=int, default=1)
    p.add_argument("--val_data_dir", default=None)
    p.add_argument("--val_data_part_num", type=int, default=1)
    # CPU extras
    p.add_argument("--image_size", type=int, default=224)
    p.add_argument("--num_classes", type=int, default=1000)
    p.add_argument("--width_per_group", type=int, default=64)
    p.add_argument("--momentum", type=float, default=0.875)
    p.add_argument("--weight_decay", type=float, default=1.0 / 32768)
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--num_threads", type=int, default=None, help="CPU threads (default: OMP_NUM_THREADS)")
    return p


def print_args(args: argparse.Namespace) -> None:
    """The argument block of OneFlow-Benchmark's config.print_args (printed here by dlperf's driver)."""
    print("=".ljust(66, "="))
    print(f"Running {args.model}: num_gpu_per_node = {args.gpu_num_per_node}, num_nodes = {args.num_nodes}.")
    print("=".ljust(66, "="))
    for name in vars(args):
        print(f"{name} = {getattr(args, name)}")
    print("-".ljust(66, "-"))
    print(f"Time stamp: {datetime.now().strftime('%Y-%m-%d-%H:%M:%S')}")


def main() -> int:
    args = get_parser().parse_args()
    if args.train_data_dir or args.val_data_dir:
        print(
            "of_cnn_train_val.py (dlperf CPU driver): real OFRecord data is not supported; omit "
            "--train_data_dir/--val_data_dir to train on synthetic data",
            file=sys.stderr,
        )
        return 2
    if args.use_fp16:
        print("of_cnn_train_val.py (dlperf CPU driver): --use_fp16 (AMP) is not supported on CPU", file=sys.stderr)
        return 2
    if args.num_threads:
        os.environ["OMP_NUM_THREADS"] = str(args.num_threads)

    import oneflow as flow
    import oneflow.nn as nn
    from flowvision.models import resnet50

    threads = args.num_threads or int(os.environ.get("OMP_NUM_THREADS") or 0)
    if threads > 0:
        flow.set_num_threads(threads)  # OneFlow's CPU intra-op threads (before any eager work)
    world = flow.env.get_world_size()
    rank = flow.env.get_rank()
    expected = args.num_nodes * args.gpu_num_per_node
    if world != expected:
        print(
            f"of_cnn_train_val.py (dlperf CPU driver): world size {world} != num_nodes x gpu_num_per_node "
            f"= {expected}; start it with python3 -m oneflow.distributed.launch",
            file=sys.stderr,
        )
        return 2
    global_batch = world * args.batch_size_per_device
    num_examples = args.num_examples or 100 * global_batch
    epoch_size = math.ceil(num_examples / global_batch)
    every = max(1, args.loss_print_every_n_iter)

    if rank == 0:
        print_args(args)
        print(f"oneflow {flow.__version__} (dlperf CPU driver, eager, {world} process(es), device cpu)")
        print(f" {epoch_size} iter per epoch...", flush=True)

    flow.manual_seed(args.seed + rank)
    device = flow.device("cpu")
    model = resnet50(num_classes=args.num_classes, width_per_group=args.width_per_group).to(device)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    momentum = args.momentum if args.model_update == "momentum" else 0.0
    optimizer = flow.optim.SGD(
        model.parameters(), lr=args.learning_rate, momentum=momentum, weight_decay=args.weight_decay
    )
    criterion = nn.CrossEntropyLoss().to(device)
    images = flow.randn(args.batch_size_per_device, 3, args.image_size, args.image_size, device=device)
    labels = flow.randint(0, args.num_classes, (args.batch_size_per_device,), device=device)
    k = min(5, args.num_classes)
    model.train()

    stamp = time.time()
    correct_1 = correct_k = seen = 0
    for epoch in range(args.num_epochs):
        for step in range(epoch_size):
            logits = model(images)
            loss = criterion(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            top = logits.topk(k, dim=1)[1]
            hits = top.eq(labels.unsqueeze(1))
            correct_1 += int(hits[:, 0].sum().item())
            correct_k += int(hits.sum().item())
            seen += args.batch_size_per_device
            if (step + 1) % every == 0:
                totals = flow.tensor(
                    [float(loss.item()), float(correct_1), float(correct_k), float(seen)],
                    dtype=flow.float64,
                    device=device,
                )
                if world > 1:
                    flow.comm.all_reduce(totals)
                now = time.time()
                loss_mean, c1, ck, n = totals.tolist()
                if rank == 0:
                    print(
                        f"train: epoch {epoch}, iter {step + 1}, loss: {loss_mean / world:.6f}, "
                        f"top_1: {c1 / n:.6f}, top_k: {ck / n:.6f}, samples/s: {n / (now - stamp):.3f}",
                        now,
                        flush=True,
                    )
                stamp = now
                correct_1 = correct_k = seen = 0
    if rank == 0:
        print(f"End time: {datetime.now().strftime('%Y-%m-%d-%H:%M:%S')}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
