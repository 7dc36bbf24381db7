"""Importers: each turns one landing-zone item into a RawEpisode (robodata.ingest.raw)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from robodata.errors import RobodataError
from robodata.ingest.importers.options import ImportOptions
from robodata.ingest.raw import RawEpisode, RawEpisodeError
from robodata.ingest.topics import TopicMap
from robodata.names import UnsafeNameError, confine
from robodata.storage import StorageLocation, objects


def open_raw(
    uri: str,
    kind: str,
    topic_map: TopicMap | None = None,
    decode_threads: int = 2,
    options: ImportOptions | None = None,
) -> RawEpisode:
    """Open one landing item of the given kind (see robodata.ingest.landing.scan.detect_kind).

    The episode's id and stream names have passed `RawEpisode.check_identity` (robodata.names);
    a bad one raises UnsafeNameError naming the file and field, like any other RobodataError a
    bad item raises here: the caller quarantines that item."""
    opts = options or ImportOptions()
    raw = _open(uri, kind, topic_map or opts.topic_map, decode_threads, opts)
    raw.check_identity()
    return raw


def _open(uri: str, kind: str, topic_map: TopicMap, decode_threads: int, opts: ImportOptions) -> RawEpisode:
    if kind == "legacy-jpeg":
        from robodata.ingest.importers.legacy import open_legacy

        return open_legacy(uri, decode_threads=decode_threads)
    if kind in ("mcap", "ros2-bag", "ros1-bag"):
        from robodata.ingest.importers.bag import open_bag

        return open_bag(uri, topic_map, opts.msgs)
    if kind.startswith("lerobot"):
        from robodata.ingest.importers.lerobot import open_lerobot

        return open_lerobot(uri)
    if kind == "rlds":
        from robodata.ingest.importers.rlds import open_rlds

        return open_rlds(uri, opts.key_map)
    if kind == "zarr":
        from robodata.ingest.importers.zarr_buffer import open_zarr

        return open_zarr(uri, opts.key_map)
    if kind == "hdf5":
        from robodata.ingest.importers.hdf5 import open_hdf5

        return open_hdf5(uri, opts.key_map)
    raise RawEpisodeError(f"{uri}: unknown landing item kind {kind!r}")


FRAGMENT_KINDS = ("hdf5", "zarr", "rlds")  # `<item>#<episode>`: one item per episode of a file / store


def _in_landing_zone(base: str) -> None:
    """A local item must resolve inside the folder that lists it: an item that is itself a
    symlink to elsewhere (or reached through one) is refused (UnsafeNameError)."""
    p = Path(base)
    confine(p.parent, p.name, field="landing item", source=base)


def _relocated(exc: RobodataError, local: str, base: str) -> RobodataError:
    """The same error naming the landing uri instead of its local staging path."""
    if local == base:
        return exc
    if isinstance(exc, UnsafeNameError):
        return UnsafeNameError(exc.source.replace(local, base), exc.field, exc.value, exc.why.replace(local, base))
    return RawEpisodeError(str(exc).replace(local, base))


def _fetch_lerobot_episode(base: str, frag: str, local: str, opts: dict) -> None:
    """After meta/: stage the data and video files of episode `frag` (never the whole dataset)."""
    from robodata.ingest.importers.lerobot import episode_files

    try:
        index = int(frag or 0)
    except ValueError:
        return  # open_lerobot reports the bad index
    try:
        objects.fetch_into(base, episode_files(local, index), local, opts)
    except RobodataError as exc:
        raise _relocated(exc, local, base) from None
    except OSError as exc:
        raise RawEpisodeError(f"{base}#{frag}: cannot stage ({type(exc).__name__}: {exc})") from None


@contextmanager
def staged_raw(
    uri: str,
    kind: str,
    topic_map: TopicMap | None = None,
    decode_threads: int = 2,
    options: ImportOptions | None = None,
) -> Iterator[RawEpisode]:
    """open_raw for an item anywhere: a local path as is; an object-store item (s3://, endpoint and
    credentials from the AWS_* variables) staged to local scratch for the block, then deleted.
    The episode keeps the landing uri; a LeRobot `<dir>#<index>` stages meta/ and that episode's files."""
    lerobot = kind.startswith("lerobot")
    base, sep, frag = uri.partition("#") if lerobot or kind in FRAGMENT_KINDS else (uri, "", "")
    remote = objects.is_remote(base)
    opts = StorageLocation.from_env(base).fsspec_options() if remote else {}
    if not remote:
        _in_landing_zone(base)
    with ExitStack() as stack:
        try:
            local = stack.enter_context(objects.local_input(base, opts, only=["meta"] if lerobot else None))
        except FileNotFoundError:
            raise RawEpisodeError(f"{uri}: missing") from None
        except OSError as exc:
            raise RawEpisodeError(f"{uri}: cannot stage ({type(exc).__name__}: {exc})") from None
        if lerobot and remote:
            _fetch_lerobot_episode(base, frag, local, opts)
        try:
            raw = open_raw(local + sep + frag, kind, topic_map, decode_threads, options)
        except RobodataError as exc:
            raise _relocated(exc, local, base) from None
        raw.uri = uri
        yield raw


__all__ = ["ImportOptions", "open_raw", "staged_raw", "RawEpisode", "RawEpisodeError"]
