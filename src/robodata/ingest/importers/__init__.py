"""Importers: each turns one landing-zone item into a RawEpisode (robodata.ingest.raw)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from robodata.ingest.raw import RawEpisode, RawEpisodeError
from robodata.ingest.topics import TopicMap
from robodata.storage import StorageLocation, objects


def open_raw(uri: str, kind: str, topic_map: TopicMap | None = None, decode_threads: int = 2) -> RawEpisode:
    """Open one landing item of the given kind (see robodata.ingest.landing.scan.detect_kind)."""
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


def _fetch_lerobot_episode(base: str, frag: str, local: str, opts: dict) -> None:
    """After meta/: stage the data and video files of episode `frag` (never the whole dataset)."""
    from robodata.ingest.importers.lerobot import episode_files

    try:
        index = int(frag or 0)
    except ValueError:
        return  # open_lerobot reports the bad index
    try:
        objects.fetch_into(base, episode_files(local, index), local, opts)
    except RawEpisodeError as exc:
        raise RawEpisodeError(str(exc).replace(local, base)) from None
    except OSError as exc:
        raise RawEpisodeError(f"{base}#{frag}: cannot stage ({type(exc).__name__}: {exc})") from None


@contextmanager
def staged_raw(uri: str, kind: str, topic_map: TopicMap | None = None, decode_threads: int = 2) -> Iterator[RawEpisode]:
    """open_raw for an item anywhere: a local path as is; an object-store item (s3://, endpoint and
    credentials from the AWS_* variables) staged to local scratch for the block, then deleted.
    The episode keeps the landing uri; a LeRobot `<dir>#<index>` stages meta/ and that episode's files."""
    lerobot = kind.startswith("lerobot")
    base, sep, frag = uri.partition("#") if lerobot else (uri, "", "")
    opts = StorageLocation.from_env(base).fsspec_options() if objects.is_remote(base) else {}
    with ExitStack() as stack:
        try:
            local = stack.enter_context(objects.local_input(base, opts, only=["meta"] if lerobot else None))
        except FileNotFoundError:
            raise RawEpisodeError(f"{uri}: missing") from None
        except OSError as exc:
            raise RawEpisodeError(f"{uri}: cannot stage ({type(exc).__name__}: {exc})") from None
        if lerobot:
            _fetch_lerobot_episode(base, frag, local, opts)
        try:
            raw = open_raw(local + sep + frag, kind, topic_map, decode_threads)
        except RawEpisodeError as exc:
            raise RawEpisodeError(str(exc).replace(local, base)) from None
        raw.uri = uri
        yield raw


__all__ = ["open_raw", "staged_raw", "RawEpisode", "RawEpisodeError"]
