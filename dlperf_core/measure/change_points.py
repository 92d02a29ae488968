"""Change points in a series of nightly medians: E-Divisive means with a t-test significance check.

dlperf's own implementation of the method of Apache Otava (incubating) 0.8.0, ``otava.analysis.compute_change_points``
(the "Hunter" paper, Fleming et al. 2023, https://doi.org/10.1145/3578244.3583719, over the E-Divisive of Matteson and
James 2014, https://doi.org/10.48550/arXiv.1306.4933), written again here so that the service does not depend on
Otava (its wheel pins numpy and scipy releases older than dlperf's lock). ``bench/detection_quality.py`` runs both on
the same series and prints how often they agree.

The method, as Otava computes it:

1. **Split.** Sliding windows of ``window`` values (each starting half a window after the previous one, or at the
   last change point found in it) are each cut divisively: the cut is the ``tau`` (with an end ``kappa``) that
   maximises the energy-distance statistic ``Q(tau, kappa)`` between ``x[start:tau]`` and ``x[tau:kappa]``
   (:func:`_best_cut`); the cut is kept when a two-sample t-test between its two sides gives a p-value at most
   the *first-pass* threshold (10 x ``max_pvalue`` below 0.05), and the pieces are cut again until a cut is not
   significant. Every cut of every window is a *weak* change point.
2. **Merge.** The weak change points' statistics are recomputed between their neighbours over the whole series;
   then, one at a time, the one with the largest p-value is dropped while that is at least ``max_pvalue``, and
   the one with the smallest relative change while that is at most ``min_magnitude`` (its neighbours' statistics
   recomputed after each drop).

The significance test is Otava's: Student's two-sample t-test with pooled variance (SciPy's
``ttest_ind_from_stats`` with its default ``equal_var=True``) over the two sides' means and their standard
deviations computed with ``ddof=0`` (NumPy's ``np.std``); a side of one value has a deviation of 0. Everything is
deterministic (no permutation test), and the p-value is computed here in pure Python (the regularised incomplete
beta function, :func:`student_t_pvalue`), so this module imports neither NumPy nor SciPy.

Pure: numbers in, :class:`ChangePoint` out. Cost: about ``window**2 / 2`` evaluations of ``Q`` per cut tried.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

WINDOW = 50
"""Otava's default ``window_len``."""

MAX_PVALUE = 0.001
"""Otava's default ``max_pvalue``."""


@dataclass(frozen=True)
class ChangePoint:
    """A change point: ``index`` is the first value of the new level; the statistics compare the segment before it
    with the segment after it (each up to the neighbouring change point)."""

    index: int
    qhat: float  # the energy statistic of the cut that found it
    mean_before: float
    mean_after: float
    std_before: float  # ddof=0
    std_after: float
    pvalue: float

    @property
    def forward_change(self) -> float:
        """Relative change from before to after (``mean_after / mean_before - 1``; 0 when the mean before is 0)."""
        return self.mean_after / self.mean_before - 1.0 if self.mean_before != 0 else 0.0

    @property
    def backward_change(self) -> float:
        """Relative change from after to before (0 when the mean after is 0)."""
        return self.mean_before / self.mean_after - 1.0 if self.mean_after != 0 else 0.0

    @property
    def magnitude(self) -> float:
        """The larger of the two relative changes' absolute values (what ``min_magnitude`` is compared with)."""
        return max(abs(self.forward_change), abs(self.backward_change))

    @property
    def change_pct(self) -> float:
        """The forward change in percent."""
        return self.forward_change * 100.0


# --------------------------------------------------------------------------- the t-test


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz; Numerical Recipes' ``betacf``)."""
    tiny, eps = 1e-300, 1e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function ``I_x(a, b)``."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def student_t_pvalue(t: float, df: float) -> float:
    """The two-sided p-value of ``t`` under Student's t distribution with ``df`` degrees of freedom."""
    if math.isnan(t):
        return 1.0
    if math.isinf(t):
        return 0.0
    return min(1.0, _betainc(df / 2.0, 0.5, df / (df + t * t)))


@dataclass(frozen=True)
class _Sides:
    mean_before: float
    mean_after: float
    std_before: float
    std_after: float
    pvalue: float


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    mean = math.fsum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    return mean, math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))


def t_test(before: Sequence[float], after: Sequence[float]) -> tuple[float, float, float, float, float]:
    """(mean before, mean after, std before, std after, p-value): Otava's test of two segments (module docstring).
    Two values in all: p = 1. No spread on either side: p = 0 when the means differ, else 1."""
    if not before or not after:
        raise ValueError("a t-test needs values on both sides")
    m1, s1 = _mean_std(before)
    m2, s2 = _mean_std(after)
    n1, n2 = len(before), len(after)
    if n1 + n2 <= 2:
        return m1, m2, s1, s2, 1.0
    df = n1 + n2 - 2
    pooled = ((n1 - 1) * s1 * s1 + (n2 - 1) * s2 * s2) / df
    denominator = math.sqrt(pooled * (1.0 / n1 + 1.0 / n2))
    if denominator == 0.0:
        return m1, m2, s1, s2, (1.0 if m1 == m2 else 0.0)
    return m1, m2, s1, s2, student_t_pvalue((m1 - m2) / denominator, df)


# --------------------------------------------------------------------------- E-Divisive


class _Energy:
    """The pairwise distances of one window's values and the within-segment sums ``W[a][b]`` (the sum of
    ``|x_i - x_k|`` over ``a <= i < k < b``), from which every ``Q`` of a cut is a few additions."""

    def __init__(self, values: Sequence[float]) -> None:
        n = len(values)
        self.n = n
        within = [[0.0] * (n + 1) for _ in range(n + 1)]
        for a in range(n - 1, -1, -1):
            row = 0.0  # sum of |x_a - x_k| for a < k < b
            for b in range(a + 1, n + 1):
                if b - 1 > a:
                    row += abs(values[a] - values[b - 1])
                within[a][b] = within[a + 1][b] + row
        self.within = within

    def best_cut(self, start: int, end: int) -> tuple[int, float]:
        """(tau, Q) maximising ``Q(tau, kappa)`` over ``start < tau < kappa <= end`` (the first maximum, ``tau`` then
        ``kappa`` ascending). With ``n = tau - start`` and ``m = kappa - tau`` values on the two sides,
        ``Q = (2 cross - 2 m / (n - 1) W_x - 2 n / (m - 1) W_y) / (m + n)``, a within-sum term left out for a side
        of one value."""
        w = self.within
        w_start = w[start]
        best_tau, best_q = start + 1, -math.inf
        for tau in range(start + 1, end):
            n = tau - start
            w_tau = w[tau]
            w_x = w_start[tau]
            per_m = 2.0 * w_x / (n - 1) if n > 1 else 0.0
            for kappa in range(tau + 1, end + 1):
                m = kappa - tau
                w_y = w_tau[kappa]
                q = 2.0 * (w_start[kappa] - w_x - w_y) - m * per_m
                if m > 1:
                    q -= 2.0 * n * w_y / (m - 1)
                q /= m + n
                if q > best_q:
                    best_tau, best_q = tau, q
        return best_tau, best_q


def _intervals(indices: Sequence[int], n: int) -> list[tuple[int, int]]:
    """The segments ``[start, stop)`` between sorted change point indices, empty ones left out."""
    bounds = [0, *indices, n]
    return [(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1) if bounds[i] != bounds[i + 1]]


def _point(
    index: int, qhat: float, values: Sequence[float], before: tuple[int, int], after: tuple[int, int]
) -> ChangePoint:
    m1, m2, s1, s2, p = t_test(values[before[0] : before[1]], values[after[0] : after[1]])
    return ChangePoint(index, qhat, m1, m2, s1, s2, p)


def _around(index: int, intervals: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], tuple[int, int]]:
    """The two segments a change point at ``index`` compares: the neighbours that meet at it (an existing change
    point), else the two halves of the segment it cuts."""
    for i, (start, stop) in enumerate(intervals):
        if stop == index:
            return (start, stop), intervals[i + 1]
        if start < index < stop:
            return (start, index), (index, stop)
    raise ValueError(f"index {index} is in no segment of {list(intervals)}")


def e_divisive(values: Sequence[float], max_pvalue: float) -> list[ChangePoint]:
    """Cut ``values`` divisively while the best cut's t-test p-value is at most ``max_pvalue`` (step 1 of the module
    docstring, over one window), indices into ``values``, sorted."""
    energy = _Energy(values)
    found: list[ChangePoint] = []
    while True:
        intervals = _intervals([c.index for c in found], len(values))
        best: tuple[int, float] | None = None
        for start, stop in intervals:
            if stop - start > 1:
                cut = energy.best_cut(start, stop)
                if best is None or cut[1] > best[1]:
                    best = cut
        if best is None:
            return found
        before, after = _around(best[0], intervals)
        point = _point(best[0], best[1], values, before, after)
        if point.pvalue > max_pvalue:
            return found
        found = sorted([*found, point], key=lambda c: c.index)


def _first_pass(max_pvalue: float) -> float:
    """Otava's threshold for the split step's weak change points."""
    if max_pvalue < 0.05:
        return max_pvalue * 10
    return max_pvalue * 2 if max_pvalue < 0.5 else max_pvalue


def _restat(points: Sequence[ChangePoint], values: Sequence[float]) -> list[ChangePoint]:
    """Each change point's statistics between its neighbours (or the series' ends)."""
    intervals = _intervals([c.index for c in points], len(values))
    return [_point(c.index, c.qhat, values, *_around(c.index, intervals)) for c in points]


def split(
    values: Sequence[float], window: int = WINDOW, max_pvalue: float = _first_pass(MAX_PVALUE)
) -> list[ChangePoint]:
    """The weak change points of ``values``: :func:`e_divisive` over sliding windows, their statistics then taken
    over the whole series."""
    if window < 2:
        raise ValueError(f"window must be at least 2, got {window}")
    n, step, start = len(values), window // 2, 0
    found: dict[int, ChangePoint] = {}
    while start < n:
        end = min(start + window, n)
        new = [
            ChangePoint(c.index + start, c.qhat, c.mean_before, c.mean_after, c.std_before, c.std_after, c.pvalue)
            for c in e_divisive(values[start:end], max_pvalue)
        ]
        start = max(new[-1].index if new else 0, start + step)
        for point in new:
            found.setdefault(point.index, point)
    return _restat(sorted(found.values(), key=lambda c: c.index), values)


def merge(
    points: Sequence[ChangePoint], values: Sequence[float], max_pvalue: float, min_magnitude: float
) -> list[ChangePoint]:
    """Drop weak change points until every one left has a p-value under ``max_pvalue`` and a relative change over
    ``min_magnitude`` (step 2 of the module docstring)."""
    kept = list(points)
    while kept:
        weakest = max(kept, key=lambda c: c.pvalue)
        if weakest.pvalue < max_pvalue:
            weakest = min(kept, key=lambda c: c.magnitude)
            if weakest.magnitude > min_magnitude:
                return kept
        at = kept.index(weakest)
        del kept[at]
        intervals = _intervals([c.index for c in kept], len(values))
        for i in (at, at + 1):
            if 0 <= i < len(kept):
                c = kept[i]
                kept[i] = _point(c.index, c.qhat, values, *_around(c.index, intervals))
    return kept


def change_points(
    values: Sequence[float], *, window: int = WINDOW, max_pvalue: float = MAX_PVALUE, min_magnitude: float = 0.0
) -> list[ChangePoint]:
    """The change points of ``values`` (oldest first), as ``otava.analysis.compute_change_points(values, window_len,
    max_pvalue, min_magnitude)[0]`` finds them (module docstring)."""
    values = [float(v) for v in values]
    return merge(split(values, window, _first_pass(max_pvalue)), values, max_pvalue, min_magnitude)
