"""(a) Harness transparency: the reference workload through dlperf (local and docker runtimes) against the
same training loop launched bare, side by side in one run. Target: dlperf/bare >= 0.99.

    .venv/bin/python bench/harness_transparency.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

import yaml

from _common import bare_run as bare_host
from _common import dlperf_run, machine, median_cv, throughput_of_log
from dlperf_core.storage import ResultStore

IMAGE = "dlperf/pytorch-reference:cpu"


def bare_docker(args: list[str]) -> float:
    """The same loop launched bare inside the same image (`docker run`, no dlperf around it)."""
    out = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            IMAGE,
            "python3",
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "1",
            "/opt/dlperf/workload/train.py",
            *args,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return throughput_of_log(out.stdout, WARMUP, MEASURED)


# One thread per process: on this 2-core machine two OpenMP threads are at the mercy of any other process
# (run-to-run CV of 15% with 2 threads), one thread is steady. Both paths get exactly the same arguments.
EXTRA = ["--image-size", "64", "--width", "16", "--device", "cpu", "--threads", "1"]
WARMUP, MEASURED = 5, 100
ARGS = [
    "--batch-size",
    "8",
    "--precision",
    "fp32",
    "--warmup-iterations",
    str(WARMUP),
    "--iterations",
    str(MEASURED),
    *EXTRA,
]


def suite_file(tmp: Path, repeats: int) -> Path:
    data = {
        "name": "transparency",
        "repeats": repeats,
        "warmup_iterations": WARMUP,
        "measured_iterations": MEASURED,
        "benchmarks": [
            {
                "framework": "pytorch_reference",
                "model": "resnet50_v1.5",
                "precisions": ["fp32"],
                "batch_size_per_device": 8,
                "topologies": ["1n1g"],
                "image": "dlperf/pytorch-reference:cpu",
                "extra_args": EXTRA,  # given last, so its --threads 1 wins over the runtime's split
            }
        ],
    }
    path = tmp / "transparency.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--runtimes", default="local,docker")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        db = f"sqlite:///{tmp / 'bench.db'}"
        suite = suite_file(tmp, args.repeats)
        # each runtime against the same loop launched bare where that runtime runs it: on the host for
        # `local`, in the same image for `docker`; bare runs before and after each dlperf block (drift)
        bare_of = {"local": lambda: bare_host(ARGS), "docker": lambda: bare_docker(ARGS)}
        print(f"# harness transparency  ({machine()})")
        print(f"workload: {' '.join(ARGS)}")
        for runtime in args.runtimes.split(","):
            bare = [bare_of[runtime]() for _ in range(args.repeats)]
            run_id, _ = dlperf_run(suite, runtime, db, tmp)
            rows = ResultStore(db).results(run_id=run_id)
            through = [float(x) for x in rows["throughput"]]
            bare += [bare_of[runtime]() for _ in range(args.repeats)]
            b_med, b_cv = median_cv(bare)
            med, cv = median_cv(through)
            print(
                f"{runtime}: bare   n={len(bare):2d} median {b_med:8.2f} samples/s  CV {b_cv:.1%}  {[round(x, 1) for x in bare]}"
            )
            print(
                f"{runtime}: dlperf n={len(through):2d} median {med:8.2f} samples/s  CV {cv:.1%}  {[round(x, 1) for x in through]}"
            )
            print(f"{runtime}: ratio dlperf/bare = {med / b_med:.3f} (target >= 0.99)")


if __name__ == "__main__":
    main()
