"""The curation spec: a versioned, declarative description of a training set.

Example (YAML)::

    version: 1
    name: fold-v3
    filters:
      - {column: day, op: between, value: ["2024-03-01", "2024-03-31"]}
      - {column: task, op: in, value: [fold_towel, fold_shirt]}
      - {column: quality_score, op: ">=", value: 0.8}
      - {column: qc_status, op: "==", value: pass}
    mix: {by: task, weights: {fold_towel: 3, fold_shirt: 1}}
    budget: {total_hours: 2000, per_group_hours: {fold_shirt: 400}}
    exclude: {robots: [sfo-1-r003], batches: [batch-17], episode_ids: [ep-0000000042]}
    split: {val_fraction: 0.05, salt: fold-v3}

Semantics (all deterministic):
* `filters` are ANDed; any catalog column; ops `== != < <= > >= in not_in between
  is_null not_null contains` (`contains` for list columns such as `cameras`).
* `exclude` drops episode ids (inline or a file with one id per line), robots, batches.
* `mix.by` (`task` or `site`) groups episodes; a group's share of the samples is
  weight / sum of weights (groups not listed get `default_weight`; 0 drops them).
  The manifest `weight` column is that share spread over the group's episodes in
  proportion to their duration, so the weights sum to 1.
* `budget` caps hours: per group (`per_group_hours`) and in total (`total_hours`,
  split over groups by mixing share). Capped groups keep a stable pseudo-random
  subset: episodes in `stable_hash64(episode_id, salt)` order until the cap is met.
* `split`: an episode is `val` iff unit(stable_hash64(episode_id, salt)) < val_fraction,
  so an episode never moves between train and val when the catalog grows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robodata.catalog.schema import CATALOG_SCHEMA
from robodata.config import from_dict, load_yaml, require

SPEC_VERSION = 1
OPS = ("==", "!=", "<", "<=", ">", ">=", "in", "not_in", "between", "is_null", "not_null", "contains")
MIX_KEYS = ("task", "site")


@dataclass
class Filter:
    column: str
    op: str
    value: Any = None

    def __post_init__(self) -> None:
        require(
            self.column in CATALOG_SCHEMA.names,
            f"filter column {self.column!r} is not a catalog column; known: {CATALOG_SCHEMA.names}",
        )
        require(self.op in OPS, f"filter op {self.op!r} on {self.column!r} unknown; known: {list(OPS)}")
        if self.op in ("in", "not_in"):
            require(
                isinstance(self.value, list) and len(self.value) > 0,
                f"filter {self.column} {self.op}: value must be a non-empty list",
            )
        elif self.op == "between":
            require(
                isinstance(self.value, list) and len(self.value) == 2,
                f"filter {self.column} between: value must be [low, high]",
            )
        elif self.op in ("is_null", "not_null"):
            require(self.value is None, f"filter {self.column} {self.op}: takes no value")
        else:
            require(
                self.value is not None and not isinstance(self.value, (list, dict)),
                f"filter {self.column} {self.op}: value must be a scalar",
            )


@dataclass
class Mix:
    by: str = "task"
    weights: dict[str, float] = field(default_factory=dict)
    default_weight: float = 1.0

    def __post_init__(self) -> None:
        require(self.by in MIX_KEYS, f"mix.by must be one of {list(MIX_KEYS)}, got {self.by!r}")
        for key, w in self.weights.items():
            require(isinstance(w, (int, float)) and w >= 0, f"mix weight for {key!r} must be >= 0, got {w!r}")
        require(self.default_weight >= 0, "mix.default_weight must be >= 0")

    def weight(self, group: str) -> float:
        return float(self.weights.get(group, self.default_weight))


@dataclass
class Budget:
    total_hours: float | None = None
    per_group_hours: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        require(self.total_hours is None or self.total_hours > 0, "budget.total_hours must be > 0")
        for key, h in self.per_group_hours.items():
            require(isinstance(h, (int, float)) and h > 0, f"budget for {key!r} must be > 0 hours, got {h!r}")


@dataclass
class Exclusions:
    episode_ids: list[str] = field(default_factory=list)
    episode_ids_file: str | None = None  # one id per line; relative to the spec file
    robots: list[str] = field(default_factory=list)
    batches: list[str] = field(default_factory=list)


@dataclass
class Split:
    val_fraction: float = 0.05
    salt: str = ""

    def __post_init__(self) -> None:
        require(0.0 <= self.val_fraction < 1.0, f"split.val_fraction must be in [0, 1), got {self.val_fraction}")


@dataclass
class CurationSpec:
    version: int
    name: str
    filters: list[Filter] = field(default_factory=list)
    mix: Mix | None = None
    budget: Budget = field(default_factory=Budget)
    exclude: Exclusions = field(default_factory=Exclusions)
    split: Split = field(default_factory=Split)
    catalog_version: int | None = None  # pin a catalog version; None = latest at evaluation

    def __post_init__(self) -> None:
        require(
            self.version == SPEC_VERSION,
            f"curation spec version {self.version!r} not supported (this robodata reads version {SPEC_VERSION})",
        )
        require(bool(self.name) and "/" not in self.name, f"spec name must be non-empty without '/', got {self.name!r}")
        require(self.catalog_version is None or self.catalog_version >= 0, "catalog_version must be >= 0")
        if self.budget.per_group_hours:
            require(self.mix is not None, "budget.per_group_hours needs a mix (it is keyed by mix.by)")

    def excluded_ids(self, base_dir: Path | None = None) -> list[str]:
        ids = list(self.exclude.episode_ids)
        if self.exclude.episode_ids_file:
            p = Path(self.exclude.episode_ids_file)
            if not p.is_absolute() and base_dir is not None:
                p = base_dir / p
            require(p.is_file(), f"exclude.episode_ids_file not found: {p}")
            ids += [line.strip() for line in p.read_text().splitlines() if line.strip() and not line.startswith("#")]
        return sorted(set(ids))

    def spec_hash(self, base_dir: Path | None = None) -> str:
        """sha256 of the canonical spec, with the resolved exclusion list inlined."""
        doc = dataclasses.asdict(self)
        doc["exclude"]["episode_ids"] = self.excluded_ids(base_dir)
        doc["exclude"]["episode_ids_file"] = None
        canon = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(canon.encode()).hexdigest()


def load_spec(path: str | Path) -> CurationSpec:
    return load_yaml(CurationSpec, path)


def spec_from_dict(data: dict[str, Any]) -> CurationSpec:
    return from_dict(CurationSpec, data)
