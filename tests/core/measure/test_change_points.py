"""Change points (dlperf_core.measure.change_points): E-Divisive means with Otava's t-test, on constructed series; the
statistic against its definition, the test against SciPy, and one series' answer as Apache Otava 0.8.0 gave it.
How often it agrees with Otava over thousands of windows: bench/detection_quality.py (docs/benchmarks.md (j))."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from scipy import stats

from dlperf_core.measure.change_points import _Energy, change_points, student_t_pvalue, t_test


def noisy(levels: list[float], cv: float = 0.01, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [level * (1 + rng.gauss(0, cv)) for level in levels]


@pytest.mark.parametrize("seed", range(5))
def test_a_five_percent_step_is_found_at_its_first_night(seed):
    (point,) = change_points(noisy([1000.0] * 30 + [950.0] * 15, seed=seed), min_magnitude=0.02)
    assert point.index == 30
    assert point.pvalue < 1e-6 and point.mean_after < point.mean_before
    assert point.change_pct == pytest.approx(-5.0, abs=1.0) and point.mean_before == pytest.approx(1000.0, rel=0.01)


def test_two_steps_are_both_found():
    points = change_points(noisy([1000.0] * 20 + [900.0] * 20 + [1000.0] * 20, seed=3))
    assert [p.index for p in points] == [20, 40]
    assert points[0].change_pct < -8 and points[1].change_pct > 8


@pytest.mark.parametrize("seed", range(10))
def test_a_flat_noisy_series_has_none(seed):
    assert change_points(noisy([1000.0] * 60, seed=seed)) == []
    assert change_points(noisy([1000.0] * 60, cv=0.02, seed=seed), min_magnitude=0.02) == []


def test_degenerate_series():
    assert change_points([]) == change_points([5.0]) == change_points([5.0, 6.0]) == []
    assert change_points([1000.0] * 40) == []  # no spread: nothing to cut
    with pytest.raises(ValueError, match="window"):
        change_points([1.0, 2.0, 3.0], window=1)


def q_by_definition(x: list[float], start: int, tau: int, kappa: int) -> float:
    """Matteson and James' Q of ``x[start:tau]`` against ``x[tau:kappa]``, from its definition (Otava's docstring)."""
    left, right = x[start:tau], x[tau:kappa]
    n, m = len(left), len(right)
    cross = sum(abs(a - b) for a in left for b in right)
    within_l = sum(abs(a - b) for a, b in itertools.combinations(left, 2))
    within_r = sum(abs(a - b) for a, b in itertools.combinations(right, 2))
    q = 2 / (m + n) * cross
    if n > 1:
        q -= 2 * m / (m + n) / (n - 1) * within_l
    if m > 1:
        q -= 2 * n / (m + n) / (m - 1) * within_r
    return q


@pytest.mark.parametrize("seed", range(4))
def test_the_best_cut_maximises_q_as_defined(seed):
    x = noisy([10.0] * 7 + [12.0] * 6, cv=0.05, seed=seed)
    energy = _Energy(x)
    for start, end in ((0, len(x)), (2, 11), (5, 13)):
        tau, q = energy.best_cut(start, end)
        every = {(t, k): q_by_definition(x, start, t, k) for t in range(start + 1, end) for k in range(t + 1, end + 1)}
        best = max(every.values())
        assert q == pytest.approx(best, rel=1e-12)
        assert tau == min(t for (t, _), v in every.items() if math.isclose(v, best, rel_tol=1e-12))


def test_the_t_test_is_scipys_pooled_one_over_ddof_0_deviations():
    rng = random.Random(5)
    for n1, n2 in ((1, 2), (2, 2), (3, 30), (29, 2), (14, 14)):
        a = [rng.gauss(100, 3) for _ in range(n1)]
        b = [rng.gauss(97, 3) for _ in range(n2)]
        m1, m2, s1, s2, p = t_test(a, b)
        assert (m1, m2) == pytest.approx((sum(a) / n1, sum(b) / n2))
        assert s1 == pytest.approx(math.sqrt(sum((v - m1) ** 2 for v in a) / n1))
        expected = stats.ttest_ind_from_stats(m1, s1, n1, m2, s2, n2).pvalue
        assert p == pytest.approx(expected, rel=1e-9, abs=1e-15)
    assert t_test([1.0], [2.0])[4] == 1.0  # two values in all: Otava's p = 1
    assert t_test([1.0, 1.0], [2.0, 2.0])[4] == 0.0  # no spread, different means
    with pytest.raises(ValueError):
        t_test([], [1.0])


def test_the_p_value_is_students():
    for t, df in itertools.product((0.0, 0.3, 1.0, 2.5, 4.0, 8.0, 25.0), (1, 2, 5, 13, 29, 60)):
        assert student_t_pvalue(t, df) == pytest.approx(2 * stats.t.sf(t, df), rel=1e-9, abs=1e-300)
    assert student_t_pvalue(math.inf, 3) == 0.0 and student_t_pvalue(math.nan, 3) == 1.0


# A series and what apache-otava 0.8.0's otava.analysis.compute_change_points(series, window_len, max_pvalue) answered
# (installed with pip --no-deps beside numpy 2.4.6 and scipy 1.17.1): indices and p-values, the same for window_len
# 50, 30 (max_pvalue 0.01) and 20.
SERIES = [
    1008.66, 1008.04, 980.22, 998.53, 1005.68, 1004.27, 989.73, 992.44, 1002.62, 987.68, 997.91, 983.03, 1000.09,
    986.71, 1000.87, 1013.77, 1014.14, 1011.81, 982.55, 1005.71, 994.03, 986.15, 1001.88, 1007.38, 1022.84, 957.22,
    973.02, 923.94, 956.19, 959.67, 953.41, 970.33, 957.22, 970.25, 970.69, 949.51, 958.1, 959.0, 957.78, 951.15,
    951.45, 964.55, 950.32, 954.22, 968.49, 1018.02, 1010.01, 996.32, 987.51, 1011.27, 1009.43, 1020.53, 1020.32,
    1004.84, 1007.72, 1009.74, 1010.85, 1015.24, 1025.04, 1014.77, 1003.52, 996.96, 991.9, 992.17, 992.83, 1000.81,
    1010.58, 990.78, 989.15, 1003.02,
]  # fmt: skip
OTAVA_ANSWER = [(25, 3.057088316313076e-16), (45, 4.093334402003293e-17), (61, 0.0005787559643964146)]


@pytest.mark.parametrize(("window", "max_pvalue"), [(50, 0.001), (30, 0.01), (20, 0.001)])
def test_otavas_answer_on_a_series(window, max_pvalue):
    points = change_points(SERIES, window=window, max_pvalue=max_pvalue)
    assert [p.index for p in points] == [i for i, _ in OTAVA_ANSWER]
    for point, (_, p) in zip(points, OTAVA_ANSWER, strict=True):
        assert point.pvalue == pytest.approx(p, rel=1e-9)
    assert change_points(SERIES, min_magnitude=0.03)[-1].index == 45  # 61 is a 1.6% change: left out
