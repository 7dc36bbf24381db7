"""Dagster config models that mirror the core's typed settings, field for field.

A `dg.Config` (or resource) that stands for a core dataclass declares the same field names with
the same defaults (tests/platform/test_config_models.py proves it for every pair); `to_settings`
builds the dataclass from it, validated by the dataclass itself (robodata.config.from_dict), so a
setting is declared, defaulted and checked once, in the core.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import pydantic

T = TypeVar("T")


def plain(value: Any) -> Any:
    """A config value as plain data (nested configs as dicts)."""
    if isinstance(value, pydantic.BaseModel):
        return {name: plain(getattr(value, name)) for name in type(value).model_fields}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def to_settings(cls: type[T], config: pydantic.BaseModel, **overrides: Any) -> T:
    """Dataclass `cls` from the fields of `config` it declares, plus `overrides`."""
    from robodata.config import from_dict

    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    data = {n: plain(getattr(config, n)) for n in type(config).model_fields if n in names}
    return from_dict(cls, {**data, **overrides})
