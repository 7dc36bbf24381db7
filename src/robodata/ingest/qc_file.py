"""QC files (`robodata ingest --qc FILE.yaml`, `IngestSettings.qc_file`, the `ingest` resource's
`qc_file`): per check, whether it runs, whether its failure quarantines, and its thresholds.

```yaml
checks:
  joints_in_range: {blocking: false, joint_abs_max: 3.5}   # radians-declared streams only
  rate_within_tolerance: {rate_tolerance: 0.25}
  units_declared: {blocking: true}      # refuse joint streams of undeclared units
  topics_known: {run: false}
by_source:                              # optional, as QCSelection.by_source (first prefix match)
  rlds: [readable, timestamps_monotonic, converted, video_decodable]
```

A check the file does not name keeps its setting from the selection the file applies to (the
defaults, or the resource's `qc`). Thresholds are QCThresholds fields, each under the check that
reads it (robodata.ingest.qc.THRESHOLDS). Anything else is a ConfigError naming the file and key.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from robodata.errors import ConfigError
from robodata.ingest.qc import ALL_CHECKS, IDENTITY_CHECKS, THRESHOLDS, QCSelection

CHECK_KEYS = ("run", "blocking")
TOP_KEYS = ("checks", "by_vendor", "by_source")


def _mapping(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
    return value


def _flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    return value


def apply_qc(doc: Any, base: QCSelection, source: str) -> QCSelection:
    """`base` with a QC document (parsed YAML) applied; ConfigError naming `source` and the key."""
    doc = _mapping(doc if doc is not None else {}, source)
    unknown = sorted(set(doc) - set(TOP_KEYS))
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) {unknown}; known: {list(TOP_KEYS)}")
    checks, blocking = list(base.checks), list(base.blocking)
    thresholds: dict[str, float] = {}
    for name, entry in _mapping(doc.get("checks") or {}, f"{source}: checks").items():
        where = f"{source}: checks.{name}"
        if name not in ALL_CHECKS:
            raise ConfigError(f"{where}: unknown check; known: {list(ALL_CHECKS)}")
        entry = _mapping(entry if entry is not None else {}, where)
        own = THRESHOLDS.get(name, ())
        for key, value in entry.items():
            if key in CHECK_KEYS:
                on = _flag(value, f"{where}.{key}")
                target = checks if key == "run" else blocking
                if on and name not in target:
                    target.append(name)
                elif not on and name in target:
                    if name in IDENTITY_CHECKS or name in ("readable", "converted"):
                        raise ConfigError(f"{where}.{key}: {name} always runs and always quarantines")
                    target.remove(name)
            elif key in own:
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise ConfigError(f"{where}.{key}: expected a number, got {value!r}")
                thresholds[key] = float(value)
            else:
                raise ConfigError(f"{where}: unknown key {key!r}; known: {[*CHECK_KEYS, *own]}")
    try:
        return replace(
            base,
            checks=tuple(checks),
            blocking=tuple(blocking),
            thresholds=replace(base.thresholds, **thresholds) if thresholds else base.thresholds,
            by_vendor=_selection(doc, "by_vendor", source, base.by_vendor),
            by_source=_selection(doc, "by_source", source, base.by_source),
        )
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def _selection(doc: dict, key: str, source: str, base: dict) -> dict[str, tuple[str, ...]]:
    if key not in doc:
        return base
    out = {}
    for k, names in _mapping(doc[key] or {}, f"{source}: {key}").items():
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ConfigError(f"{source}: {key}.{k}: expected a list of check names")
        out[str(k)] = tuple(names)
    return out


def load_qc_file(path: str, base: QCSelection | None = None) -> QCSelection:
    """The QC file at `path` applied to `base` (the defaults when None); ConfigError naming the file
    when it is unreadable or wrong."""
    import yaml

    try:
        with open(path) as f:
            doc = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"--qc {path}: unreadable ({type(exc).__name__}: {exc})") from None
    return apply_qc(doc, base or QCSelection(), f"--qc {path}")
