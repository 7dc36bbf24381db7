"""Helpers for typed dataclass configs that validate up front."""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

from robodata.errors import ConfigError

T = TypeVar("T")


def require(cond: bool, message: str) -> None:
    """Raise ConfigError(message) unless cond holds; used in __post_init__."""
    if not cond:
        raise ConfigError(message)


def from_dict(cls: type[T], data: dict[str, Any] | None, *, path: str = "") -> T:
    """Build dataclass `cls` from a plain dict, recursing into nested dataclasses.

    Unknown keys are an error (typos must not be silently ignored).
    """
    data = dict(data or {})
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"{path or cls.__name__}: unknown key(s) {unknown}; known: {sorted(fields)}")
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        kwargs[name] = _coerce(hints[name], value, f"{path or cls.__name__}.{name}")
    try:
        return cls(**kwargs)
    except TypeError as exc:  # missing required fields
        raise ConfigError(f"{path or cls.__name__}: {exc}") from exc


def _coerce(tp: Any, value: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp) and isinstance(value, dict):
        return from_dict(tp, value, path=path)
    if origin is typing.Union or origin is types.UnionType:
        for arg in args:
            if arg is type(None) and value is None:
                return None
        for arg in args:
            if arg is not type(None):
                return _coerce(arg, value, path)
    if origin in (list, tuple) and isinstance(value, (list, tuple)):
        inner = args[0] if args else Any
        items = [_coerce(inner, v, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict and isinstance(value, dict):
        vt = args[1] if len(args) == 2 else Any
        return {k: _coerce(vt, v, f"{path}.{k}") for k, v in value.items()}
    return value


def load_yaml(cls: type[T], path: str | Path) -> T:
    """Load a YAML file into dataclass `cls`, with a clear error on bad input."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"config file not found: {p}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: invalid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected a mapping at top level, got {type(data).__name__}")
    return from_dict(cls, data, path=p.name)


def load_yaml_list(cls: type[T], path: str, option: str, key: str) -> tuple[T, ...]:
    """Dataclasses `cls` from a YAML file holding a list, or `{key: [...]}`, each item validated
    with from_dict; ConfigError naming the option, file and item (e.g. `--topics FILE: rule 2`)."""
    import yaml

    try:
        with open(path) as f:
            doc = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{option} {path}: unreadable ({type(exc).__name__}: {exc})") from None
    items = doc.get(key) if isinstance(doc, dict) else doc
    if not isinstance(items, list) or not items:
        raise ConfigError(f"{option} {path}: expected a non-empty list (or a `{key}:` list)")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ConfigError(f"{option} {path}: item {i} must be a mapping")
        try:
            out.append(from_dict(cls, item))
        except (ConfigError, TypeError, ValueError) as exc:
            label = item.get("name") or item.get("topic")
            raise ConfigError(f"{option} {path}: {key[:-1]} {i} ({label!r}): {exc}") from None
    return tuple(out)
