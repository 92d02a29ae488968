#!/usr/bin/env python3
"""The fabric benchmark: all-reduce bus bandwidth, measured like NVIDIA's nccl-tests (``all_reduce_perf``) through
``torch.distributed``: nccl on GPUs, gloo on CPU. Launched like the training workloads (one process per
device under torchrun, or mpirun), so it crosses the same fabric as the benchmarks of the same topology.

For each message size (bytes, doubling from ``--min-bytes`` to ``--max-bytes``): ``--warmup`` untimed
all-reduces, then ``--iters`` timed ones (a barrier before, the device synchronised after); the time of one
all-reduce is the mean, the slowest rank's (nccl-tests reports the max over ranks too). Then, as nccl-tests:

    algbw = size / time                      (GB/s, 1 GB = 1e9 bytes)
    busbw = algbw * 2 * (n - 1) / n          (n = ranks: the bytes each link carries in a ring all-reduce)

Rank 0 prints nccl-tests' table (``dlperf_core.parsing.fabric.parse_fabric_table`` reads it; the header line's
``all_reduce probe`` wording is kept so logs already written read the same)::

    # dlperf all_reduce probe: ranks 2 backend gloo dtype float32 warmup 2 iters 5
    #       size         count      type   redop    time(us)  algbw(GB/s)  busbw(GB/s)
         1048576        262144     float     sum      1234.5         0.85         0.85
    # Avg bus bandwidth    : 0.85

A single rank (1n1g) has nothing to reduce across: busbw is 0 by the formula, and the workload says so instead of
printing a table (the parser reads that as "no fabric", not as a zero bandwidth).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

if TYPE_CHECKING or __package__ not in (None, ""):  # a module of dlperf_core.workload (as mypy reads it)
    from . import train as _train
else:  # run as a script: make the sibling module importable
    sys.path.insert(0, str(Path(__file__).absolute().parent))
    import train as _train

DTYPES = {"float32": (torch.float32, "float", 4), "bfloat16": (torch.bfloat16, "bfloat16", 2)}


def bus_bandwidth(algbw: float, ranks: int) -> float:
    """nccl-tests' bus bandwidth of an all-reduce: algbw x 2 (n - 1) / n."""
    return algbw * 2 * (ranks - 1) / ranks


def sizes(min_bytes: int, max_bytes: int) -> list[int]:
    """Message sizes from ``min_bytes`` doubling up to ``max_bytes`` (both included)."""
    out, size = [], min_bytes
    while size <= max_bytes:
        out.append(size)
        size *= 2
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="allreduce.py", description="nccl-tests-style all-reduce bus bandwidth benchmark (the fabric benchmark)."
    )
    p.add_argument("--min-bytes", type=_train._positive_int, default=1 << 20, help="smallest message (1 MiB)")
    p.add_argument("--max-bytes", type=_train._positive_int, default=1 << 30, help="largest message (1 GiB)")
    p.add_argument("--warmup", type=int, default=5, help="untimed all-reduces per size (5)")
    p.add_argument("--iters", type=_train._positive_int, default=20, help="timed all-reduces per size (20)")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--threads", type=_train._positive_int, default=None, help="torch threads on CPU")
    return p


def run(args: argparse.Namespace, info: _train.DistInfo) -> None:
    device = _train.resolve_device(args.device, info)
    cuda = device.type == "cuda"
    if args.min_bytes > args.max_bytes:
        raise ValueError(f"--min-bytes {args.min_bytes} is larger than --max-bytes {args.max_bytes}")
    if args.threads and not cuda:
        _train.set_cpu_threads(args.threads, info)
    dtype, type_name, width = DTYPES[args.dtype]
    backend = "nccl" if cuda else "gloo"
    if info.world_size < 2:
        print(
            f"# dlperf all_reduce probe: ranks 1 backend {backend}: a single rank reduces nothing (no fabric to measure)",
            flush=True,
        )
        return
    dist.init_process_group(backend, device_id=device if cuda else None)
    if info.rank == 0:
        print(
            f"# dlperf all_reduce probe: ranks {info.world_size} backend {backend} dtype {args.dtype} "
            f"warmup {args.warmup} iters {args.iters}",
            flush=True,
        )
        print(
            f"# {'size':>10} {'count':>13} {'type':>9} {'redop':>7} {'time(us)':>11} {'algbw(GB/s)':>12} "
            f"{'busbw(GB/s)':>12}",
            flush=True,
        )
    busbws = []
    for size in sizes(args.min_bytes, args.max_bytes):
        count = max(1, size // width)
        buffer = torch.ones(count, dtype=dtype, device=device)
        for _ in range(args.warmup):
            dist.all_reduce(buffer)
        if cuda:
            torch.cuda.synchronize(device)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(buffer)
        if cuda:
            torch.cuda.synchronize(device)
        elapsed = torch.tensor([(time.perf_counter() - start) / args.iters], dtype=torch.float64, device=device)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest rank's time
        seconds = float(elapsed.item())
        algbw = count * width / seconds / 1e9
        busbw = bus_bandwidth(algbw, info.world_size)
        busbws.append(busbw)
        if info.rank == 0:
            print(
                f"  {count * width:>10} {count:>13} {type_name:>9} {'sum':>7} {seconds * 1e6:>11.1f} "
                f"{algbw:>12.3f} {busbw:>12.3f}",
                flush=True,
            )
        del buffer
    if info.rank == 0:
        print(f"# Avg bus bandwidth    : {sum(busbws) / len(busbws):.3f}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    return _train.run_script("allreduce.py", build_parser(), run, argv)


if __name__ == "__main__":
    sys.exit(main())
