"""(a) Harness transparency: the reference workload through dlperf (local and docker runtimes) against the
same training loop launched bare, side by side in one run. Target: dlperf/bare >= 0.99.

    .venv/bin/python bench/harness_transparency.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import yaml

from _common import REPO, bare_run, dlperf_run, machine, median_cv
from dlperf_core.storage import ResultStore

ARGS = ["--batch-size", "8", "--precision", "fp32", "--warmup-iterations", "5", "--iterations", "40",
        "--image-size", "64", "--width", "16", "--device", "cpu"]


def suite_file(tmp: Path, repeats: int) -> Path:
    data = {
        "name": "transparency", "repeats": repeats, "warmup_iterations": 5, "measured_iterations": 40,
        "benchmarks": [{
            "framework": "pytorch_reference", "model": "resnet50_v1.5", "precisions": ["fp32"],
            "batch_size_per_device": 8, "topologies": ["1n1g"], "image": "dlperf/pytorch-reference:cpu",
            "extra_args": ["--image-size", "64", "--width", "16", "--device", "cpu"],
        }],
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
        bare: list[float] = []
        through: dict[str, list[float]] = {}
        for runtime in args.runtimes.split(","):
            bare += [bare_run(ARGS) for _ in range(args.repeats)]  # bare before each runtime: same drift
            run_id, _ = dlperf_run(suite, runtime, db, tmp)
            rows = ResultStore(db).results(run_id=run_id)
            through[runtime] = [float(x) for x in rows["throughput"]]
        bare += [bare_run(ARGS) for _ in range(args.repeats)]
        print(f"# harness transparency  ({machine()})")
        print(f"workload: {' '.join(ARGS)}")
        b_med, b_cv = median_cv(bare)
        print(f"bare      n={len(bare):2d} median {b_med:8.2f} samples/s  CV {b_cv:.1%}  {[round(x, 1) for x in bare]}")
        for runtime, values in through.items():
            med, cv = median_cv(values)
            print(f"{runtime:9s} n={len(values):2d} median {med:8.2f} samples/s  CV {cv:.1%}  {[round(x, 1) for x in values]}"
                  f"  ratio dlperf/bare = {med / b_med:.3f} (target >= 0.99)")


if __name__ == "__main__":
    main()
