"""Each format's opener: one landing item (a local path, `#<episode>` for fragments) -> RawEpisode,
its importer called with what it is told (robodata.ingest.importers.options). Importers are
imported when an item of theirs is opened, never before (h5py, rosbags, zarr load on demand)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from robodata.ingest.importers.options import ImportOptions
    from robodata.ingest.raw import RawEpisode
    from robodata.ingest.topics import TopicMap


@dataclass(frozen=True)
class OpenContext:
    topic_map: TopicMap
    decode_threads: int
    options: ImportOptions


def legacy(uri: str, ctx: OpenContext) -> RawEpisode:
    from robodata.ingest.importers.legacy import open_legacy

    return open_legacy(uri, decode_threads=ctx.decode_threads)


def bag(uri: str, ctx: OpenContext) -> RawEpisode:
    from robodata.ingest.importers.bag import open_bag

    return open_bag(uri, ctx.topic_map, ctx.options.msgs, ctx.options.keep_image_mb << 20)


def lerobot(uri: str, ctx: OpenContext) -> RawEpisode:
    from robodata.ingest.importers.lerobot import open_lerobot

    return open_lerobot(uri)


def rlds(uri: str, ctx: OpenContext) -> RawEpisode:
    from robodata.ingest.importers.rlds import open_rlds

    return open_rlds(uri, ctx.options.key_map)


def zarr(uri: str, ctx: OpenContext) -> RawEpisode:
    from robodata.ingest.importers.zarr_buffer import open_zarr

    return open_zarr(uri, ctx.options.key_map, ctx.options.bounds)


def hdf5(uri: str, ctx: OpenContext) -> RawEpisode:
    from robodata.ingest.importers.hdf5 import open_hdf5

    return open_hdf5(uri, ctx.options.key_map, ctx.options.bounds)


def lerobot_episode_files(base: str, frag: str, local: str, opts: dict[str, Any]) -> None:
    """A remote LeRobot item after meta/: stage the data and video files of episode `frag`
    (never the whole dataset)."""
    from robodata.errors import RobodataError
    from robodata.ingest.importers.lerobot import episode_files
    from robodata.ingest.raw import RawEpisodeError, relocated
    from robodata.storage import objects

    try:
        index = int(frag or 0)
    except ValueError:
        return  # open_lerobot reports the bad index
    try:
        objects.fetch_into(base, episode_files(local, index), local, opts)
    except RobodataError as exc:
        raise relocated(exc, local, base) from None
    except OSError as exc:
        raise RawEpisodeError(f"{base}#{frag}: cannot stage ({type(exc).__name__}: {exc})") from None
