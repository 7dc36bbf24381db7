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
    # its content digest (robodata.ingest.landing.dedup) where the landing sensor computed one to
    # compare with the catalog: carried through the batch manifest so alignment does not read the
    # item's bytes again for it; "" where nothing computed it (`robodata ingest`, older manifests)
    digest: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
