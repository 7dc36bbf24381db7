"""Named specs: the partitions of `manifest` (curation specs) and `training_run` (training configs).

A curation spec is `<curation dir>/<name>.yaml` whose `name:` is `<name>`; a training config is
`<training dir>/<name>.yaml` (a TrainConfig without the per-partition fields). Names are checked
once, here (robodata.names). A file becomes a partition only once it is valid (`validate`: the
whole spec or config, as a run would read it: schema, filter columns and values, name, exclusion
file); `register` adds every valid name not yet known as a dynamic partition and returns the
refused files with their errors (the `spec_registry_sensor` and `robodata-dagster specs` both call
it), so an invalid file never launches a run. `digest` identifies a file's content: a partition
whose last run failed on its config is not requested again until that changes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg

from robodata.config import require
from robodata.errors import ConfigError
from robodata.names import UnsafeNameError, check_name, is_safe_name, join_name

BATCH = "ingest_batch"  # the ingest_batch dynamic partitions (assets/partitions.py)
CURATION_SPEC = "curation_spec"
TRAIN_CONFIG = "train_config"
# Set by training_run per partition; a training config that sets them is an error.
PER_PARTITION_KEYS = ("run_dir", "checkpoint.root", "data.manifest")


@dataclass(frozen=True)
class SpecDirs:
    curation_dir: str = "specs/curation"
    training_dir: str = "specs/training"

    def names(self, kind: str) -> list[str]:
        """Spec names (file stems) of `kind` (CURATION_SPEC | TRAIN_CONFIG), sorted; see `rejected`."""
        return sorted(p.stem for p in self._files(kind) if is_safe_name(p.stem))

    def rejected(self, kind: str) -> list[str]:
        """Files of `kind` whose stem cannot be a partition key (never registered)."""
        return sorted(str(p) for p in self._files(kind) if not is_safe_name(p.stem))

    def path(self, kind: str, name: str) -> Path:
        """The file of spec `name` (ConfigError when there is none)."""
        folder = self._dir(kind)
        try:
            p = join_name(folder, f"{check_name(name, field=kind, source=folder)}.yaml", field=kind, source=folder)
        except UnsafeNameError as exc:
            raise ConfigError(str(exc)) from exc
        require(p.is_file(), f"{kind} {name!r}: no file {p} (the partition names a spec that is not there)")
        return p

    def _files(self, kind: str) -> list[Path]:
        folder = Path(self._dir(kind))
        return sorted(folder.glob("*.yaml")) if folder.is_dir() else []

    def _dir(self, kind: str) -> str:
        require(kind in (CURATION_SPEC, TRAIN_CONFIG), f"unknown spec kind {kind!r}")
        return self.curation_dir if kind == CURATION_SPEC else self.training_dir


def curation_spec(dirs: SpecDirs, name: str) -> tuple[Path, Any]:
    """The spec file of manifest partition `name` and the spec parsed from it (a CurationSpec; parsed
    once, here); its `name:` must be the partition's."""
    from robodata.curate.spec import load_spec

    p = dirs.path(CURATION_SPEC, name)
    spec = load_spec(p)
    require(spec.name == name, f"{p}: name {spec.name!r} must match the file name {name!r} (the partition key)")
    return p, spec


def training_config(dirs: SpecDirs, name: str) -> dict[str, Any]:
    """The training config of partition `name`, as a mapping (validated once the asset adds its fields)."""
    from robodata.train.config import read_config_dict

    p = dirs.path(TRAIN_CONFIG, name)
    data = read_config_dict(p)
    for dotted in PER_PARTITION_KEYS:
        node: Any = data
        *parents, leaf = dotted.split(".")
        for k in parents:
            node = node.get(k, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict) and leaf in node:
            raise ConfigError(f"{p}: {dotted} is set by training_run for each partition; remove it")
    return data


def validate(dirs: SpecDirs, kind: str, name: str) -> None:
    """Read spec or training config `name` as its run would; ConfigError (naming the file and the
    field) when it is invalid."""
    if kind == CURATION_SPEC:
        p, spec = curation_spec(dirs, name)
        spec.spec_hash(p.parent)  # reads and checks the exclusion file too
        return
    from robodata.train.config import config_from_dict

    data = training_config(dirs, name)
    try:
        config_from_dict({**data, "run_dir": "."})
    except ConfigError as exc:
        raise ConfigError(f"{dirs.path(kind, name)}: {exc}") from exc


def digest(dirs: SpecDirs, kind: str, name: str) -> str:
    """sha256 of the file of `name` ("" when it is missing or unreadable)."""
    try:
        return hashlib.sha256(dirs.path(kind, name).read_bytes()).hexdigest()
    except (ConfigError, OSError):
        return ""


@dataclass
class Registration:
    """What `register` added, and the files it refused with their errors."""

    added: dict[str, list[str]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)  # file -> why


def candidates(instance: dg.DagsterInstance, dirs: SpecDirs) -> Registration:
    """The valid names that are not partitions yet (`added`, not added here) and the invalid files."""
    out = Registration()
    for kind in (CURATION_SPEC, TRAIN_CONFIG):
        out.added[kind] = []
        for path in dirs.rejected(kind):
            out.refused[path] = "not a valid partition name (letters, digits, '.', '_', '-')"
        for n in dirs.names(kind):
            if instance.has_dynamic_partition(kind, n):
                continue
            try:
                validate(dirs, kind, n)
            except ConfigError as exc:
                out.refused[str(dirs.path(kind, n))] = str(exc)
                continue
            out.added[kind].append(n)
    return out


def register(instance: dg.DagsterInstance, dirs: SpecDirs) -> Registration:
    """Add every valid spec and training config name that is not a partition yet."""
    found = candidates(instance, dirs)
    for kind, names in found.added.items():
        if names:
            instance.add_dynamic_partitions(kind, names)
    return found
