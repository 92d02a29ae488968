"""The JSON form of a typed hand-off, generated from its type: what Airflow's XCom carries between DAG tasks.

A dataclass that mixes in :class:`JsonForm` gets ``to_json()``/``from_json()`` from pydantic's
``TypeAdapter`` over its own type hints (nested dataclasses, tuples, datetimes and ``None`` included), so
no field is ever written twice by hand; and the ``serialize()``/``deserialize(data, version)`` pair with
``__version__`` that Airflow's serde looks for. A DAG task then takes and returns the type itself: Airflow
stores ``{"__classname__": "dlperf_core.run.handoff.PlannedRun", "__version__": 1, "__data__": <to_json()>}``
and the task that reads it gets a ``PlannedRun`` back, provided Airflow's
``[core] allowed_deserialization_classes`` names ``dlperf_core.*`` wherever tasks run (the compose file, the
embedded runtime of ``dlperf run``, the tests' stacks: :data:`ALLOWED_DESERIALIZATION_CLASSES`).

The same generated form is what the results database stores where a column holds JSON (a result's launch
spec, an environment, a search's trials) and what the gang board posts on XCom: there the type's field order is
the stored key order, and a field whose stored text must not change (a datetime written as Python's
``isoformat``, ``+00:00`` rather than pydantic's ``Z``) says so in its type (:data:`IsoDatetime`), so a form
written by an older dlperf reads back and is written again unchanged.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, ClassVar, Self

from pydantic import PlainSerializer, TypeAdapter

ALLOWED_DESERIALIZATION_CLASSES = "airflow.* dlperf_core.*"
"""The value of Airflow's ``[core] allowed_deserialization_classes`` (``AIRFLOW__CORE__...``) that lets tasks
read dlperf's hand-offs back (Airflow's default allows ``airflow.*`` only)."""


IsoDatetime = Annotated[datetime, PlainSerializer(datetime.isoformat, return_type=str, when_used="json")]
"""A datetime whose JSON form is ``datetime.isoformat()`` (``2024-05-01T02:00:00+00:00``; pydantic's own writes
``...Z``): for a form whose text was written that way before it was generated."""

_ADAPTERS: dict[type, TypeAdapter[Any]] = {}


def _adapter(cls: type) -> TypeAdapter[Any]:
    """The adapter of ``cls``, built once per process (building one walks the type hints)."""
    if cls not in _ADAPTERS:
        _ADAPTERS[cls] = TypeAdapter(cls)
    return _ADAPTERS[cls]


class JsonForm:
    """Mixin for a dataclass that crosses from one DAG task to the next (module docstring)."""

    __version__: ClassVar[int] = 1

    def to_json(self) -> dict[str, Any]:
        """The JSON-ready form (str keys; lists, numbers, strings, None; datetimes as ISO 8601)."""
        data: dict[str, Any] = _adapter(type(self)).dump_python(self, mode="json")
        return data

    @classmethod
    def from_json(cls, data: object) -> Self:
        """The value back from :meth:`to_json`'s form; a wrong shape raises pydantic's ``ValidationError``."""
        value: Self = _adapter(cls).validate_python(data)
        return value

    # Airflow's serde protocol (airflow.sdk.serde): it calls these for a class with a ``serialize`` method
    def serialize(self) -> dict[str, Any]:
        return self.to_json()

    @classmethod
    def deserialize(cls, data: object, version: int) -> Self:
        if version > cls.__version__:
            raise TypeError(f"{cls.__name__} form version {version} is newer than this dlperf's {cls.__version__}")
        return cls.from_json(data)
