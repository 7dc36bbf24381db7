"""One filter of a curation spec: validated against the catalog column's type up front, then a Polars expression.

Ops by column kind (CATALOG_SCHEMA):

    string, timestamp, integer, float   == != < <= > >= in not_in between is_null not_null
    bool                                == != in not_in is_null not_null
    list (cameras)                      contains is_null not_null

Values: `in` / `not_in` a non-empty list of scalars, `between` a [low, high] pair, `is_null` /
`not_null` none, the rest one scalar; each scalar must fit the column: a string (or number) for
string columns, an ISO date for `day`, an ISO datetime (or date) for timestamps (naive means
UTC), a finite number for numeric columns (integers within int64), true/false for bool, a string
for `contains`. Anything else is a ConfigError naming the filter's column and op.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import polars as pl

from robodata.catalog.schema import CATALOG_SCHEMA, type_kind
from robodata.config import require
from robodata.errors import ConfigError

OPS = ("==", "!=", "<", "<=", ">", ">=", "in", "not_in", "between", "is_null", "not_null", "contains")
_NULL_OPS = ("is_null", "not_null")
_ORDERED = ("<", "<=", ">", ">=", "between")
_INT64 = 2**63


def column_kind(column: str) -> str:
    """'list' | 'bool' | 'timestamp' | 'int' | 'float' | 'day' | 'string' for a catalog column."""
    kind = type_kind(CATALOG_SCHEMA.field(column).type)
    if kind.startswith("list<"):
        return "list"
    return "day" if column == "day" else kind


@dataclass
class Filter:
    """`column op value`; see the module docstring for what each column kind accepts."""

    column: str
    op: str
    value: Any = None

    def __post_init__(self) -> None:
        require(
            isinstance(self.column, str) and self.column in CATALOG_SCHEMA.names,
            f"filters: column {_show(self.column)} is not a catalog column; known: {CATALOG_SCHEMA.names}",
        )
        where = f"filter on {self.column!r}"
        known = isinstance(self.op, str) and self.op in OPS
        require(known, f"{where}: op {_show(self.op)} unknown; known: {list(OPS)}")
        kind = column_kind(self.column)
        where = f"filter {self.column} {self.op}"
        if kind == "list":
            require(self.op in ("contains", *_NULL_OPS), f"{where}: a list column takes contains, is_null or not_null")
        else:
            require(self.op != "contains", f"{where}: contains is for list columns (e.g. cameras), not {kind}")
        if kind == "bool":
            require(self.op not in _ORDERED, f"{where}: a bool column is not ordered")
        if self.op in ("in", "not_in"):
            require(isinstance(self.value, list) and len(self.value) > 0, f"{where}: value must be a non-empty list")
        elif self.op == "between":
            require(isinstance(self.value, list) and len(self.value) == 2, f"{where}: value must be [low, high]")
        elif self.op in _NULL_OPS:
            require(self.value is None, f"{where}: takes no value")
        else:
            require(self.value is not None and _is_scalar(self.value), f"{where}: value must be a scalar")
        for v in self.value if isinstance(self.value, list) else [self.value] if self.value is not None else []:
            coerce(self.column, v, where)  # raises ConfigError on a value the column cannot hold

    def expr(self) -> pl.Expr:
        """This filter as a Polars predicate."""
        col = pl.col(self.column)
        where = f"filter {self.column} {self.op}"
        if self.op in _NULL_OPS:
            return col.is_null() if self.op == "is_null" else col.is_not_null()
        if isinstance(self.value, list):
            values = [coerce(self.column, v, where) for v in self.value]
            if self.op == "between":
                return col.is_between(_lit(values[0]), _lit(values[1]), closed="both")
            member = col.is_in(values)
            return member if self.op == "in" else ~member
        value = coerce(self.column, self.value, where)
        match self.op:
            case "==":
                return col == value
            case "!=":
                return col != value
            case "<":
                return col < value
            case "<=":
                return col <= value
            case ">":
                return col > value
            case ">=":
                return col >= value
            case "contains":
                return col.list.contains(value)
        raise ConfigError(f"{where}: unhandled op")  # pragma: no cover - validated above


def coerce(column: str, value: Any, where: str) -> Any:
    """`value` as the column's type (timestamps: aware UTC datetimes); ConfigError if it cannot be."""
    kind = column_kind(column)
    bad = f"{where}: bad value {_show(value)} for {kind} column {column!r}"
    if not _is_scalar(value) or value is None:
        raise ConfigError(f"{bad}: expected a scalar")
    if kind == "bool":
        require(isinstance(value, bool), f"{bad}: expected true or false")
        return value
    if isinstance(value, bool):
        raise ConfigError(f"{bad}: true/false only for bool columns")
    if kind in ("int", "float"):
        require(isinstance(value, (int, float)), f"{bad}: expected a number")
        require(math.isfinite(value) and abs(value) < _INT64, f"{bad}: out of range")
        return value
    if kind == "timestamp":
        if isinstance(value, datetime):
            dt = value
        elif isinstance(value, date):
            dt = datetime(value.year, value.month, value.day)
        else:
            require(isinstance(value, str), f"{bad}: expected an ISO datetime")
            try:
                dt = datetime.fromisoformat(value)
            except ValueError as exc:
                raise ConfigError(f"{bad}: {exc}") from exc
        return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
    if kind == "day":
        if isinstance(value, date) and not isinstance(value, datetime):
            return value.isoformat()
        try:
            return date.fromisoformat(str(value)).isoformat()
        except ValueError as exc:
            raise ConfigError(f"{bad}: expected an ISO date (YYYY-MM-DD): {exc}") from exc
    if kind == "list":  # contains: one item
        require(isinstance(value, str), f"{bad}: contains takes a string")
        return value
    require(isinstance(value, (str, int, float)), f"{bad}: expected a string")
    return str(value)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool, date))


def _lit(value: Any) -> pl.Expr:
    return pl.lit(value)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
