"""Resources for the Dagster layer, chosen in one place by ROBODATA_DEPLOYMENT."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Any


def submodules(package: ModuleType) -> list[ModuleType]:
    """All modules of a package (non-recursive), imported, sorted by name."""
    names = sorted(m.name for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_"))
    return [importlib.import_module(f"{package.__name__}.{n}") for n in names]


def deployment_resources() -> dict[str, Any]:
    """Merge RESOURCES dicts from every resources/*.py module (later issues add them)."""
    import resources as pkg

    merged: dict[str, Any] = {}
    for mod in submodules(pkg):
        merged.update(getattr(mod, "RESOURCES", {}))
    return merged


def deployment_executor() -> Any:
    """The executor of the selected deployment (ROBODATA_DEPLOYMENT): multiprocess locally, k8s in prod."""
    from resources.deployment import EXECUTOR

    return EXECUTOR
