"""The trigger form's names where they were when one module held the form's three jobs; each now lives in the
module of its job:

* :mod:`dlperf_core.trigger_form`: the form itself, :class:`~dlperf_core.trigger_form.TriggerForm` (its keys, their
  parsing and how the DAG's Params show them);
* :mod:`dlperf_core.form_choices`: the choices the form offers (:func:`discover_choices`, :class:`FormChoices`) and
  their cache;
* :mod:`dlperf_core.form_overrides`: what a form does to the suite it picks (:func:`apply_form`, the batch size and
  torch.compile overrides, :func:`check_trigger`);
* :mod:`dlperf_core.reproduce`: the form that plans a stored case once more (:func:`reproduce_params`).
"""

from __future__ import annotations

from dlperf_core.form_choices import (
    CACHE_FORMAT,
    FORM_SOURCE,
    MAX_BATCH_PER_DEVICE,
    MAX_REPEATS,
    STANDARD_TOPOLOGIES,
    BatchBounds,
    FormChoices,
    choices_cache_path,
    choices_for,
    discover_choices,
    fitting_topologies,
    merge_choices,
    registry_choices,
    topology_key,
    topology_label,
)
from dlperf_core.form_overrides import apply_form, check_trigger, with_batch_override, with_compile_override
from dlperf_core.reproduce import reproduce_form, reproduce_params
from dlperf_core.trigger_form import COMPILE_MODES, TriggerForm

__all__ = [
    "CACHE_FORMAT",
    "COMPILE_MODES",
    "FORM_SOURCE",
    "MAX_BATCH_PER_DEVICE",
    "MAX_REPEATS",
    "STANDARD_TOPOLOGIES",
    "BatchBounds",
    "FormChoices",
    "TriggerForm",
    "apply_form",
    "check_trigger",
    "choices_cache_path",
    "choices_for",
    "discover_choices",
    "fitting_topologies",
    "merge_choices",
    "registry_choices",
    "reproduce_form",
    "reproduce_params",
    "topology_key",
    "topology_label",
    "with_batch_override",
    "with_compile_override",
]
