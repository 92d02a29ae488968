#!/usr/bin/env python3
"""A benchmark-only workload that trains nothing: it prints NGC PyTorch's DLLogger lines (one ``PARAMETER``
line, a line per iteration, a ``Summary`` line) for its warm-up and measured iterations, sleeping ``--step-ms``
per iteration, and exits. It imports the standard library only, so that a case run of it costs what dlperf and
Airflow cost around a case (``bench/growth.py``), not a framework's start-up.

Node rank 0 prints; the other nodes sleep as long and print nothing (as a training's non-zero ranks do).
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from collections.abc import Sequence


def dll(when: float, body: str) -> None:
    stamp = datetime.datetime.fromtimestamp(when).strftime("%Y-%m-%d %H:%M:%S.%f")
    print(f"DLL {stamp} - {body}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-size", type=int, required=True, help="samples per device per iteration")
    parser.add_argument("--world-size", type=int, default=1, help="devices in the case (all nodes)")
    parser.add_argument("--node-rank", type=int, default=0)
    parser.add_argument("--warmup-iterations", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--step-ms", type=float, default=2.0, help="sleep per iteration, in milliseconds")
    args = parser.parse_args(argv)
    printing = args.node_rank == 0
    global_batch = args.batch_size * args.world_size
    if printing:
        dll(
            time.time(),
            f"PARAMETER arch : synthetic  batch_size : {args.batch_size}  world_size : {args.world_size}  "
            f"warmup_iterations : {args.warmup_iterations}  iterations : {args.iterations}  "
            f"step_ms : {args.step_ms:g} ",
        )
    total = args.warmup_iterations + args.iterations
    last = measure_start = time.time()
    for i in range(1, total + 1):
        time.sleep(args.step_ms / 1000)
        now = time.time()
        if printing:
            ips = global_batch / max(now - last, 1e-9)
            dll(now, f"Epoch: 0 Iteration: {i}  train.loss : 0.00000  train.total_ips : {ips:.2f} img/s")
        last = now
        if i == args.warmup_iterations:
            measure_start = now
    if printing:
        ips = args.iterations * global_batch / max(last - measure_start, 1e-9)
        dll(last, f"Summary: train.loss : 0.00000  train.total_ips : {ips:.2f} img/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
