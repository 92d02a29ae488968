"""`dlperf regressions replay`: a nightly series from a CSV file (end to end, in a subprocess) and from a results database
judged night by night; its lines are the nightly task's (``judge_series``, ``describe_verdict``); a bad CSV is refused
with its line named and nothing on stdout."""

from __future__ import annotations

import random
import re
import subprocess
from datetime import UTC, date, datetime, timedelta

import pytest

from dlperf_cli.main import main
from dlperf_core.measure.regression import Night, Policy, describe_verdict, judge_series
from helpers import DLPERF, REPO, result_record, run_record

START = date(2026, 1, 1)
STEP = "pt/resnet50/amp/b256/1n8g"
FLAT = "pt/resnet50/amp/b256/1n1g"
LINE = re.compile(r"^  (\d{4}-\d\d-\d\d) (.{20}) (\S+): (.*)$")


def write_series(path, nights: int = 40, step_at: int = 30) -> dict[str, list[tuple[date, float]]]:
    """A CSV of two configurations: STEP drops 5% from night ``step_at``, FLAT stays, with a night of no ok repeat
    (night 25). Returns the good nights per configuration."""
    rng = random.Random(36)
    lines = ["configuration,night,median,repeats,cv,note"]  # any column order; other columns ignored
    good: dict[str, list[tuple[date, float]]] = {STEP: [], FLAT: []}
    for i in range(nights):
        night = START + timedelta(days=i)
        for key in (STEP, FLAT):
            if key == FLAT and i == 25:
                lines.append(f"{key},{night},,0,,the node was down")
                continue
            median = round(1000 * (0.95 if key == STEP and i >= step_at else 1.0) * (1 + rng.gauss(0, 0.005)), 2)
            lines.append(f"{key},{night.isoformat()},{median},3,0.004,")
            good[key].append((night, median))
    path.write_text("\n".join(lines) + "\n")
    return good


def printed(stdout: str) -> dict[str, list[tuple[date, str, str]]]:
    """(night, verdict, the line after the verdict) per configuration, from the replay's per-night lines."""
    out: dict[str, list[tuple[date, str, str]]] = {}
    for line in stdout.split("\nalerts (new regressions): ")[0].splitlines():
        if match := LINE.match(line):
            night, kind, key, _ = match.groups()
            out.setdefault(key, []).append((date.fromisoformat(night), kind.strip(), line[len("  2026-01-01 ") + 21 :]))
    return out


def test_the_replay_of_a_csv_prints_the_nightly_tasks_verdicts(tmp_path):
    csv = tmp_path / "history.csv"
    good = write_series(csv)
    done = subprocess.run([*DLPERF, "regressions", "replay", str(csv)], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    lines = printed(done.stdout)
    for key, nights in good.items():
        verdicts = judge_series([Night(night, f"n{i}", median) for i, (night, median) in enumerate(nights)])
        judged = [(night, kind, text) for night, kind, text in lines[key] if kind != "not judged"]
        assert [(n, k) for n, k, _ in judged] == [(v.night, v.kind) for v in verdicts]
        assert [text for _, _, text in judged] == [f"{describe_verdict(key, v)} [cv 0.004]" for v in verdicts]
    assert (date(2026, 1, 26), "not judged", f"{FLAT}: no ok repeat") in lines[FLAT]
    kinds = {n: k for n, k, _ in lines[STEP]}
    assert (kinds[date(2026, 1, 31)], kinds[date(2026, 2, 1)]) == ("suspected", "new")  # the step is night 30
    assert "alerts (new regressions): 1\n" in done.stdout
    assert f"\n  {STEP}: slower -" in done.stdout and "% on 2026-02-01, first bad night 2026-01-31\n" in done.stdout
    assert done.stdout.rstrip().endswith("2 configurations, 80 nights, 79 judged")


def test_the_rule_alone_and_brief(tmp_path, capsys):
    csv = tmp_path / "history.csv"
    good = write_series(csv)
    assert main(["regressions", "replay", str(csv), "--confirm-nights", "1", "--brief", "--configuration", "1n8g"]) == 0
    out = capsys.readouterr().out
    verdicts = judge_series([Night(n, f"n{i}", m) for i, (n, m) in enumerate(good[STEP])], Policy(confirm_nights=1))
    loud = [(v.night, v.kind) for v in verdicts if v.kind not in ("steady", "continuing", "insufficient_history")]
    assert [(n, k) for n, k, _ in printed(out)[STEP]] == loud == [(date(2026, 1, 31), "new")]  # the morning after
    assert FLAT not in out and "1 configurations, 40 nights, 40 judged" in out


BAD = [
    ("", "x.csv: empty; the first line must be the header night,configuration,median,repeats,cv"),
    ("night,configuration,median,repeats\n2026-01-01,a,1.0,3\n", "x.csv:1: the header lacks cv (it must name"),
    ("night,configuration,median,repeats,cv\n2026-01-01,a,1.0,3,0.01\n2026-01-02,a,fast,3,0.01\n", "x.csv:3: median 'fast' is not a number"),
    ("night,configuration,median,repeats,cv\n01/02/2026,a,1.0,3,\n", "x.csv:2: night '01/02/2026' is not an ISO date"),
    ("night,configuration,median,repeats,cv\n2026-01-01,a,1.0,3,\n\n2026-01-01,a,2.0,3,\n", "x.csv:4: a on 2026-01-01 is on line 2 already"),
    ("night,configuration,median,repeats,cv\n2026-01-01,a,1.0,3\n", "x.csv:2: 4 fields, the header has 5"),
    ("night,configuration,median,repeats,cv\n2026-01-01,a,1.0,2.5,\n", "x.csv:2: repeats '2.5' is not a whole number"),
    ("night,configuration,median,repeats,cv\n2026-01-01,a,-3,3,\n", "x.csv:2: median '-3' is not positive"),
    ("night,configuration,median,repeats,cv\n2026-01-01,a,,3,\n", "x.csv:2: median '' is not a number"),
    ("night,configuration,median,repeats,cv\n2026-01-01,,1.0,3,\n", "x.csv:2: configuration is empty"),
    ("night,configuration,median,repeats,cv\n2026-01-01,a,1.0,3,nan\n", "x.csv:2: cv 'nan' is not a finite number"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "message"), BAD, ids=range(len(BAD)))
def test_a_bad_csv_is_refused_naming_its_line_and_nothing_is_printed(tmp_path, monkeypatch, capsys, text, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.csv").write_text(text)
    assert main(["regressions", "replay", "x.csv"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"dlperf regressions replay: {message}"), err


def test_the_source_is_a_csv_or_a_database(tmp_path, capsys):
    assert main(["regressions", "replay"]) == 2
    assert "give a CSV file or --db URL" in capsys.readouterr().err
    assert main(["regressions", "replay", str(tmp_path / "x.csv"), "--db", "sqlite://"]) == 2
    assert main(["regressions", "replay", str(tmp_path / "missing.csv")]) == 2
    assert "missing.csv: cannot be read" in capsys.readouterr().err
    (tmp_path / "x.csv").write_text("night,configuration,median,repeats,cv\n2026-01-01,a,1.0,3,\n")
    assert main(["regressions", "replay", str(tmp_path / "x.csv"), "--confirm-nights", "0"]) == 2
    assert "confirm_nights" in capsys.readouterr().err


def test_the_replay_of_a_results_databases_nightly_history(sqlite_url, capsys):
    """Twelve scheduled nights of one case in a results database, 10% slower from night 9, night 4 with a failed
    repeat (not a good night), and a manual run (not nightly): the replay reads the nightly history."""
    from dlperf_core.storage import ResultStore

    store = ResultStore(sqlite_url)
    store.ensure_schema()
    rng = random.Random(4)
    for i in range(13):
        trigger = "manual" if i == 12 else "scheduled"
        started = datetime(2026, 1, 1, 2, 0, tzinfo=UTC) + timedelta(days=i)
        run = run_record(
            dag_id="dlperf_benchmark",
            run_id=f"{trigger}__{i:02d}",
            trigger=trigger,
            started_at=started,
            finished_at=started + timedelta(hours=1),
            status="success",
        )
        store.upsert_run(run)
        level = 900.0 if i >= 9 else 1000.0
        store.upsert_results(
            [
                result_record(
                    case_key=STEP,
                    repeat=r,
                    throughput=level * (1 + rng.gauss(0, 0.003)),
                    status="failed" if (i, r) == (4, 1) else "ok",
                    started_at=started + timedelta(minutes=r),
                    benchmark_run=run,
                )
                for r in range(2)
            ]
        )
    store.dispose()
    assert main(["regressions", "replay", "--db", sqlite_url]) == 0
    out = capsys.readouterr().out
    (key,) = printed(out)
    assert key == STEP  # the key as stored
    kinds = [(n.day, k) for n, k, _ in printed(out)[key]]
    assert kinds == [(1, "insufficient_history"), (2, "insufficient_history"), (3, "insufficient_history"),
                     (4, "insufficient_history"), (5, "not judged"), (6, "insufficient_history"), (7, "steady"),
                     (8, "steady"), (9, "steady"), (10, "suspected"), (11, "new"), (12, "continuing")]  # fmt: skip
    assert f"{key}: 1 failed repeats" in out
    assert "first bad night 2026-01-10" in out and "1 configurations, 12 nights, 11 judged" in out
