"""The trigger form as a type: :class:`TriggerForm`, whose fields are the keys of a ``dlperf_benchmark`` run's
``conf`` (the DAG's Params), each with how the form shows it (:class:`FormField`, in the field's metadata).

It is built once, here, and read wherever the form is: the DAG's Params are rendered from the fields' metadata
and the discovered choices (:func:`form_params`, which ``dlperf_airflow.trigger_params`` turns into Airflow
``Param`` objects); planning reads a trigger's params through :meth:`TriggerForm.from_params` (an unknown key is
refused first, :func:`check_keys`, then a value of the wrong kind); ``dlperf run`` and ``dlperf reproduce --run``
build one and send :meth:`TriggerForm.to_params`. Whether a value is one the chosen suite has is checked later,
against that suite (:mod:`dlperf_core.plan.form_overrides`).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal, Self

from dlperf_core.errors import ConfigError
from dlperf_core.plan.cases import PlanFilters
from dlperf_core.plan.defaults import DEFAULT_SUITE, FORM_DEFAULT, RUNTIMES, SUITE_RUNTIME
from dlperf_core.plan.form_choices import FORM_SOURCE, FormChoices

COMPILE_MODES: dict[str, tuple[bool, ...] | None] = {
    "suite": None,  # as the suite says
    "eager": (False,),
    "compiled": (True,),
    "both": (False, True),
}
"""The trigger form's torch.compile choices and the compile modes each gives (None: the suite's)."""

FieldKind = Literal["text", "choice", "multi", "keys", "count"]
"""How a field is asked for, and so its Param's JSON schema and its Python type: ``text`` free text with examples
(``str``, empty = not chosen), ``choice`` one of fixed values (``str``), ``multi`` any of the offered values
(``tuple[str, ...]``, empty = all), ``keys`` any non-empty strings (``tuple[str, ...]``), ``count`` an integer
from 0 (``int``, 0 = the suite's)."""

Values = tuple[str, ...] | Callable[[FormChoices], tuple[str, ...]]
"""Values a field offers: fixed, or taken from the discovered choices."""


@dataclass(frozen=True)
class FormField:
    """How the trigger form shows one field: what its DAG Param says besides the default (the field's default).
    ``description``, ``values``, ``values_display`` and ``maximum`` may be functions of the discovered choices."""

    kind: FieldKind
    title: str
    section: str  # the form's group: "What to run", "Filters", "Measurement"
    description: str | Callable[[FormChoices], str]
    values: Values = ()  # text: the examples; choice: the values; multi: the values (and examples)
    values_display: tuple[tuple[str, str], ...] | Callable[[FormChoices], dict[str, str]] = ()  # value: label
    maximum: Callable[[FormChoices], int] | None = None  # count: the largest value

    def schema(self, choices: FormChoices) -> dict[str, Any]:
        """The field's JSON schema with Airflow's form keywords (``title``, ``description``, ``section``,
        ``values_display``), as the DAG's Param of it is declared: the keyword arguments of ``Param`` besides the
        default."""
        values = list(self.values if isinstance(self.values, tuple) else self.values(choices))
        shown = dict(self.values_display) if isinstance(self.values_display, tuple) else self.values_display(choices)
        display: dict[str, Any] = {"values_display": shown} if shown else {}
        text = {
            "title": self.title,
            "description": self.description if isinstance(self.description, str) else self.description(choices),
            "section": self.section,
        }
        if self.kind == "text":  # "null": the UI's form would otherwise demand a value
            return {"type": ["string", "null"], "examples": values, **text}
        if self.kind == "choice":
            return {"type": "string", "enum": values, **display, **text}
        if self.kind == "multi":
            listed = {"items": {"type": "string", "enum": values}, "uniqueItems": True, "examples": values}
            return {"type": ["array", "null"], **listed, **text, **display}
        if self.kind == "keys":
            items = {"type": "string", "minLength": 1}
            return {"type": ["array", "null"], "items": items, "uniqueItems": True, **text}
        assert self.maximum is not None, "a count field has a maximum"
        return {"type": ["integer", "null"], "minimum": 0, "maximum": self.maximum(choices), **text}


def _form(spec: FormField) -> dict[str, FormField]:
    return {"form": spec}


def _filter(title: str, description: str, values: Values, **extra: Any) -> dict[str, FormField]:
    """A "Filters" field: any of ``values`` (empty or null = all of them)."""
    return _form(FormField("multi", title, "Filters", description, values, **extra))


def _batch_text(choices: FormChoices) -> str:
    in_suites = ", ".join(map(str, choices.batch.in_suites)) or "none found"
    return (
        f"Override every case's batch size per device, 1 to {choices.batch.maximum}; "
        f"0 or empty = the suite's ({in_suites})."
    )


@dataclass(frozen=True)
class TriggerForm:
    """What a trigger of ``dlperf_benchmark`` asks for: one field per key of its ``conf`` (the DAG's Params, in the
    form's order), each at the form's default when the trigger leaves it open (empty, 0 or null)."""

    # suite and inventory: no JSON schema pattern (Airflow would answer a bad name with the schema's text);
    # planning refuses a file that is not there in words, with the known ones (dlperf_core.plan.trigger)
    suite: str = field(
        default="",
        metadata=_form(
            FormField(
                "text",
                "Suite",
                "What to run",
                "Suite file (YAML), relative to the dlperf home (the repository) or absolute; type to pick one of "
                "the suites found in suites/ (another name is refused before any case runs, naming them). "
                f"Empty = the deployment's default suite (DLPERF_DEFAULT_SUITE, else {DEFAULT_SUITE}), as the "
                "nightly run uses.",
                lambda c: c.suites,
            )
        ),
    )
    runtime: str = field(
        default=FORM_DEFAULT,
        metadata=_form(
            FormField(
                "choice",
                "Runtime",
                "What to run",
                "Where the framework processes run. The nightly run uses the deployment's default.",
                (FORM_DEFAULT, SUITE_RUNTIME, *RUNTIMES),
                (
                    (FORM_DEFAULT, "the deployment's default (DLPERF_DEFAULT_RUNTIME and _INVENTORY; compose: docker)"),
                    (SUITE_RUNTIME, "the suite's own runtime and inventory"),
                    ("local", "local: process groups on the Airflow worker (needs torch there)"),
                    ("docker", "docker: containers on every node's Docker Engine"),
                ),
            )
        ),
    )
    inventory: str = field(
        default="",
        metadata=_form(
            FormField(
                "text",
                "Inventory",
                "What to run",
                "Node inventory file; empty = the deployment's default with the default runtime, else the suite's, "
                "else the runtime's (inventories/docker-local.yaml or inventories/local.yaml).",
                lambda c: c.inventories,
            )
        ),
    )
    frameworks: tuple[str, ...] = field(
        default=(), metadata=_filter("Frameworks", "Empty = every framework in the suite.", lambda c: c.frameworks)
    )
    models: tuple[str, ...] = field(
        default=(), metadata=_filter("Models", "Empty = every model in the suite.", lambda c: c.models)
    )
    precisions: tuple[str, ...] = field(
        default=(), metadata=_filter("Precisions", "Empty = every precision in the suite.", lambda c: c.precisions)
    )
    topologies: tuple[str, ...] = field(
        default=(),
        metadata=_filter(
            "Topologies",
            "Nodes x devices per node; only topologies that fit a suite's inventory are listed, each with the "
            "suites that have it (a topology the chosen suite lacks is refused before any case runs). "
            "Empty = every topology in the suite.",
            lambda c: c.topologies,
            values_display=lambda c: {t: c.topology_display(t) for t in c.topologies},
        ),
    )
    case_keys: tuple[str, ...] = field(
        default=(),
        metadata=_form(
            FormField(
                "keys",
                "Case keys",
                "Filters",
                "Only these cases, by their full case key (results.case_key, e.g. "
                "pytorch_reference/resnet50_v1.5/fp32/b8/1n1g+args=1f0c9a2e), with the batch size and torch.compile "
                "choices below applied first; a key the suite does not plan is refused before any case runs. "
                "Empty = every case the other filters leave. `dlperf reproduce --run` sets it.",
            )
        ),
    )
    repeats: int = field(
        default=0,
        metadata=_form(
            FormField(
                "count",
                "Repeats",
                "Measurement",
                lambda c: f"Repeats per case, 1 to {c.max_repeats}; 0 or empty = the suite's.",
                maximum=lambda c: c.max_repeats,
            )
        ),
    )
    batch_size: int = field(
        default=0,
        metadata=_form(
            FormField("count", "Batch size per device", "Measurement", _batch_text, maximum=lambda c: c.batch.maximum)
        ),
    )
    compile: str = field(
        default="suite",
        metadata=_form(
            FormField(
                "choice",
                "torch.compile",
                "Measurement",
                "For the benchmarks whose workload can compile (the PyTorch reference workload); others run as they "
                "are. Compiled runs are their own case (case key +compile).",
                tuple(COMPILE_MODES),
                (
                    ("suite", "as the suite says"),
                    ("eager", "eager only"),
                    ("compiled", "compiled only (torch.compile)"),
                    ("both", "eager and compiled"),
                ),
            )
        ),
    )

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Self:
        """The form a trigger's params fill (a run's ``conf`` merged into the DAG's Params, or a ``conf`` alone: a
        key left out, or null as the UI sends a cleared field, is the form's default). Refused (ConfigError), before
        any value is read, when a key is not the form's (:func:`check_keys`); then when a value is not of its
        field's kind (a list of strings for a filter, an integer for a count), each named."""
        check_keys(params)
        values: dict[str, Any] = {}
        problems: list[str] = []
        for name, spec in form_fields().items():
            raw = params.get(name)
            if raw is None:
                continue
            if (value := _read(spec.kind, raw)) is None:
                problems.append(f"{name}: must be {_KIND_WORDS[spec.kind]}, got {raw!r}")
            else:
                values[name] = value
        if problems:
            raise ConfigError(FORM_SOURCE, problems)
        return cls(**values)

    def to_params(self) -> dict[str, Any]:
        """The trigger ``conf`` that asks for this form: each field that is not at its default, as JSON (what
        ``dlperf run`` and ``dlperf reproduce --run`` trigger; the DAG's Params fill in the others)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value != f.default:
                out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    def filters(self) -> PlanFilters:
        """The form's filters (an empty field, or 0 repeats: no filter)."""
        return PlanFilters(
            frameworks=self.frameworks,
            models=self.models,
            precisions=self.precisions,
            topologies=self.topologies,
            repeats=self.repeats or None,
            case_keys=self.case_keys,
        )


_KIND_WORDS: dict[FieldKind, str] = {
    "text": "a string",
    "choice": "a string",
    "multi": "a list of strings",
    "keys": "a list of strings",
    "count": "an integer",
}


def _read(kind: FieldKind, raw: object) -> str | int | tuple[str, ...] | None:
    """``raw`` as a value of a field of ``kind``; None when it is not one."""
    if kind in ("text", "choice"):
        return raw if isinstance(raw, str) else None
    if kind == "count":
        return raw if isinstance(raw, int) and not isinstance(raw, bool) else None
    if isinstance(raw, list | tuple) and all(isinstance(v, str) for v in raw):
        return tuple(raw)
    return None


def form_fields() -> dict[str, FormField]:
    """Each field of :class:`TriggerForm` by name, in the form's order, with how the form shows it."""
    return {f.name: f.metadata["form"] for f in fields(TriggerForm)}


TRIGGER_KEYS: tuple[str, ...] = tuple(form_fields())
"""The keys of a trigger's ``conf``: :class:`TriggerForm`'s fields, in the form's order (the DAG's Params are
rendered from them). Any other key is refused (:func:`check_keys`)."""


@dataclass(frozen=True)
class FormParam:
    """One field of the form as the DAG declares its Param: the default (JSON) and the rest of the declaration
    (:meth:`FormField.schema`)."""

    default: str | int | list[str]
    schema: dict[str, Any]


def form_params(choices: FormChoices) -> dict[str, FormParam]:
    """The DAG's Params of the trigger form, by key in the form's order, offering ``choices`` (what the suites
    found allow: :func:`dlperf_core.plan.form_choices.discover_choices`)."""
    defaults = {f.name: f.default for f in fields(TriggerForm)}
    out = {}
    for name, spec in form_fields().items():
        default = defaults[name]
        assert isinstance(default, str | int | tuple), name
        out[name] = FormParam(list(default) if isinstance(default, tuple) else default, spec.schema(choices))
    return out


def closest(name: str, known: Mapping[str, str]) -> str | None:
    """The known value closest to ``name`` (difflib), through ``known``'s aliases (alias: value), or None."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return known[close[0]] if close else None


def unknown_keys(keys: Sequence[str], known: Sequence[str] = TRIGGER_KEYS) -> str | None:
    """What is wrong with a trigger whose ``conf`` has the keys ``keys``: each key not in ``known`` named, with the
    known key closest to it, and the known keys listed (one line); None when every key is known."""
    unknown = [k for k in keys if k not in known]
    if not unknown:
        return None
    named = []
    for key in unknown:
        close = closest(key, {k: k for k in known})
        named.append(f"{key!r}" + (f" (did you mean {close!r}?)" if close else ""))
    which = "key" if len(unknown) == 1 else "keys"
    return f"unknown {which} {', '.join(named)}; the known keys are {', '.join(known)}"


def check_keys(params: Mapping[str, Any], known: Sequence[str] = TRIGGER_KEYS) -> None:
    """Refuse a trigger with a key the DAG has no Param for (:func:`unknown_keys`), before anything else is read:
    Airflow itself accepts it, and the run would plan as if the key were not there."""
    if (problem := unknown_keys(list(params), known)) is not None:
        raise ConfigError(FORM_SOURCE, [problem])
