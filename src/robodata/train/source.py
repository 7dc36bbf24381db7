"""What a training data builder returns (data.py's DATA_BUILDERS): a dataset, its Stateful sampler
and the data's lineage. Its own module so builders (manifest_source.py) and the loader (data.py)
both depend on it and not on each other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class DataSource:
    dataset: Any  # a map-style torch Dataset
    sampler: Any  # Stateful distributed sampler
    lineage: dict[str, Any] = field(default_factory=dict)  # manifest hash, catalog version, ...
