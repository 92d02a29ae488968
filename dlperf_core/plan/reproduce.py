"""The trigger form that plans a stored case once more (``dlperf reproduce --run``): :func:`reproduce_form`, from the
case's stored configuration and the suite it was planned from."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dlperf_core.errors import ConfigError
from dlperf_core.frameworks import ADAPTERS
from dlperf_core.plan.cases import configuration_differences, expand_cases
from dlperf_core.plan.form_overrides import apply_form, with_batch_override, with_compile_override
from dlperf_core.plan.suite import Suite
from dlperf_core.plan.trigger_form import TriggerForm


def reproduce_form(suite: Suite, configuration: Mapping[str, Any], case_key: str) -> TriggerForm:
    """The trigger form (besides suite, runtime and inventory) that plans the stored case ``case_key``, whose
    configuration (``results.configuration``, :attr:`dlperf_core.model.Case.configuration`) is ``configuration``,
    once more from ``suite``: that case only, one repeat, its batch size and its torch.compile mode (where the
    framework has one). Refused (ConfigError, saying why) when the suite cannot give that configuration back: each
    configuration of the suite with the same fields and options is named with how it differs from the stored
    one."""
    framework = configuration.get("framework")
    adapter = ADAPTERS.get(framework) if isinstance(framework, str) else None
    if adapter is None:
        raise ConfigError(suite.source, [f"framework {framework!r} of {case_key} is not one dlperf knows"])
    form = TriggerForm(
        case_keys=(case_key,),
        repeats=1,
        batch_size=int(configuration["batch_size_per_device"]),
        compile=("compiled" if configuration.get("compile") else "eager") if adapter.supports_compile else "suite",
    )
    try:
        apply_form(suite, form)
    except ConfigError as exc:
        overridden = with_compile_override(with_batch_override(suite, form.batch_size), form.compile)
        near = [case for case, _ in expand_cases(overridden) if _same_fields(case.configuration, configuration)]
        why = [
            f"the suite's {case.key} differs from the stored configuration in "
            + "; ".join(configuration_differences(dict(configuration), case.configuration))
            for case in near
        ]
        raise ConfigError(exc.source, [*exc.problems, *why]) from exc
    return form


def reproduce_params(suite: Suite, configuration: Mapping[str, Any], case_key: str) -> dict[str, Any]:
    """The trigger params of :func:`reproduce_form` (:meth:`TriggerForm.to_params`: only what differs from the form's
    defaults), e.g. ``{"case_keys": [key], "repeats": 1, "batch_size": 32, "compile": "eager"}``."""
    return reproduce_form(suite, configuration, case_key).to_params()


def _same_fields(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two configurations have the same framework, model, precision, batch, topology, options and
    compile (what a case key says in words)."""
    names = ("framework", "model", "precision", "batch_size_per_device", "nodes", "gpus_per_node", "options", "compile")
    return all(a.get(n) == b.get(n) for n in names)
