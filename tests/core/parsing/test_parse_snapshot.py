"""Every parser gives, on every real log and window, exactly what tests/golden/parsed.json recorded: a rewrite of
a parser (for speed, for structure) keeps every figure, reason and record to the last digit."""

from __future__ import annotations

import json

import pytest

from parse_snapshot import GOLDEN, SHARED, snapshot

pytestmark = pytest.mark.skipif(not (SHARED / "reallogs").is_dir(), reason=f"no real logs at {SHARED}")


def test_parsers_reproduce_the_snapshot_on_every_real_log():
    golden = json.loads(GOLDEN.read_text())
    now = snapshot()
    assert sorted(now) == sorted(golden), "the set of real logs changed: regenerate with tests/parse_snapshot.py"
    differences = [
        f"{log} [{window}] run {i}: {key}: was {old.get(key)!r}, now {new.get(key)!r}"
        for log in golden
        for window, runs in golden[log].items()
        for i, (old, new) in enumerate(zip(runs, now[log][window]))
        for key in sorted(set(old) | set(new))
        if old.get(key) != new.get(key)
    ]
    counts = [f"{log} [{w}]" for log in golden for w in golden[log] if len(golden[log][w]) != len(now[log][w])]
    assert not differences and not counts, "\n".join(counts + differences[:40])
    assert sum(len(r) for log in golden.values() for r in log.values()) > 150  # the snapshot is not empty
