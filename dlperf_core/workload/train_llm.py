#!/usr/bin/env python3
"""Reference transformer pretraining workload: a Llama-style decoder (``llm.py``) on synthetic tokens, logging
DLLogger lines like the ResNet workload, with tokens instead of images.

Runs as ``python dlperf_core/workload/train_llm.py``, ``python -m dlperf_core.workload.train_llm`` or under
``torchrun`` (one process per device; gloo on CPU, nccl on CUDA, DistributedDataParallel). AdamW (fused on
CUDA), bf16 autocast (``--precision amp``) or TF32/FP32, optional ``torch.compile``, a linear learning-rate
warm-up over the warm-up iterations.

Log format (rank 0, stdout; read by the ``ngc_pytorch_dllogger`` parser)::

    DLL <time> - PARAMETER arch : llm_tiny  batch_size : 8  seq_len : 64  world_size : 2  flops_per_token : ...
    DLL <time> - Epoch: 0 Iteration: 1  train.loss : 6.23  train.total_tps : 1234.56 tokens/s
    DLL <time> - Summary: train.loss : 5.91  train.total_tps : 1300.00 tokens/s

``batch_size`` is sequences per device and ``seq_len`` tokens per sequence, so a step is world_size x
batch_size x seq_len tokens; ``train.total_tps`` is global tokens per second; ``flops_per_token`` is what the
MFU assumes (``llm.flops_per_token``: 6N + 12 x layers x d_model x seq_len).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

if TYPE_CHECKING or __package__ not in (None, ""):  # a module of dlperf_core.workload (as mypy reads it)
    from . import train as _train
    from .llm import SIZES, Llm, flops_per_token, num_parameters
else:  # run as a script: make the sibling modules importable
    sys.path.insert(0, str(Path(__file__).absolute().parent))
    import train as _train
    from llm import SIZES, Llm, flops_per_token, num_parameters


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="train_llm.py", description="Llama-style decoder pretraining on synthetic tokens.")
    p.add_argument("--size", choices=sorted(SIZES), default="tiny", help="model size (tiny)")
    p.add_argument("--batch-size", type=_train._positive_int, default=8, help="sequences per device (8)")
    p.add_argument(
        "--seq-len", type=_train._positive_int, default=None, help="tokens per sequence (default: the size's)"
    )
    _train.add_precision_argument(p, amp="bf16 autocast")
    _train.add_iteration_arguments(
        p, 10, 50, "iterations before the measured ones", "measured iterations after warm-up"
    )
    p.add_argument("--lr", type=_train._positive_float, default=3e-4, help="AdamW learning rate (3e-4)")
    p.add_argument("--weight-decay", type=float, default=0.1, help="AdamW weight decay of matrices (0.1)")
    _train.add_run_arguments(p, seed_help=None)
    p.add_argument("--threads", type=_train._positive_int, default=None, help="torch intra-op threads on CPU")
    return p


def run(args: argparse.Namespace, info: _train.DistInfo) -> None:
    initialised = _train.now_ms()  # MLLOG's init_start
    device = _train.resolve_device(args.device, info)
    cuda = device.type == "cuda"
    if info.launched:
        dist.init_process_group("nccl" if cuda else "gloo", device_id=device if cuda else None)
    pinned = _train.set_cpu_threads(args.threads, info) if not cuda else []
    _train.set_precision_flags(args.precision)
    base = SIZES[args.size]
    cfg = base if args.seq_len is None else type(base)(**{**base.__dict__, "seq_len": args.seq_len})

    torch.manual_seed(args.seed)
    model: nn.Module = Llm(cfg).to(device).train()
    decay = [p for p in model.parameters() if p.ndim > 1]
    no_decay = [p for p in model.parameters() if p.ndim <= 1]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=_train.lr_at(1, args.lr, args.warmup_iterations),
        betas=(0.9, 0.95),
        fused=True if cuda else None,
    )
    if info.world_size > 1:
        # the rotary tables are the same on every rank: no buffer broadcast per forward
        model = _train.data_parallel(model, device, cuda)
    if args.compile:
        model = torch.compile(model)  # type: ignore[assignment]

    # Synthetic tokens: one random batch per rank, made once on the device; targets are the next tokens.
    torch.manual_seed(args.seed + info.rank)
    tokens = torch.randint(0, cfg.vocab_size, (args.batch_size, cfg.seq_len + 1), device=device)
    inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    amp = args.precision == "amp"

    def step() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            logits = model(inputs)
            loss = F.cross_entropy(logits.float().view(-1, cfg.vocab_size), targets.view(-1))
        loss.backward()
        optimizer.step()
        return loss.detach()

    tokens_per_step = info.world_size * args.batch_size * cfg.seq_len
    logger = _train.DLLogger(enabled=info.rank == 0)
    logger.parameters(
        {
            "arch": f"llm_{args.size}",
            "batch_size": args.batch_size,
            "seq_len": cfg.seq_len,
            "world_size": info.world_size,
            "print_freq": args.print_freq,
            "precision": args.precision,
            "amp": amp,
            "warmup_iterations": args.warmup_iterations,
            "iterations": args.iterations,
            "device": device.type,
            "compile": args.compile,
            "d_model": cfg.d_model,
            "n_layers": cfg.n_layers,
            "n_heads": cfg.n_heads,
            "ffn_hidden": cfg.ffn_hidden,
            "vocab_size": cfg.vocab_size,
            "parameters": num_parameters(cfg),
            "flops_per_token": flops_per_token(cfg),
            "lr": f"{args.lr:g}",
            "seed": args.seed,
            "threads": torch.get_num_threads(),
            "pinned_cores": ",".join(map(str, pinned)) or "none",
            "torch_version": torch.__version__,
        }
    )

    mlperf = _train.MlperfLog(enabled=info.rank == 0)
    settings: list[tuple[str, object]] = [
        ("submission_benchmark", f"dlperf_llm_{args.size}"),  # no MLPerf benchmark: dlperf's own decoder
        ("submission_org", "dlperf"),
        ("submission_division", "open"),
        ("submission_status", "research"),
        ("submission_platform", device.type),
        ("seed", args.seed),
        ("global_batch_size", info.world_size * args.batch_size),
        ("max_sequence_length", cfg.seq_len),
        ("opt_name", "adamw"),
        ("opt_base_learning_rate", args.lr),
        ("train_samples", args.iterations * tokens_per_step),  # tokens: the window's, as one epoch
        ("eval_samples", 0),
    ]
    mlperf.begin(initialised, settings)

    total = args.warmup_iterations + args.iterations
    if info.world_size > 1:
        dist.barrier()
    last_time = measure_start = started = _train.now_ms()
    last_i, loss_value = 0, float("nan")
    compiled_before_window = _train.compilations() if args.warmup_iterations == 0 else None
    for i in range(1, total + 1):
        if i <= args.warmup_iterations + 1:
            for group in optimizer.param_groups:
                group["lr"] = _train.lr_at(i, args.lr, args.warmup_iterations)
        loss = step()
        if i % args.print_freq == 0 or i == args.warmup_iterations or i == total:
            loss_value = _train.mean_over_ranks(loss, info, device)
            now = _train.now_ms()
            tps = (i - last_i) * tokens_per_step / max(now - last_time, 1e-9)
            logger.log(
                now, f"Epoch: 0 Iteration: {i}  train.loss : {loss_value:.5f}  train.total_tps : {tps:.2f} tokens/s"
            )
            last_time, last_i = now, i
            if i == args.warmup_iterations:
                measure_start, compiled_before_window = now, _train.compilations()
    _train.check_no_compilation_in_window(args.compile, compiled_before_window, args.warmup_iterations)
    elapsed = max(last_time - measure_start, 1e-9)
    logger.log(
        last_time,
        f"Summary: train.loss : {loss_value:.5f}  train.total_tps : "
        f"{args.iterations * tokens_per_step / elapsed:.2f} tokens/s",
    )
    mlperf.window(started, measure_start, last_time, args.iterations * tokens_per_step / elapsed)


def main(argv: Sequence[str] | None = None) -> int:
    return _train.run_script("train_llm.py", build_parser(), run, argv)


if __name__ == "__main__":
    sys.exit(main())
