"""From a case run to figures: the measurement, efficiency (MFU, energy), the unreliable rule, regressions, comparisons of runs, where a figure came from, and the max batch size search."""


def __getattr__(name: str) -> object:
    """``dlperf_core.measure.Measurement``, the class path an older dlperf's XCom names (``dlperf_core/measure.py``
    became this package; the class is in :mod:`dlperf_core.measure.measurement`)."""
    if name == "Measurement":
        from dlperf_core.measure.measurement import Measurement

        return Measurement
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
