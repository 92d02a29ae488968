"""What every parser gives on every real log, to the last digit: the snapshot that a parser rewrite must keep.

``tests/golden/parsed.json`` holds, for each real log (``../shared/reallogs`` and ``tests/data/cpu_logs``)
and each of a few windows (the format's default, strict and fitted, and two windows of the caller's), every
field of every ``ParsedRun`` (floats as ``repr``, so equal means equal to the last bit) and a SHA-256 of its
records. ``tests/core/parsing/test_parse_snapshot.py`` compares the parsers of today with it.

Regenerate (only when a parser's results are meant to change, and say why in the commit):

    python tests/parse_snapshot.py --write
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from dlperf_core.parsing import ParsedRun, parse_log  # noqa: E402

SHARED = Path(os.environ.get("DLPERF_SHARED", REPO.parent / "shared"))
GOLDEN = HERE / "golden" / "parsed.json"
# (name, keyword arguments of parse_log)
WINDOWS: tuple[tuple[str, dict], ...] = (
    ("default", {}),
    ("default-fit", {"fit": True}),
    ("w0-all", {"warmup": 0}),
    ("w10-m50", {"warmup": 10, "measured": 50}),
    ("w10-m50-fit", {"warmup": 10, "measured": 50, "fit": True}),
)


def log_files() -> list[tuple[str, Path]]:
    """(stable name, path) of every real log: the shared ones and the CPU logs kept in the tests."""
    out = []
    real = SHARED / "reallogs"
    out += [
        (f"reallogs/{p.relative_to(real)}", p) for p in sorted(real.rglob("*")) if p.is_file() and p.suffix != ".md"
    ]
    cpu = HERE / "data" / "cpu_logs"
    out += [(f"cpu_logs/{p.name}", p) for p in sorted(cpu.glob("*.log"))]
    return out


def _num(x: float | int | None) -> str | int | None:
    return repr(x) if isinstance(x, float) else x


def describe(run: ParsedRun) -> dict:
    """Every field of ``run``, floats as repr, the records as a digest of their exact values."""
    out = {k: _num(v) for k, v in run.to_dict().items() if k not in ("window", "file")}
    out["window"] = list(run.window) if run.window else None
    rows = "\n".join(
        f"{r.iteration}|{r.time!r}|{r.samples_per_sec!r}|{r.loss!r}|{r.rank}|{r.epoch}" for r in run.records
    )
    out["records"] = len(run.records)
    out["records_sha256"] = hashlib.sha256(rows.encode()).hexdigest()
    return out


def snapshot() -> dict[str, dict[str, list[dict]]]:
    out: dict[str, dict[str, list[dict]]] = {}
    for name, path in log_files():
        text = path.read_bytes().decode("utf-8", errors="replace")
        out[name] = {w: [describe(r) for r in parse_log(text, file=name, **kw)] for w, kw in WINDOWS}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"write {GOLDEN.relative_to(REPO)}")
    args = ap.parse_args()
    data = snapshot()
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    if args.write:
        GOLDEN.write_text(text)
        print(f"wrote {GOLDEN} ({len(data)} logs)")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
