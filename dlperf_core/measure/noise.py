"""When a configuration's figures cannot be trusted: the *unreliable* rule, and what a speedup is against.

A configuration here is one case of one run over its repeats (a row of the ``case_summary`` view). It is
**unreliable** when any of these holds (the reason lists each, in this order, joined by ``; ``):

* its **CV** across the ok repeats (sample standard deviation / mean) is above :data:`MAX_RELIABLE_CV`;
* its **speedup** is above its **device count** (nodes x GPUs per node): super-linear scaling is not
  believable, it says the 1n1g baseline or this case was measured badly (e.g. MXNet's CPU stand-in 1n1g shares
  its two cores with its own parameter server, docs/benchmarks.md);
* it has a **single repeat** (:data:`SINGLE_REPEAT`): with one ok repeat there is no CV to judge it by;
* it was **oversubscribed**: its ranks had no cores of their own (:mod:`dlperf_core.cluster.cpu_placement`, whose text
  is the reason); it then has no speedup at all;
* it was **throttled**: a GPU showed a throttling clock-event reason (HW slowdown, SW or HW thermal slowdown, HW power
  brake) in an ok repeat's measured window (:mod:`dlperf_core.cluster.clock_events`; :data:`THROTTLED` and which GPUs
  and reasons). Its figure says how hot or starved the node was; it is also left out of regression baselines.

A speedup is against a **baseline**, the 1n1g of the same configuration: that of the same run, or where the run
has none, that of the latest nightly (scheduled) run that started at or before it (:data:`BASELINE_OF`); every
view, report and page names the baseline's run beside the speedup. An unknown speedup (no baseline) flags
nothing by itself. The comparisons are strict (a CV of exactly 0.10, a speedup of exactly the device count, is
reliable).

The same rule, with the same threshold and the same wording of the reason, is computed in SQL by the
``case_summary`` view (migration 0012, the throttling since 0013; 0012 writes the threshold into its SQL as a literal; a test checks that
literal against :data:`MAX_RELIABLE_CV`, so changing the constant needs a new migration). Pure: no I/O.
"""

from __future__ import annotations

import math

MAX_RELIABLE_CV = 0.10
"""Largest CV (stdev / mean of the ok repeats' throughput) of a reliable configuration.

Why 0.10: on a quiet GPU two runs of the same training agree within about 0.1 % (the H100 reference logs of
docs/benchmarks.md (f): bare and through dlperf, 0.999 and 1.001), while a busy shared machine gives 6-14 %
(the 2-core development VM, docs/benchmarks.md (a)). With a CV of 10 % and the 2-5 repeats a suite takes, the median of the repeats is
itself uncertain by roughly 5-9 %, and a speedup (the ratio of two such medians) by about +-10 %: the gap between
ideal scaling and 90 % efficiency. Above that the speedup plot cannot tell good scaling from bad, so the figure
is flagged rather than plotted as if it were a measurement. A threshold of 10x the quiet-GPU noise leaves
ordinary run-to-run jitter unflagged; the example that prompted the rule (1n1g repeats of 59 and 19 samples/s)
has a CV of 0.71."""

SINGLE_REPEAT = "single repeat"
"""The flag of a configuration with one ok repeat."""

THROTTLED = "throttled: "
"""What comes before a throttled configuration's GPUs and reasons in its reason (``throttled: node0 GPU 1: HW
thermal slowdown (0x40)``)."""

BASELINE_OF = ("this run", "latest nightly")
"""Where a speedup's 1n1g comes from (``case_summary.baseline_of``): the same run, else the latest nightly."""

BASELINE_RULE = (
    "a speedup is against the 1n1g of the same configuration in the same run, or, where that run has none, in the "
    "latest nightly run that started before it (named beside the speedup); an oversubscribed case has none"
)
"""What a speedup is against, in one line, for the pages and reports that show it."""

UNRELIABLE_RULE = (
    f"unreliable: CV of the ok repeats (stdev/mean) > {MAX_RELIABLE_CV:.2f} ({MAX_RELIABLE_CV:.0%}), "
    "or speedup vs 1n1g > the number of devices (super-linear), or a single repeat (no CV), "
    "or oversubscribed (more ranks than cores on their host: no speedup), "
    "or throttled (GPU clocks held down by HW slowdown, thermal slowdown or a power brake while measured)"
)
"""The rule in one line, for the pages and reports that show the flag."""

UNRELIABLE_LEGEND = f"unreliable (CV > {MAX_RELIABLE_CV:.0%}, speedup > devices, a single repeat or throttled)"
"""The legend entry of an unreliable point in a plot (an oversubscribed case has no speedup to plot)."""


def _number(value: object) -> float | None:
    """``value`` as a float, or None when it is unknown (None, NaN, pandas' NA)."""
    if value is None:
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def unreliable_reason(
    cv: float | None,
    speedup: float | None,
    devices: int | None,
    ok_repeats: int | None = None,
    oversubscription: str | None = None,
    throttled: str | None = None,
) -> str | None:
    """Why a configuration is unreliable, as a short string (``"CV 0.71 > 0.10"``, ``"speedup 4.40 > 2
    devices"``, ``"single repeat"``, the oversubscription's text; those that hold joined by ``"; "``), or None
    when it is reliable (see the module docstring).

    ``cv``: stdev / mean of the ok repeats (None or NaN with fewer than two); ``speedup``: against its baseline
    (None or NaN without one); ``devices``: nodes x GPUs per node; ``ok_repeats``: how many repeats are ok (None:
    not known); ``oversubscription``: :attr:`dlperf_core.cluster.cpu_placement.CpuPlacement.oversubscription` (then the
    speedup is not counted: there is none); ``throttled``: which GPUs were throttled and why (``results.throttled``).
    Numbers have two decimals, as the ``case_summary`` view writes them."""
    reasons = []
    cv_, devices_ = _number(cv), _number(devices)
    speedup_ = None if oversubscription else _number(speedup)
    if cv_ is not None and cv_ > MAX_RELIABLE_CV:
        reasons.append(f"CV {cv_:.2f} > {MAX_RELIABLE_CV:.2f}")
    if speedup_ is not None and devices_ is not None and speedup_ > devices_:
        reasons.append(f"speedup {speedup_:.2f} > {int(devices_)} devices")
    if ok_repeats == 1:
        reasons.append(SINGLE_REPEAT)
    if oversubscription:
        reasons.append(oversubscription)
    if throttled:
        reasons.append(THROTTLED + throttled)
    return "; ".join(reasons) or None
