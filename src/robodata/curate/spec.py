"""The curation spec: a versioned, declarative description of a training set.

Example (YAML)::

    version: 2
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
  is_null not_null contains` (`contains` for list columns such as `cameras`); each filter's
  value is checked against its column's type up front (robodata.curate.filters).
* `exclude` drops episode ids (inline or a file with one id per line), robots, batches. The
  file (`episode_ids_file`) is relative to the spec file's folder and confined there
  (robodata.curate.specfile); a spec built in code names that folder as `base_dir`.
* `mix.by` (`task`, `site`, or a corpus: `source_dataset`, `robot_type`, `source_format`) groups
  episodes; a group's share of the samples is
  weight / sum of weights (groups not listed get `default_weight`; 0 drops them).
  The manifest `weight` column is that share spread over the group's episodes in
  proportion to their duration, so the weights sum to 1.
* `budget` caps hours: per group (`per_group_hours`) and in total (`total_hours`,
  split over groups by mixing share). Capped groups keep a stable pseudo-random
  subset: episodes in `stable_hash64(episode_id, salt + "/budget")` order until the cap is met
  (robodata.curate.budget). `version: 2` (the current version): each group's own running sum
  decides its prefix, and `total_hours` is split by the weights `mix.weights` names (a group it
  does not name weighs `default_weight` against them), so a group's selection depends on its own
  episodes only and a budgeted spec reads a prefix of the catalog's budget order
  (robodata.curate.ordered). `version: 1` keeps the rule manifests were written with before (one
  running sum over all groups, `total_hours` split over the groups present among all candidates),
  evaluated over every candidate.
* QC: an episode with any failed check (catalog `qc_failed`, blocking or not) is left out unless
  every failed check is named in `allow_failed_checks` (`["*"]`: any); an episode without a
  container (empty `uri`: quarantined before conversion) is never selected.
* `cameras: {front: [cam_high, image, image_0, top]}`: a camera the catalog left without a role
  takes the role its name is listed under; filters on `camera_roles` see the resolved roles
  (`{column: camera_roles, op: contains, value: front}`: rows having a front camera) and the
  manifest's `camera_roles` carry them (robodata.curate.camera_aliases).
* `split`: an episode is `val` iff unit(stable_hash64(episode_id, salt)) < val_fraction,
  so an episode never moves between train and val when the catalog grows.

Validation: every field is type-checked (robodata.curate.spec_checks) and range-checked before
anything runs; the name and the excluded ids are names (robodata.names.check_name). Every bad
spec, from a file or a dict, is a ConfigError naming the field; nothing else escapes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robodata.config import from_dict, require
from robodata.curate.camera_aliases import check_aliases
from robodata.curate.filters import OPS, Filter
from robodata.curate.spec_checks import check_fields
from robodata.curate.specfile import check_document, exclusion_file_ids, exclusion_file_key, load_document
from robodata.errors import ConfigError
from robodata.names import UnsafeNameError, check_name

__all__ = ["OPS", "Budget", "CurationSpec", "Exclusions", "Filter", "Mix", "Split", "load_spec", "spec_from_dict"]

SPEC_VERSION = 2  # the current version; 1 is still read (robodata.curate.budget)
SPEC_VERSIONS = (1, 2)
MIX_KEYS = ("task", "site", "source_dataset", "robot_type", "source_format")  # corpora are groups too (issue 37)
MAX_CATALOG_VERSION = 2**63 - 1
MAX_NUMBER = 1e12  # weights and hours: far above any real value, far below float overflow
MAX_FILTERS = 1000  # terms of one spec's predicate; a value list (`in`, exclusions) is one term


@dataclass
class Mix:
    """Mixing groups (`by`) and their weights."""

    by: str = "task"
    weights: dict[str, float] = field(default_factory=dict)
    default_weight: float = 1.0

    def __post_init__(self) -> None:
        check_fields(self, "mix")
        require(self.by in MIX_KEYS, f"mix.by must be one of {list(MIX_KEYS)}, got {self.by!r}")
        for key, w in self.weights.items():
            require(0 <= w <= MAX_NUMBER, f"mix weight for {key!r} must be in [0, {MAX_NUMBER:g}], got {w!r}")
        require(0 <= self.default_weight <= MAX_NUMBER, f"mix.default_weight must be in [0, {MAX_NUMBER:g}]")

    def weight(self, group: str) -> float:
        """Mixing weight of `group` (default_weight for groups the spec does not name)."""
        return float(self.weights.get(group, self.default_weight))


@dataclass
class Budget:
    """Hour caps, in total and per mix group."""

    total_hours: float | None = None
    per_group_hours: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_fields(self, "budget")
        total = self.total_hours
        require(total is None or 0 < total <= MAX_NUMBER, f"budget.total_hours must be in (0, {MAX_NUMBER:g}]")
        for key, h in self.per_group_hours.items():
            require(0 < h <= MAX_NUMBER, f"budget for {key!r} must be in (0, {MAX_NUMBER:g}] hours, got {h!r}")


@dataclass
class Exclusions:
    """Episodes, robots and ingest batches to leave out."""

    episode_ids: list[str] = field(default_factory=list)
    episode_ids_file: str | None = None  # one id per line; relative to the spec file's folder, confined there
    robots: list[str] = field(default_factory=list)
    batches: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        check_fields(self, "exclude")
        for i, e in enumerate(self.episode_ids):
            _name(e, f"exclude.episode_ids[{i}]")
        for kind in ("robots", "batches"):
            for i, v in enumerate(getattr(self, kind)):
                ok = 0 < len(v) <= 1024 and v.isprintable()
                require(ok, f"exclude.{kind}[{i}]: {v[:60]!r} is not a printable name (1..1024 characters)")


@dataclass
class Split:
    """The train/val split: fraction and hash salt."""

    val_fraction: float = 0.05
    salt: str = ""

    def __post_init__(self) -> None:
        check_fields(self, "split")
        require(0.0 <= self.val_fraction < 1.0, f"split.val_fraction must be in [0, 1), got {self.val_fraction}")


@dataclass
class CurationSpec:
    """A versioned, declarative training-set selection (see the module docstring)."""

    version: int
    name: str
    filters: list[Filter] = field(default_factory=list)
    mix: Mix | None = None
    budget: Budget = field(default_factory=Budget)
    exclude: Exclusions = field(default_factory=Exclusions)
    split: Split = field(default_factory=Split)
    catalog_version: int | None = None  # pin a catalog version; None = latest at evaluation
    # QC checks whose failure is tolerated (catalog `qc_failed`); [] excludes any episode with a failed
    # check, ["*"] tolerates all. Episodes without a container (`uri` empty) are never selected.
    allow_failed_checks: list[str] = field(default_factory=list)
    # camera role -> camera names: roles for the cameras the catalog left without one (robodata.curate.camera_aliases)
    cameras: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_fields(self, "")
        check_aliases(self.cameras)
        require(
            self.version in SPEC_VERSIONS,
            f"curation spec version {self.version!r} not supported (this robodata reads versions {SPEC_VERSIONS})",
        )
        _name(self.name, "name")
        require(
            self.catalog_version is None or 0 <= self.catalog_version <= MAX_CATALOG_VERSION,
            f"catalog_version must be in [0, {MAX_CATALOG_VERSION}], got {self.catalog_version}",
        )
        if self.budget.per_group_hours:
            require(self.mix is not None, "budget.per_group_hours needs a mix (it is keyed by mix.by)")
        require(
            len(self.filters) <= MAX_FILTERS,
            f"filters: {len(self.filters)} filters, at most {MAX_FILTERS} (a list of values is one filter: "
            "`in` / `not_in`, or exclude.episode_ids / episode_ids_file)",
        )
        if self.version >= 2 and self.mix is not None and self.budget.total_hours is not None:
            require(
                sum(self.mix.weights.values()) > 0,
                "version 2 splits budget.total_hours by the weights mix.weights names: name a group with a weight > 0",
            )

    def excluded_ids(self, base_dir: Path | None = None) -> list[str]:
        """Sorted, unique excluded episode ids: inline plus those in `episode_ids_file`.

        Args:
            base_dir: the folder `episode_ids_file` is relative to and confined to (the spec
                file's folder); required when the spec names such a file.

        Returns:
            The ids, sorted. The file is read once per version of it (path, size, modification
            time), however often a spec's evaluation asks (its hash, its predicate).

        Raises:
            ConfigError: the file is missing, escapes `base_dir`, is not UTF-8 text, or lists an
                invalid id; or the spec names a file and `base_dir` is None.
        """
        rel = self.exclude.episode_ids_file
        key = (base_dir, rel and exclusion_file_key(rel, base_dir, f"spec {self.name!r}"))
        cached = self.__dict__.get("_excluded")  # not a field: the ids read once per file version
        if cached is not None and cached[0] == key:
            return list(cached[1])
        found = sorted(set(self.exclude.episode_ids))
        if rel:  # sorted and unique too; ids are ASCII names, so the byte order is Python's
            listed = exclusion_file_ids(rel, base_dir, f"spec {self.name!r}")
            found = sorted(set(found).union(listed)) if found else listed
        self.__dict__["_excluded"] = (key, found)
        return list(found)

    def spec_hash(self, base_dir: Path | None = None) -> str:
        """sha256 of the canonical spec, with the resolved exclusion list inlined.

        Args:
            base_dir: as for `excluded_ids`.

        Returns:
            A hex digest: equal for specs that select the same way.

        Raises:
            ConfigError: as for `excluded_ids`.
        """
        doc = dataclasses.asdict(self)
        doc["exclude"]["episode_ids"] = self.excluded_ids(base_dir)
        doc["exclude"]["episode_ids_file"] = None
        if not doc["allow_failed_checks"]:  # the default: absent, so hashes of older specs hold
            del doc["allow_failed_checks"]
        if not doc["cameras"]:  # likewise: an alias map enters the hash only where a spec declares one
            del doc["cameras"]
        canon = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(canon.encode()).hexdigest()


def _name(value: str, field_name: str) -> None:
    try:
        check_name(value, field=field_name, source="spec")
    except UnsafeNameError as exc:
        raise ConfigError(str(exc)) from exc


def load_spec(path: str | Path) -> CurationSpec:
    """Load and validate a curation spec file (YAML or JSON).

    Args:
        path: the spec file; its folder is the root of `exclude.episode_ids_file`.

    Returns:
        The validated CurationSpec.

    Raises:
        ConfigError: the file is missing, too large, not UTF-8, not valid YAML, nested too deeply,
            or any field is invalid (the message names the file and the field).
    """
    p = Path(path)
    data = load_document(p)
    return spec_from_dict(data, source=p.name)


def spec_from_dict(data: dict[str, Any], source: str = "CurationSpec") -> CurationSpec:
    """Build and validate a CurationSpec from a plain mapping (as parsed from YAML or JSON).

    Args:
        data: the spec document.
        source: what to call it in error messages (the file name when loaded from a file).

    Returns:
        The validated CurationSpec.

    Raises:
        ConfigError: `data` is not a mapping, holds non-string keys or nests too deeply, has
            unknown keys, or any field is invalid.
    """
    check_document(data, source)
    try:
        return from_dict(CurationSpec, data, path=source)
    except ConfigError as exc:
        msg = str(exc)
        raise ConfigError(msg if msg.startswith(source) else f"{source}: {msg}") from exc
