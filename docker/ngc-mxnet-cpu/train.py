#!/usr/bin/env python
"""dlperf's thin CPU stand-in for DeepLearningExamples' MxNet/Classification/RN50v1.5 ``train.py``.

DLE's code is not on PyPI and needs DALI + Horovod on GPUs; this driver keeps DLE's command-line flags (the
ones dlperf's NGC MXNet adapter passes) and trains ResNet-50 v1.5 with the CPU build of MXNet 1.9.1:

* model: GluonCV 0.10.5.post0 ``resnet50_v1b`` (v1.5: stride on the 3x3 conv; ``--arch resnetv1``: GluonCV's
  ``resnet50_v1``), exported to a symbol + ``SoftmaxOutput``;
* training loop and throughput lines: MXNet's own ``mx.mod.Module.fit`` with the ``mx.callback.Speedometer``
  batch-end callback, which prints ``Epoch[e] Batch [a-b]\\tSpeed: N samples/sec\\tcross-entropy=L``;
* data: one random batch made in the process and served ``--benchmark-iters`` times per epoch (what DLE's
  ``--data-backend synthetic`` does);
* distribution: MXNet's ps-lite kvstore ``dist_sync`` (DLE: Horovod), one worker per process, started by
  ``mpi-dmlc.sh`` under mpirun.

Lines this driver prints itself: ``Start with arguments Namespace(...)`` (as DLE's ``fit.py`` does) and
``dlperf: ...`` status lines. ``--batch-size`` is the JOB's total batch as in DLE (each of the kvstore's
workers trains ``batch_size / num_workers``), so Speedometer, given the total batch, prints the job's
samples/sec on every rank (dist_sync workers step in lockstep), which is what the ``ngc_mxnet`` parser reads.
The loss is MXNet's ``CrossEntropy`` metric of the softmax output (always on; ``--no-metrics`` drops the
accuracy metric only), so a diverged run prints ``cross-entropy=nan``.
"""

import argparse
import logging
import os
import sys
import time


def int_list(text):
    """``0,1`` -> [0, 1]; ``3,64,64`` -> [3, 64, 64]; empty -> []."""
    return [int(x) for x in text.split(",") if x.strip()]


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog="train.py", description="ResNet on MXNet's CPU build: Module.fit + Speedometer, synthetic data"
    )
    p.add_argument("--arch", default="resnetv15", choices=["resnetv1", "resnetv15"])
    p.add_argument("--num-layers", type=int, default=50, choices=[18, 34, 50, 101, 152])
    p.add_argument("--mode", default="train", choices=["train"], help="only training (DLE: also val, pred)")
    p.add_argument(
        "--kv-store",
        default="dist_sync",
        choices=["dist_sync", "local", "device"],
        help="dist_sync: MXNet's parameter server, one worker per process (DLE: horovod)",
    )
    p.add_argument("--gpus", type=int_list, default=[], help="must stay empty: this is MXNet's CPU build")
    p.add_argument("--batch-size", type=int, default=192, help="the job's TOTAL batch (DLE's meaning)")
    p.add_argument("--dtype", default="float32", choices=["float32", "float16"])
    for name in ("input", "conv", "batchnorm", "pooling"):
        p.add_argument(f"--{name}-layout", default="NCHW", choices=["NCHW", "NHWC"])
    p.add_argument("--num-epochs", type=int, default=1)
    p.add_argument("--benchmark-iters", type=int, default=None, help="iterations per epoch")
    p.add_argument("--num-examples", type=int, default=32000, help="epoch size when --benchmark-iters is unset")
    p.add_argument("--disp-batches", type=int, default=20, help="Speedometer's frequency")
    p.add_argument("--no-metrics", action="store_true", help="no accuracy metric (the loss is always shown)")
    p.add_argument("--data-backend", default="synthetic", choices=["synthetic"])
    # CPU-sized extras (DLE's names where DLE has the option)
    p.add_argument("--image-shape", type=int_list, default=[3, 224, 224], help="C,H,W of the synthetic images")
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--mom", type=float, default=0.875)
    p.add_argument("--wd", type=float, default=3.0517578125e-05)
    p.add_argument("--seed", type=int, default=None)
    args = p.parse_args(argv)
    if args.gpus:
        p.error("--gpus: this image holds MXNet's CPU build (no CUDA); it trains on the CPU only")
    if args.dtype != "float32":
        p.error(f"--dtype {args.dtype}: the CPU image trains float32 only (MXNet's CPU build has no fast float16)")
    layouts = {args.input_layout, args.conv_layout, args.batchnorm_layout, args.pooling_layout}
    if layouts != {"NCHW"}:
        p.error("NHWC layouts are GPU-only here: the CPU image trains NCHW")
    if len(args.image_shape) != 3:
        p.error("--image-shape takes C,H,W")
    for name in ("batch_size", "num_epochs", "disp_batches", "num_classes"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s:%(levelname)s: %(message)s")
    logging.info("Start with arguments %s", args)

    import mxnet as mx
    import numpy as np
    from gluoncv.model_zoo import get_model

    if args.seed is not None:
        np.random.seed(args.seed)
        mx.random.seed(args.seed)
    kv = mx.kvstore.create(args.kv_store)
    if args.batch_size % kv.num_workers:
        raise ValueError(f"--batch-size {args.batch_size} is not a multiple of the {kv.num_workers} workers")
    batch = args.batch_size // kv.num_workers
    epoch_iters = args.benchmark_iters or args.num_examples // args.batch_size
    if epoch_iters < 1:
        raise ValueError("an epoch has no iteration (raise --benchmark-iters or --num-examples)")
    logging.info(
        "dlperf: kvstore %s worker %d of %d, %d samples per worker, %d iterations per epoch, OMP threads %s",
        kv.type,
        kv.rank,
        kv.num_workers,
        batch,
        epoch_iters,
        os.environ.get("OMP_NUM_THREADS", "default"),
    )

    model = f"resnet{args.num_layers}_{'v1b' if args.arch == 'resnetv15' else 'v1'}"
    net = get_model(model, classes=args.num_classes)
    symbol = mx.sym.SoftmaxOutput(net(mx.sym.var("data")), name="softmax")

    train = synthetic_iter(mx, args.num_classes, [batch] + args.image_shape, epoch_iters)
    metrics = [mx.metric.CrossEntropy()] + ([] if args.no_metrics else [mx.metric.Accuracy()])
    module = mx.mod.Module(symbol, context=[mx.cpu()], data_names=["data"], label_names=["softmax_label"])
    started = time.time()
    module.fit(
        train,
        num_epoch=args.num_epochs,
        kvstore=kv,
        optimizer="sgd",
        optimizer_params={"learning_rate": args.lr, "momentum": args.mom, "wd": args.wd},
        initializer=mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2),
        eval_metric=metrics,
        batch_end_callback=mx.callback.Speedometer(args.batch_size, args.disp_batches),
    )
    mx.nd.waitall()
    logging.info(
        "dlperf: training done in %.1f s (%s, %s)", time.time() - started, model, "x".join(map(str, args.image_shape))
    )
    return 0


def synthetic_iter(mx, num_classes, data_shape, max_iter):
    """One random batch (made once, like DLE's synthetic backend) served ``max_iter`` times per epoch."""
    import numpy as np

    class SyntheticDataIter(mx.io.DataIter):
        def __init__(self):
            super().__init__(data_shape[0])
            self.max_iter, self.cur_iter = max_iter, 0
            self.data = mx.nd.array(np.random.uniform(-1, 1, data_shape), dtype="float32")
            self.label = mx.nd.array(np.random.randint(0, num_classes, [data_shape[0]]), dtype="float32")
            self.provide_data = [mx.io.DataDesc("data", tuple(data_shape), "float32")]
            self.provide_label = [mx.io.DataDesc("softmax_label", (data_shape[0],), "float32")]

        def reset(self):
            self.cur_iter = 0

        def next(self):
            if self.cur_iter >= self.max_iter:
                raise StopIteration
            self.cur_iter += 1
            return mx.io.DataBatch(
                data=[self.data],
                label=[self.label],
                pad=0,
                provide_data=self.provide_data,
                provide_label=self.provide_label,
            )

    return SyntheticDataIter()


if __name__ == "__main__":
    sys.exit(main())
