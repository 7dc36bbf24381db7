"""Named specs: the partitions of `manifest` (curation specs) and `training_run` (training configs).

A curation spec is `<curation dir>/<name>.yaml` whose `name:` is `<name>`; a training config is
`<training dir>/<name>.yaml` (a TrainConfig without the per-partition fields). Names are checked
once, here (robodata.names); `register` adds every name not yet known as a dynamic partition
(the `spec_registry_sensor` and `robodata-dagster specs` both call it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from robodata.config import require
from robodata.errors import ConfigError
from robodata.names import UnsafeNameError, check_name, is_safe_name, join_name

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


def register(instance: dg.DagsterInstance, dirs: SpecDirs) -> dict[str, list[str]]:
    """Add every spec and training config name that is not a partition yet; returns what was added."""
    added: dict[str, list[str]] = {}
    for kind in (CURATION_SPEC, TRAIN_CONFIG):
        known = set(instance.get_dynamic_partitions(kind))
        new = [n for n in dirs.names(kind) if n not in known]
        if new:
            instance.add_dynamic_partitions(kind, new)
        added[kind] = new
    return added


def new_partitions(instance: dg.DagsterInstance, dirs: SpecDirs) -> dict[str, list[str]]:
    """What `register` would add (for a sensor's dynamic-partition requests)."""
    return {
        k: [n for n in dirs.names(k) if not instance.has_dynamic_partition(k, n)] for k in (CURATION_SPEC, TRAIN_CONFIG)
    }
