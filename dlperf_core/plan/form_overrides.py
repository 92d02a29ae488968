"""What a trigger form does to the suite it picks: the checks of its values against that suite and the overrides it
applies (batch size per device, torch.compile), all before any work (:func:`apply_form`).

The form offers the union over every suite found (:mod:`dlperf_core.plan.form_choices`), so a value valid for one suite
can still be wrong for the suite picked: :func:`check_trigger` refuses it, naming what that suite has.
"""

from __future__ import annotations

from dlperf_core.cluster.inventory import Inventory
from dlperf_core.errors import ConfigError
from dlperf_core.frameworks import ADAPTERS
from dlperf_core.plan.cases import PlanFilters, missing_case_keys
from dlperf_core.plan.form_choices import FORM_SOURCE, MAX_REPEATS, BatchBounds, choices_for
from dlperf_core.plan.suite import Suite
from dlperf_core.plan.trigger_form import COMPILE_MODES, TriggerForm


def with_batch_override(suite: Suite, batch_size: int | None, bounds: BatchBounds | None = None) -> Suite:
    """``suite`` with every benchmark at ``batch_size`` per device (``None``/0: unchanged).
    Refuses a value outside ``bounds`` (default: 1 .. :data:`~dlperf_core.plan.form_choices.MAX_BATCH_PER_DEVICE` or the
    suite's largest)."""
    if not batch_size:
        return suite
    if bounds is None:
        bounds = choices_for(suite, _unbounded_inventory(suite)).batch
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, int)
        or not (bounds.minimum <= batch_size <= bounds.maximum)
    ):
        raise ConfigError(
            FORM_SOURCE,
            [f"batch_size: must be an integer from {bounds.minimum} to {bounds.maximum}, got {batch_size!r}"],
        )
    benches = tuple(b.model_copy(update={"batch_size_per_device": batch_size}) for b in suite.benchmarks)
    return suite.model_copy(update={"batch_size_per_device": batch_size, "benchmarks": benches})


def with_compile_override(suite: Suite, mode: str | None) -> Suite:
    """``suite`` with the trigger form's torch.compile choice applied to every benchmark whose framework can
    compile (the others run as they are). Refuses an unknown choice, and "compiled" or "both" for a suite
    with nothing that can compile."""
    mode = mode or "suite"
    if mode not in COMPILE_MODES:
        raise ConfigError(FORM_SOURCE, [f"compile: must be one of {', '.join(COMPILE_MODES)}, got {mode!r}"])
    modes = COMPILE_MODES[mode]
    if modes is None:
        return suite
    able = [b for b in suite.benchmarks if ADAPTERS[b.framework].supports_compile]
    if True in modes and not able:
        frameworks = ", ".join(sorted({b.framework for b in suite.benchmarks}))
        raise ConfigError(FORM_SOURCE, [f"compile: {mode}: nothing in suite {suite.name!r} can compile ({frameworks})"])
    benches = tuple(b.model_copy(update={"compile": modes}) if b in able else b for b in suite.benchmarks)
    return suite.model_copy(update={"benchmarks": benches})


def _unbounded_inventory(suite: Suite) -> Inventory:
    """An inventory large enough for every topology of ``suite`` (for choices that ignore fit)."""
    topologies = [t for b in suite.benchmarks for t in (b.topologies or suite.topologies)] or list(suite.topologies)
    nodes = max(t.nodes for t in topologies)
    gpus = max(t.gpus_per_node for t in topologies)
    return Inventory.model_validate(
        {"name": "any", "nodes": [{"name": f"n{i}", "gpus": gpus, "accelerator": "nvidia"} for i in range(nodes)]}
    )


def check_trigger(suite: Suite, filters: PlanFilters) -> None:
    """Refuse filter values the chosen suite does not have, naming each and what the suite offers.

    The form lists the union over all suites, so a value valid for one suite can still be wrong for the
    suite picked; this catches it at planning instead of silently dropping it. Topologies larger than
    the inventory are left to :func:`dlperf_core.plan.cases.check_fits`, which names the nodes at fault."""
    offered = choices_for(suite, _unbounded_inventory(suite))
    problems = []
    for field in ("frameworks", "models", "precisions", "topologies"):
        wanted = getattr(filters, field)
        have = getattr(offered, field)
        unknown = [v for v in wanted if v not in have]
        if unknown:
            problems.append(
                f"{field}: {', '.join(map(str, unknown))} not in suite {suite.name!r} "
                f"(it has {', '.join(have) or 'none'})"
            )
    if filters.repeats is not None and not (1 <= filters.repeats <= MAX_REPEATS):
        problems.append(f"repeats: must be from 1 to {MAX_REPEATS}, got {filters.repeats}")
    if problems:
        raise ConfigError(FORM_SOURCE, problems)


def apply_form(suite: Suite, form: TriggerForm) -> Suite:
    """The trigger form applied to ``suite``, every value checked before any work: the filters must be values
    the suite has (:func:`check_trigger`), then the batch size and torch.compile overrides, then ``case_keys``
    (:attr:`PlanFilters.case_keys`) must name cases of the suite as those overrides leave it
    (:func:`dlperf_core.plan.cases.missing_case_keys`). Returns the suite with the overrides."""
    filters = form.filters()
    check_trigger(suite, filters)
    suite = with_batch_override(suite, form.batch_size or None)
    suite = with_compile_override(suite, form.compile)
    if problems := missing_case_keys(suite, filters):
        raise ConfigError(FORM_SOURCE, problems)
    return suite
