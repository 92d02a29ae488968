"""Each table is declared once, in :mod:`dlperf_core.storage.models`; the types that carry its rows are checked
against that declaration when they are defined.

A record (what a caller hands the store, :mod:`dlperf_core.storage.records`) and a typed row (what a read answers
with, :mod:`dlperf_core.storage.rows`) are frozen dataclasses whose fields mypy can check; the decorators here tie
each to its table or view: :func:`row_of_table` requires exactly the source's columns (less those it leaves out),
each field of the column's Python type and ``| None`` exactly where the column allows NULL; :func:`record_of_table`
requires the table's columns less the ones the database fills in (ids, bookkeeping times), plus the fields a record
carries beside them, of the column's type where the field is a plain value. A column added to a table without its
record and row (or the other way round) fails the import of this package, not a read at night.
"""

from __future__ import annotations

import builtins
import sys
import types
from collections.abc import Callable, Iterable
from dataclasses import fields, is_dataclass
from datetime import date, datetime
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

from sqlalchemy import Column, Table
from sqlalchemy.sql.base import ReadOnlyColumnCollection

from dlperf_core.storage.sql import table_of

C = TypeVar("C", bound=type)

SCALARS: tuple[type, ...] = (bool, int, float, str, datetime, date)
"""The plain value types a column maps to (a JSON column's values are whatever JSON holds)."""


class ShapeError(TypeError):
    """A record or row type that does not match the table or view it carries."""


class _Unresolved(dict[str, object]):
    """Names for the type hints of a class whose module imports some only for type checking: a name the module
    does not have at run time stands for ``object`` (a type the shape checks do not look into)."""

    def __init__(self, module: str) -> None:
        super().__init__()
        self.namespace = vars(sys.modules[module])

    def __missing__(self, name: str) -> object:
        if name in self.namespace:
            return self.namespace[name]
        return getattr(builtins, name, object)


def field_shape(cls: type) -> dict[str, tuple[type, bool]]:
    """``{field: (type, nullable)}`` of the dataclass ``cls`` in field order: the type of ``X | None`` is X's,
    a generic's its origin (``dict`` for a JSON column's ``dict[...]``), a union of several types ``object``; a name
    imported only for type checking is ``object`` too."""
    try:
        hints = get_type_hints(cls)
    except NameError:
        hints = get_type_hints(cls, localns=_Unresolved(cls.__module__))
    shape: dict[str, tuple[type, bool]] = {}
    for f in fields(cls):
        hint = hints[f.name]
        nullable = False
        if get_origin(hint) in (Union, types.UnionType):
            args = [a for a in get_args(hint) if a is not type(None)]
            nullable = len(args) < len(get_args(hint))
            hint = args[0] if len(args) == 1 else object
        shape[f.name] = (get_origin(hint) or hint, nullable)
    return shape


def column_type(column: Column[Any]) -> type:
    """The Python type of ``column``'s values (``object`` for a JSON column)."""
    try:
        kind: type = column.type.python_type
    except NotImplementedError:
        return object
    return kind if kind in SCALARS else object


def _columns(source: Table | type) -> ReadOnlyColumnCollection[str, Column[Any]]:
    return table_of(source).columns


def _check(cls: type, source: Table | type, names: Iterable[str], *, exact_nulls: bool) -> None:
    if not is_dataclass(cls):
        raise ShapeError(f"{cls.__name__} is not a dataclass")
    columns = _columns(source)
    shape = field_shape(cls)
    wanted = set(names)
    if set(shape) != wanted:
        missing, extra = sorted(wanted - set(shape)), sorted(set(shape) - wanted)
        raise ShapeError(f"{cls.__name__} does not match its table: missing fields {missing}, unknown fields {extra}")
    for name, (kind, nullable) in shape.items():
        if name not in columns:
            continue
        column = columns[name]
        expected = column_type(column)
        if expected is not object and kind is not expected:
            raise ShapeError(f"{cls.__name__}.{name} is {kind.__name__}, its column holds {expected.__name__}")
        if exact_nulls and nullable != bool(column.nullable):
            raise ShapeError(
                f"{cls.__name__}.{name}: None allowed {nullable}, the column's NULL allowed {column.nullable}"
            )
        if not exact_nulls and nullable and not column.nullable and column.default is None:
            raise ShapeError(f"{cls.__name__}.{name} may be None, its column may not and has no default")


def row_of_table(
    source: Table | type, *, leave_out: tuple[str, ...] = (), exact_nulls: bool = True
) -> Callable[[C], C]:
    """Class decorator: the row type is the columns of ``source`` (a table, a view's ``Table`` or an ORM class),
    less ``leave_out``, each of its column's type and nullability (module docstring). A view's ``Table`` does not
    say which columns are never NULL: its rows pass ``exact_nulls=False`` (a field may then be None or not)."""

    def check(cls: C) -> C:
        names = [c.name for c in _columns(source) if c.name not in leave_out]
        _check(cls, source, names, exact_nulls=exact_nulls)
        return cls

    return check


BOOKKEEPING: tuple[str, ...] = ("id", "benchmark_run_id", "created_at", "updated_at")
"""The columns the store fills in itself: a record has none of them."""


def record_of_table(
    source: Table | type, *, filled_in: tuple[str, ...] = BOOKKEEPING, beside: tuple[str, ...] = ()
) -> Callable[[C], C]:
    """Class decorator: the record type is the columns of ``source`` less ``filled_in`` (what the store fills
    in), plus ``beside`` (fields it carries that are not columns, e.g. a result's benchmark run)."""

    def check(cls: C) -> C:
        names = [c.name for c in _columns(source) if c.name not in filled_in]
        _check(cls, source, [*names, *beside], exact_nulls=False)
        return cls

    return check


def column_values(record: object, source: Table | type) -> dict[str, object]:
    """``{column: value}`` of the fields of ``record`` (a dataclass) that are columns of ``source``: the values an
    INSERT binds (a datetime as it is; :func:`dlperf_core.storage.upsert.utc` converts)."""
    columns = _columns(source)
    return {f.name: getattr(record, f.name) for f in fields(record) if f.name in columns}  # type: ignore[arg-type]
