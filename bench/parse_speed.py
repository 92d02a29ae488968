"""Parse speed of dlperf_core.parsing over every file of the shared real logs, against 100 MB/s.

Usage: python bench/parse_speed.py [--repeat N] [--root DIR]
Every file counts, whatever its format (unknown formats still cost detection and count their bytes).
Timing covers ``parse_log`` on already-decoded text (file reading excluded), best of N rounds (like
timeit: the least disturbed pass); figures only, no asserts.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dlperf_core.parsing import parse_log  # noqa: E402

TARGET_MB_S = 100.0


def main() -> int:
    here = Path(__file__).resolve().parents[1]
    default_root = Path(os.environ.get("DLPERF_SHARED", here.parent / "shared")) / "reallogs"
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20, help="rounds over all files; the best counts (default 20)")
    ap.add_argument("--root", type=Path, default=default_root, help=f"log folder (default {default_root})")
    args = ap.parse_args()

    files = sorted(p for p in args.root.rglob("*") if p.is_file() and p.name != "PROVENANCE.md")
    texts = [(p, p.read_bytes().decode("utf-8", errors="replace")) for p in files]
    if not texts:
        print(f"no files under {args.root}")
        return 1
    sizes = [len(text.encode("utf-8", "surrogatepass")) for _, text in texts]
    formats = [parse_log(text, file=str(path))[0].format for path, text in texts]  # also warms up imports
    # Best of --repeat rounds (like timeit): the least disturbed pass over all files, per format.
    best: dict[str, float] = {}
    for _ in range(args.repeat):
        spent: dict[str, float] = defaultdict(float)
        for (path, text), fmt in zip(texts, formats):
            t0 = time.perf_counter()
            parse_log(text, file=str(path))
            spent[fmt] += time.perf_counter() - t0
        for fmt, secs in spent.items():
            best[fmt] = min(best.get(fmt, secs), secs)
    volume: dict[str, int] = defaultdict(int)
    counts: dict[str, int] = defaultdict(int)
    for size, fmt in zip(sizes, formats):
        volume[fmt] += size
        counts[fmt] += 1

    total = sum(sizes)
    print(f"{len(texts)} files, {total / 1e6:.2f} MB, best of {args.repeat} rounds")
    for fmt in sorted(volume):
        rate = volume[fmt] / best[fmt] / 1e6
        print(f"  {fmt:24s} {counts[fmt]:3d} files {volume[fmt] / 1e6:8.3f} MB  {rate:8.1f} MB/s")
    overall = total / sum(best.values()) / 1e6
    print(f"overall: {overall:.1f} MB/s = {overall / TARGET_MB_S:.2f} x the {TARGET_MB_S:.0f} MB/s target")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
