"""Importers: each turns one landing-zone item into a RawEpisode (robodata.ingest.raw)."""

from __future__ import annotations

from robodata.ingest.raw import RawEpisode, RawEpisodeError
from robodata.ingest.topics import TopicMap


def open_raw(uri: str, kind: str, topic_map: TopicMap | None = None, decode_threads: int = 2) -> RawEpisode:
    """Open one landing item of the given kind (see robodata.ingest.landing.detect_kind)."""
    if kind == "legacy-jpeg":
        from robodata.ingest.importers.legacy import open_legacy

        return open_legacy(uri, decode_threads=decode_threads)
    if kind in ("mcap", "ros2-bag"):
        from robodata.ingest.importers.bag import open_bag

        return open_bag(uri, topic_map or TopicMap.default())
    if kind.startswith("lerobot"):
        from robodata.ingest.importers.lerobot import open_lerobot

        return open_lerobot(uri)
    raise RawEpisodeError(f"{uri}: unknown landing item kind {kind!r}")


__all__ = ["open_raw", "RawEpisode", "RawEpisodeError"]
