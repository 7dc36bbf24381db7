"""One landing item: what the landing scan lists and ingestion reads (robodata.ingest.landing.scan)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class LandingItem:
    uri: str
    kind: str  # a format's kind (robodata.ingest.formats), or formats.UNRECOGNIZED
    size_bytes: int
    completed_at: float  # unix seconds (marker / file modification time)
    name: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
