"""Type checks for the curation spec's dataclasses: every field holds what its annotation says.

`robodata.config.from_dict` builds nested dataclasses but passes other values through as the YAML
gave them; these checks run first in each spec dataclass's `__post_init__`, so `filters:` given
as a mapping, a string where a number belongs or a list of lists of ids is a ConfigError naming
the field, never a TypeError later. Booleans are not numbers here (`true` is not 1), and
numbers must be finite.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any

from robodata.errors import ConfigError


def check_fields(obj: Any, where: str) -> None:
    """ConfigError naming `<where>.<field>` (just `<field>` when where="") unless every field of
    dataclass `obj` matches its annotation."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        check_type(getattr(obj, f.name), hints[f.name], f"{where}.{f.name}" if where else f.name)


def check_type(value: Any, tp: Any, field: str) -> None:
    """ConfigError naming `field` unless `value` is a `tp` (str, int, float, bool, Any, X | None,
    list[X], dict[str, X] or a dataclass)."""
    if tp is Any:
        return
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Union or origin is types.UnionType:
        if value is None and type(None) in args:
            return
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            check_type(value, inner[0], field)
            return
        raise ConfigError(f"{field}: unsupported annotation {tp}")  # pragma: no cover - spec fields are simple
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        _require(isinstance(value, tp), field, "a mapping", value)
    elif origin is list:
        _require(isinstance(value, list), field, "a list", value)
        for i, item in enumerate(value):
            check_type(item, args[0], f"{field}[{i}]")
    elif origin is dict:
        _require(isinstance(value, dict), field, "a mapping", value)
        for key, item in value.items():
            if not isinstance(key, str):
                raise ConfigError(f"{field}: key {key!r} must be a string (quote it in YAML)")
            check_type(item, args[1], f"{field}.{key}")
    elif tp is bool:
        _require(isinstance(value, bool), field, "true or false", value)
    elif tp is int:
        _require(isinstance(value, int) and not isinstance(value, bool), field, "an integer", value)
    elif tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        _require(ok, field, "a finite number", value)
    elif tp is str:
        _require(isinstance(value, str), field, "a string", value)
    else:  # pragma: no cover - spec fields use only the types above
        raise ConfigError(f"{field}: unsupported annotation {tp}")


def _require(ok: bool, field: str, expected: str, value: Any) -> None:
    if not ok:
        text = repr(value)
        text = text if len(text) <= 60 else text[:57] + "..."
        raise ConfigError(f"{field}: expected {expected}, got {type(value).__name__} {text}")
