"""Detection quality of the nightly regression rule and of change points, on generated series (docs/benchmarks.md (j)).

Series of nightly medians (level 1000, Gaussian noise of a stated CV night to night, seeded: the same figures on
every run) in these scenarios:

* null scenarios, where every alert is a false alert: ``noise`` (the noise alone); ``outliers`` (single slow nights,
  -8%, about 2 a month, at least 3 nights apart); ``bimodal`` (each night lands on a slow mode, -3%, with
  probability 0.25: a second node pool or a throttled GPU some nights). 150 nights each, the alerts of the last 120
  counted (4 series-months of 30 nights);
* changes that should be caught: ``step -3%``, ``step -5%``, ``step -10%`` after 40 steady nights; ``drift -5%``, a
  slow drift from 0 to -5% over 30 nights after 40 steady ones. A series is caught *within k nights* when a
  "slower" alert comes on or after the first changed night and at most k - 1 nights after the change reached its
  full size (a step: its first night; a drift: the end of its ramp).

The methods, each as it would run every morning on the nights up to that one:

* ``rule``: today's rule alone (``regression.judge_series`` with ``Policy(confirm_nights=1)``: median and MAD of the
  last 14 good nights, robust z >= 3.5 and a change of at least 2%; alerts the morning after the first bad night);
* ``rule twice``: the rule's regression still at its regressed level the night after it opened (the PyTorch HUD
  way: two violating nights in a row), for reference;
* ``dlperf CP``: dlperf's change points (``dlperf_core.measure.change_points``, E-Divisive means with the t-test, p
  <= 0.001, a change over 2%) over the last 30 nights and tonight; an alert for each change point not within 2 nights
  of one alerted before;
* ``Otava``: the same with Apache Otava 0.8.0's ``compute_change_points`` (installed with ``pip --no-deps`` into a
  temporary folder when it is not importable; left out, and said so, when that fails). Both run on the same
  windows, and the script counts how many of those windows they answered identically (indices and p-values);
* ``rule + CP``: ``regression.judge_series`` with ``Policy(confirm_nights=2)``: a night the rule flags is only
  ``suspected`` (no alert) until change points over the last 30 nights and tonight find a level change (p <= 0.001,
  over 2%) at least 2 nights old and each of the last 2 nights is at least 3 standard deviations (of the nights
  before the change) and 2% off in its direction; the alert names the change point's night as the first bad one.
  ``rule + CP, z 2`` (2 standard deviations) and ``rule + CP, 3 nights`` (``confirm_nights=3``) show the trade-off.

Goal (issue 36): at 1% CV, at least 90% of the 5% drops caught within 3 nights with at most 1 false alert per 100
series-months; at 2% CV the trade-off is reported (an ideal detector at that false-alert rate catches about 79%).

Figures only, nothing asserted. CPU cost per judged night is printed too (what the nightly task pays per
configuration).

    python bench/detection_quality.py                 # the counts of docs/benchmarks.md (j)
    python bench/detection_quality.py --scale 0.2     # a fifth of the series, a quick look
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dlperf_core.measure.change_points import change_points  # noqa: E402
from dlperf_core.measure.regression import Night, Policy, judge_series  # noqa: E402

OTAVA = "apache-otava==0.8.0"
LEVEL = 1000.0
START = date(2026, 1, 1)
HISTORY = 30  # nights before the first counted one (null series), and the change points' window
COUNTED = 120  # counted nights of a null series: 4 series-months
CHANGE_AT = 40  # the first changed night of a step or drift series
DRIFT_NIGHTS = 30
MONTH = 30
CP_PVALUE = 0.001
MIN_CHANGE = 0.02
NEAR = 2  # a change point within this many nights of one alerted is the same change

RULE_POLICIES = {
    "rule": Policy(confirm_nights=1),
    "rule + CP": Policy(confirm_nights=2),
    "rule + CP, z 2": Policy(confirm_nights=2, confirm_z=2.0),
    "rule + CP, 3 nights": Policy(confirm_nights=3),
}
RULE_METHODS = ("rule", "rule twice", *list(RULE_POLICIES)[1:])
CP_METHODS = ("dlperf CP", "Otava")
ADOPTED = "rule + CP"


@dataclass(frozen=True)
class Scenario:
    name: str
    kind: str  # "null" | "change"
    nights: int
    full_at: int | None = None  # the night the change reaches its full size


SCENARIOS = (
    Scenario("noise", "null", HISTORY + COUNTED),
    Scenario("outliers", "null", HISTORY + COUNTED),
    Scenario("bimodal", "null", HISTORY + COUNTED),
    Scenario("step -3%", "change", CHANGE_AT + 3, CHANGE_AT),
    Scenario("step -5%", "change", CHANGE_AT + 3, CHANGE_AT),
    Scenario("step -10%", "change", CHANGE_AT + 3, CHANGE_AT),
    Scenario("drift -5%", "change", CHANGE_AT + DRIFT_NIGHTS + 2, CHANGE_AT + DRIFT_NIGHTS - 1),
)


def levels(scenario: Scenario, rng: random.Random) -> list[float]:
    """The series' true level each night, as a factor of LEVEL."""
    n = scenario.nights
    if scenario.name == "outliers":
        factors, night = [1.0] * n, HISTORY // 2
        while night < n:
            night += 4 + int(rng.expovariate(1 / 11))  # at least 3 nights between, about 2 a month
            if night < n:
                factors[night] = 0.92
        return factors
    if scenario.name == "bimodal":
        return [0.97 if rng.random() < 0.25 else 1.0 for _ in range(n)]
    if scenario.name.startswith("step"):
        drop = float(scenario.name.split()[1].rstrip("%")) / 100
        return [1.0 if i < CHANGE_AT else 1.0 + drop for i in range(n)]
    if scenario.name.startswith("drift"):
        return [1.0 - 0.05 * min(1.0, max(0, i - CHANGE_AT + 1) / DRIFT_NIGHTS) for i in range(n)]
    return [1.0] * n


def series(scenario: Scenario, cv: float, i: int, seed: int) -> list[float]:
    rng = random.Random(f"{seed}/{scenario.name}/{cv}/{i}")
    return [LEVEL * f * (1.0 + rng.gauss(0.0, cv)) for f in levels(scenario, rng)]


# --------------------------------------------------------------------------- the methods: alerts (night, slower?)

Alert = tuple[int, bool]


def rule_alerts(values: Sequence[float], policy: Policy) -> list[Alert]:
    nights = [Night(START + timedelta(days=i), f"n{i}", v) for i, v in enumerate(values)]
    return [(i, v.direction == "slower") for i, v in enumerate(judge_series(nights, policy)) if v.kind == "new"]


def rule_twice_alerts(values: Sequence[float]) -> list[Alert]:
    nights = [Night(START + timedelta(days=i), f"n{i}", v) for i, v in enumerate(values)]
    verdicts = judge_series(nights, Policy(confirm_nights=1))
    return [
        (i, v.direction == "slower")
        for i, v in enumerate(verdicts)
        if i > 0 and v.kind == "continuing" and verdicts[i - 1].kind == "new"
    ]


def rule_method(name: str, values: Sequence[float]) -> list[Alert]:
    if name == "rule twice":
        return rule_twice_alerts(values)
    return rule_alerts(values, RULE_POLICIES[name])


Detector = Callable[[list[float]], list[tuple[int, bool, float]]]  # (index, slower, p-value)


def dlperf_detector(window: list[float]) -> list[tuple[int, bool, float]]:
    return [
        (c.index, c.mean_after < c.mean_before, c.pvalue)
        for c in change_points(window, max_pvalue=CP_PVALUE, min_magnitude=MIN_CHANGE)
    ]


def otava_detector(window: list[float]) -> list[tuple[int, bool, float]]:
    from otava.analysis import compute_change_points

    found, _ = compute_change_points(list(window), max_pvalue=CP_PVALUE, min_magnitude=MIN_CHANGE)
    return [(c.index, bool(c.stats.mean_2 < c.stats.mean_1), float(c.stats.pvalue)) for c in found]


@dataclass
class CpRun:
    alerts: dict[str, list[Alert]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    windows: int = 0
    identical: int = 0


def cp_alerts(values: Sequence[float], nights: range, with_otava: bool) -> CpRun:
    """Each method's alerts over ``nights``: every morning, change points over the last HISTORY nights and tonight;
    an alert for each change point not within NEAR nights of one alerted before."""
    detectors: dict[str, Detector] = {"dlperf CP": dlperf_detector}
    if with_otava:
        detectors["Otava"] = otava_detector
    run = CpRun({name: [] for name in detectors}, {name: 0.0 for name in detectors})
    alerted: dict[str, list[int]] = {name: [] for name in detectors}
    for t in nights:
        offset = max(0, t - HISTORY)
        window = list(values[offset : t + 1])
        answers = {}
        for name, detector in detectors.items():
            started = time.process_time()
            answers[name] = detector(window)
            run.seconds[name] += time.process_time() - started
        if with_otava:
            run.windows += 1
            mine, theirs = answers["dlperf CP"], answers["Otava"]
            run.identical += len(mine) == len(theirs) and all(
                a[0] == b[0] and abs(a[2] - b[2]) <= 1e-12 + 1e-9 * b[2] for a, b in zip(mine, theirs, strict=True)
            )
        for name, points in answers.items():
            for index, slower, _ in points:
                night = offset + index
                if not any(abs(night - a) <= NEAR for a in alerted[name]):
                    alerted[name].append(night)
                    run.alerts[name].append((t, slower))
    return run


# --------------------------------------------------------------------------- tallies


@dataclass
class Tally:
    series: int = 0
    months: float = 0.0
    false_alerts: int = 0
    within_1: int = 0
    within_3: int = 0

    def add(self, other: Tally) -> None:
        self.series += other.series
        self.months += other.months
        self.false_alerts += other.false_alerts
        self.within_1 += other.within_1
        self.within_3 += other.within_3

    def per_100_months(self) -> float:
        return 100.0 * self.false_alerts / self.months if self.months else float("nan")

    def rate(self, k: int) -> float:
        return (self.within_1 if k == 1 else self.within_3) / self.series if self.series else float("nan")


def tally(scenario: Scenario, alerts: list[Alert]) -> Tally:
    out = Tally(series=1)
    if scenario.kind == "null":
        out.months = COUNTED / MONTH
        out.false_alerts = sum(1 for night, _ in alerts if night >= HISTORY)
        return out
    assert scenario.full_at is not None
    caught = [night for night, slower in alerts if slower and night >= CHANGE_AT]
    first = min(caught, default=None)
    out.within_1 = int(first is not None and first <= scenario.full_at)
    out.within_3 = int(first is not None and first <= scenario.full_at + 2)
    return out


@dataclass(frozen=True)
class Task:
    scenario: Scenario
    cv: float
    first: int
    count: int
    seed: int
    cp_count: int  # how many of the series (the first ones) the change-point detectors run on
    with_otava: bool


@dataclass
class TaskResult:
    scenario: str
    cv: float
    tallies: dict[str, Tally]
    windows: int
    identical: int
    seconds: dict[str, float]  # CPU seconds per method
    nights: dict[str, int]  # nights judged per method


def run_task(task: Task) -> TaskResult:
    tallies = {name: Tally() for name in (*RULE_METHODS, *CP_METHODS)}
    seconds = {name: 0.0 for name in tallies}
    nights = {name: 0 for name in tallies}
    windows = identical = 0
    scenario = task.scenario
    if scenario.kind == "null":
        cp_nights = range(HISTORY, scenario.nights)
    else:
        assert scenario.full_at is not None
        cp_nights = range(CHANGE_AT, scenario.full_at + 3)
    for i in range(task.first, task.first + task.count):
        values = series(scenario, task.cv, i, task.seed)
        for name in RULE_METHODS:
            started = time.process_time()
            tallies[name].add(tally(scenario, rule_method(name, values)))
            seconds[name] += time.process_time() - started
            nights[name] += len(values)
        if i < task.cp_count:
            run = cp_alerts(values, cp_nights, task.with_otava)
            windows += run.windows
            identical += run.identical
            for name, alerts in run.alerts.items():
                tallies[name].add(tally(scenario, alerts))
                seconds[name] += run.seconds[name]
                nights[name] += len(cp_nights)
    return TaskResult(scenario.name, task.cv, tallies, windows, identical, seconds, nights)


# --------------------------------------------------------------------------- Otava, bench only


def otava_importable(folder: Path) -> str | None:
    """None when ``otava.analysis`` imports (after installing Otava with --no-deps into ``folder`` if needed), else
    why not."""
    try:
        import otava.analysis  # noqa: F401
    except ImportError:
        pass
    else:
        return None
    if not (folder / "otava").is_dir():
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(folder), OTAVA],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            return f"pip install --no-deps {OTAVA} failed: {(proc.stderr or proc.stdout).strip()[-300:]}"
    sys.path.insert(0, str(folder))
    try:
        import otava.analysis  # noqa: F401
    except ImportError as exc:
        return f"{OTAVA} installed in {folder} but does not import: {exc}"
    return None


# --------------------------------------------------------------------------- report


def cell_rates(t: Tally) -> str:
    if not t.series:
        return "–"
    return f"{t.rate(1):.0%} / {t.rate(3):.0%}"


def upper_95(events: int, months: float) -> float:
    """The 95% upper bound (one-sided) of a Poisson rate, per 100 series-months."""
    from scipy.stats import chi2

    return 100.0 * float(chi2.ppf(0.95, 2 * events + 2)) / 2 / months if months else float("nan")


def report(results: list[TaskResult], methods: Sequence[str], cvs: Sequence[float]) -> tuple[str, bool]:
    merged: dict[tuple[float, str, str], Tally] = {}
    for r in results:
        for name, t in r.tallies.items():
            merged.setdefault((r.cv, r.scenario, name), Tally()).add(t)
    lines: list[str] = []
    met = False
    for cv in cvs:
        lines += [
            f"#### {cv:.0%} CV",
            "",
            "Caught within 1 / within 3 nights (share of the series):",
            "",
            "| scenario | series (rules; change points) | " + " | ".join(methods) + " |",
            "|---|---|" + "---|" * len(methods),
        ]
        for s in (s for s in SCENARIOS if s.kind == "change"):
            rule_n = merged[(cv, s.name, "rule")].series
            cp_n = merged[(cv, s.name, "dlperf CP")].series
            cells = [cell_rates(merged[(cv, s.name, m)]) for m in methods]
            lines.append(f"| {s.name} | {rule_n}; {cp_n} | " + " | ".join(cells) + " |")
        lines += [
            "",
            "False alerts per 100 series-months:",
            "",
            "| scenario | series-months (rules; change points) | " + " | ".join(methods) + " |",
            "|---|---|" + "---|" * len(methods),
        ]
        pooled = {m: Tally() for m in methods}
        for s in (s for s in SCENARIOS if s.kind == "null"):
            for m in methods:
                pooled[m].add(merged[(cv, s.name, m)])
            months = f"{merged[(cv, s.name, 'rule')].months:.0f}; {merged[(cv, s.name, 'dlperf CP')].months:.0f}"
            cells = [
                f"{merged[(cv, s.name, m)].per_100_months():.1f}" if merged[(cv, s.name, m)].months else "–"
                for m in methods
            ]
            lines.append(f"| {s.name} | {months} | " + " | ".join(cells) + " |")
        months = f"{pooled['rule'].months:.0f}; {pooled['dlperf CP'].months:.0f}"
        cells = [f"**{pooled[m].per_100_months():.1f}**" if pooled[m].months else "–" for m in methods]
        lines.append(f"| **all three** | {months} | " + " | ".join(cells) + " |")
        lines.append("")
        base_false = pooled["rule"].per_100_months()
        base_catch = merged[(cv, "step -5%", "rule")].rate(3)
        for m in methods:
            five = merged[(cv, "step -5%", m)]
            if not five.series:
                continue
            false = pooled[m].per_100_months()
            worst = max(merged[(cv, s.name, m)].per_100_months() for s in SCENARIOS if s.kind == "null")
            ratio = f"{false / base_false:.2f}x the rule's false alerts" if base_false else "–"
            goal = ""
            if cv == 0.01:
                ok = five.rate(3) >= 0.90 and false <= 1.0
                goal = f"; goal (>= 90% within 3, <= 1 false alert per 100 series-months): {'met' if ok else 'missed'}"
                if ok and worst > 1.0:
                    goal += f" pooled, one null scenario at {worst:.1f}"
                met = met or (m == ADOPTED and ok)
            bound = upper_95(pooled[m].false_alerts, pooled[m].months)
            lines.append(
                f"- {m}: 5% drops caught within 3 nights {five.rate(3):.1%} ({five.rate(3) / base_catch:.2f}x the "
                f"rule's), {false:.2f} false alerts per 100 series-months (95% upper bound {bound:.2f}; {ratio}){goal}"
            )
        lines.append("")
    return "\n".join(lines), met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=36)
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every series count (default 1)")
    parser.add_argument("--null-series", type=int, default=200, help="null series per scenario and CV, rules")
    parser.add_argument("--change-series", type=int, default=300, help="change series per scenario and CV, rules")
    parser.add_argument("--cp-null-series", type=int, default=30, help="null series for the change-point detectors")
    parser.add_argument("--cp-change-series", type=int, default=150, help="change series, change-point detectors")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-otava", action="store_true", help="leave Otava out")
    args = parser.parse_args()
    cvs = (0.01, 0.02)
    why_not = "left out (--no-otava)" if args.no_otava else None
    if why_not is None:
        why_not = otava_importable(Path(tempfile.gettempdir()) / "dlperf-bench-otava-0.8.0")
    with_otava = why_not is None
    methods = [m for m in ("rule", "rule twice", *CP_METHODS, *RULE_METHODS[2:]) if with_otava or m != "Otava"]

    def count(n: int) -> int:
        return max(1, round(n * args.scale))

    tasks = []
    for cv in cvs:
        for s in SCENARIOS:
            total = count(args.null_series if s.kind == "null" else args.change_series)
            cp_total = min(total, count(args.cp_null_series if s.kind == "null" else args.cp_change_series))
            chunk = max(1, total // (4 * args.jobs))
            for first in range(0, total, chunk):
                tasks.append(Task(s, cv, first, min(chunk, total - first), args.seed, cp_total, with_otava))
    started = time.perf_counter()
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(run_task, tasks))
    else:
        results = [run_task(t) for t in tasks]
    wall = time.perf_counter() - started
    table, met = report(results, methods, cvs)
    windows = sum(r.windows for r in results)
    identical = sum(r.identical for r in results)
    print(f"bench/detection_quality.py --seed {args.seed} --scale {args.scale}: {wall:.0f} s on {args.jobs} processes")
    print(
        f"series per scenario and CV: null {count(args.null_series)} (change points: "
        f"{min(count(args.null_series), count(args.cp_null_series))}), changes {count(args.change_series)} "
        f"(change points: {min(count(args.change_series), count(args.cp_change_series))})"
    )
    if with_otava:
        print(f"Otava: {OTAVA}; dlperf's change points and Otava's identical on {identical} of {windows} windows")
    else:
        print(f"Otava: {why_not}")
    seconds = {m: sum(r.seconds[m] for r in results) for m in methods}
    nights = {m: sum(r.nights[m] for r in results) for m in methods}
    print(
        "CPU per judged night: "
        + ", ".join(f"{m} {1e6 * seconds[m] / nights[m]:.0f} µs" for m in methods if nights[m])
        + f"; {sum(seconds.values()):.0f} CPU-seconds in all"
    )
    print()
    print(table)
    print(f"adopted ({ADOPTED}) meets the 1% CV goal: {'yes' if met else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
