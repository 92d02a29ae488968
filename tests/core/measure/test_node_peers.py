"""The bad node named (dlperf_core.measure.node_peers), pure: constructed figures (one node 10 % slower among four is
named, and only it), many seeded noise-only sweeps that name none, two nodes judged against their own history,
one node against nothing, the policy's setting. Planning a sweep: tests/core/plan/test_per_node.py; on stand-in
nodes: tests/e2e/test_node_sweep.py."""

from __future__ import annotations

import random
from datetime import date, timedelta

import pytest

from dlperf_core.measure.node_peers import (
    FRACTION_ENV,
    Z_ENV,
    NodeFigure,
    NodePolicy,
    NodeScores,
    good_night_medians,
    node_figures,
    score_history,
    score_sweeps,
    sweep_label,
)
from dlperf_core.measure.regression import NightlyRow

SWEEP = "pt/resnet50/amp/b256/1n8g+args=1f0c9a2e"


def figures(*values: float, sweep: str = SWEEP) -> list[NodeFigure]:
    key = sweep.replace("+args=", "+node={}+args=")
    return [NodeFigure(sweep, f"gpu{i:02d}", key.format(f"gpu{i:02d}"), v) for i, v in enumerate(values)]


def slow_nodes(scores: NodeScores) -> list[str]:
    return [s.node for s in scores.slow]


def test_one_node_ten_percent_slower_among_four_is_named_and_only_it():
    scores = score_sweeps(figures(1000.0, 1008.0, 900.0, 995.0))
    assert slow_nodes(scores) == ["gpu02"]
    slow = scores.slow[0]
    assert slow.basis == "peers" and slow.count == 3 and slow.reference == 1000.0  # the other three's median
    assert slow.change == pytest.approx(-0.10) and slow.robust_z < -3.5
    line = slow.describe()
    assert line.startswith("slow node: node gpu02, pt resnet50 amp b256 1n8g: 900.00 samples/s, 10.0% slower")
    assert "the median of its 3 peers (1000.00" in line
    others = [s for s in scores.scores if not s.slow]
    assert all(s.reference is not None and abs(s.change or 0) < 0.05 for s in others)  # its slowness is not theirs


def test_the_fraction_and_the_spread_both_decide():
    assert slow_nodes(score_sweeps(figures(1000.0, 1001.0, 999.0, 960.0))) == []  # 4 %: under the 5 % threshold
    assert slow_nodes(score_sweeps(figures(1000.0, 1001.0, 999.0, 960.0), policy=NodePolicy(slower_than=0.03))) == [
        "gpu03"
    ]
    # healthy nodes 8 % apart among themselves: a node 9 % below their median stands out of nothing
    assert slow_nodes(score_sweeps(figures(1000.0, 1080.0, 920.0, 1040.0, 960.0, 910.0))) == []
    # three nodes: the other two decide; a fast node is never named
    assert slow_nodes(score_sweeps(figures(1000.0, 1002.0, 700.0))) == ["gpu02"]
    assert slow_nodes(score_sweeps(figures(1000.0, 1002.0, 1300.0))) == []


def test_every_sweep_of_a_run_is_scored_on_its_own():
    run = figures(1000.0, 1003.0, 998.0) + figures(50.0, 51.0, 40.0, sweep="pt/resnet50/fp32/b64/1n1g+args=aa")
    scores = score_sweeps(run)
    assert scores.sweeps == (SWEEP, "pt/resnet50/fp32/b64/1n1g+args=aa") and scores.nodes == ("gpu00", "gpu01", "gpu02")
    assert [(s.node, s.label) for s in scores.slow] == [("gpu02", "pt resnet50 fp32 b64 1n1g")]


def noisy_sweep(rng: random.Random, nodes: int, cv: float, slow: int | None = None, by: float = 0.10) -> list[float]:
    return [1000.0 * (1 + rng.gauss(0, cv)) * ((1 - by) if i == slow else 1) for i in range(nodes)]


def test_noise_only_sweeps_name_no_node():
    """2,000 seeded sweeps of 3 to 16 identical nodes whose figures scatter with a CV of 1 % (healthy GPUs of one model
    agree within 1-2 %): no node is named. (bench/node_sweeps.py prints the rate at other spreads.)"""
    rng = random.Random(36)
    named = [
        slow_nodes(score_sweeps(figures(*noisy_sweep(rng, rng.randint(3, 16), 0.01)))) for _ in range(2000)
    ]  # fmt: skip
    assert sum(map(len, named)) == 0


def test_a_node_ten_percent_slower_is_named_in_nearly_every_noisy_sweep():
    rng = random.Random(7)
    found = wrong = 0
    for _ in range(1000):
        n = rng.randint(3, 16)
        slow = rng.randrange(n)
        named = slow_nodes(score_sweeps(figures(*noisy_sweep(rng, n, 0.01, slow))))
        found += f"gpu{slow:02d}" in named
        wrong += len([node for node in named if node != f"gpu{slow:02d}"])
    assert found >= 990 and wrong == 0


NIGHT = date(2026, 3, 1)


def nights(case_key: str, values: list[float], **row) -> list[NightlyRow]:
    fields = dict(n=3, n_failed=0, run_status="success") | row
    return [
        NightlyRow(case_key, NIGHT + timedelta(days=i), f"scheduled__{i}", v, **fields) for i, v in enumerate(values)
    ]


def test_two_nodes_are_each_judged_against_their_own_history():
    a, b = figures(800.0, 1000.0)
    past = {
        a.case_key: good_night_medians(nights(a.case_key, [1000.0, 1004.0, 998.0, 1001.0, 1003.0, 999.0]), a.case_key),
        b.case_key: good_night_medians(nights(b.case_key, [1002.0, 999.0, 1000.0, 1001.0, 998.0, 1003.0]), b.case_key),
    }
    scores = score_sweeps([a, b], past)
    assert slow_nodes(scores) == ["gpu00"]
    slow = scores.slow[0]
    assert slow.basis == "history" and slow.count == 6 and slow.reference == pytest.approx(1000.5)
    assert "than its own last 6 nights" in slow.describe()
    assert [s.basis for s in scores.scores] == ["history", "history"] and not scores.scores[1].slow


def test_two_nodes_without_enough_history_get_no_verdict():
    a, b = figures(800.0, 1000.0)
    scores = score_sweeps([a, b], {a.case_key: [1000.0, 1001.0]})
    assert slow_nodes(scores) == [] and all(s.reference is None for s in scores.scores)
    assert "which has 2 good nights (a verdict needs 5)" in scores.scores[0].note
    assert "0 good nights" in scores.scores[1].note and scores.scores[1].note in scores.scores[1].describe()


def test_a_nodes_history_is_its_good_nights_only_and_not_tonight():
    key = figures(1.0)[0].case_key
    rows = nights(key, [900.0, 1000.0, 1010.0])
    rows += [NightlyRow(key, NIGHT + timedelta(days=9), "scheduled__9", 500.0, 1, 1, "success")]  # a failed repeat
    rows += [NightlyRow(key, NIGHT + timedelta(days=8), "scheduled__8", 700.0, 2, 0, "running")]  # not finished
    rows += [NightlyRow("other" + key, NIGHT, "scheduled__0", 5.0, 3, 0, "success")]  # another node's
    assert good_night_medians(reversed(rows), key) == [900.0, 1000.0, 1010.0]  # oldest first
    assert good_night_medians(rows, key, run_id="scheduled__2") == [900.0, 1000.0]  # the run judged is no history
    many = score_history(figures(990.0)[0], [1000.0] * 20 + [10.0] * 3, NodePolicy(window=3, min_nights=3))
    assert many.count == 3 and many.reference == 10.0  # the last window only


def test_one_node_is_compared_with_nothing():
    (only,) = score_sweeps(figures(123.0)).scores
    assert only.basis == "alone" and not only.slow and only.reference is None and "no peer" in only.note


def test_figures_are_the_pinned_cases_with_a_median():
    rows = [
        ("pt/resnet50/amp/b256/1n8g+node=gpu07+args=1f0c9a2e", 900.0),
        ("pt/resnet50/amp/b256/1n8g+args=1f0c9a2e", 1000.0),  # not pinned
        ("pt/resnet50/amp/b256/1n8g+node=gpu08+args=1f0c9a2e", None),  # every repeat failed
        ("pt/resnet50/amp/b256/1n8g+node=gpu09+args=1f0c9a2e", float("nan")),
        ("pt/resnet50/amp/b256/1n8g+compile+node=gpu10+args=1f0c9a2e", 950.0),
    ]
    got = node_figures(rows)
    assert [(f.node, f.sweep, f.value) for f in got] == [
        ("gpu07", "pt/resnet50/amp/b256/1n8g+args=1f0c9a2e", 900.0),
        ("gpu10", "pt/resnet50/amp/b256/1n8g+compile+args=1f0c9a2e", 950.0),
    ]
    assert sweep_label(got[1].sweep) == "pt resnet50 amp b256 1n8g +compile"
    twice = score_sweeps([*figures(1.0, 1.0, 1.0), figures(2.0)[0]])  # a node measured twice counts once
    assert len(twice.scores) == 3


def test_the_policy_and_its_deployment_setting():
    assert NodePolicy().slower_than == 0.05 and NodePolicy.from_env({}) == NodePolicy()
    assert NodePolicy.from_env({FRACTION_ENV: "0.3"}).slower_than == 0.3
    with pytest.raises(ValueError, match=f"{FRACTION_ENV}='5': give a fraction between 0 and 1"):
        NodePolicy.from_env({FRACTION_ENV: "5"})
    both = NodePolicy.from_env({FRACTION_ENV: "0.5", Z_ENV: " 2 "})
    assert (both.slower_than, both.z_threshold) == (0.5, 2.0) and "2 robust standard deviations" in both.rule()
    for bad in ("0", "-1", "nan", "three"):
        with pytest.raises(ValueError, match=f"{Z_ENV}='{bad}': give a positive number"):
            NodePolicy.from_env({Z_ENV: bad})
    with pytest.raises(ValueError, match="min_nights"):
        NodePolicy(window=3, min_nights=5)
    assert "at least 5% below its reference" in NodePolicy().rule()
    scores = score_sweeps(figures(1000.0, 1000.0, 700.0), policy=NodePolicy(slower_than=0.4))
    assert scores.slow == () and scores.slower_than == 0.4 and "40%" in scores.rule
    assert NodeScores.from_json(scores.to_json()) == scores
