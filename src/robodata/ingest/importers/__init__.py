"""Importers: each turns one landing-zone item into a RawEpisode (robodata.ingest.raw)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from robodata.errors import RobodataError
from robodata.ingest.importers.bounds import bounded
from robodata.ingest.importers.options import ImportOptions
from robodata.ingest.landing.kinds import lfs_pointers, lfs_reason
from robodata.ingest.raw import RawEpisode, RawEpisodeError, relocated
from robodata.ingest.topics import TopicMap
from robodata.names import confine
from robodata.storage import StorageLocation, objects


def open_raw(
    uri: str,
    kind: str,
    topic_map: TopicMap | None = None,
    decode_threads: int = 2,
    options: ImportOptions | None = None,
) -> RawEpisode:
    """Open one landing item of the given kind with its format's opener (robodata.ingest.formats).

    The episode's id and stream names have passed `RawEpisode.check_identity` (robodata.names);
    a bad one raises UnsafeNameError naming the file and field, like any other RobodataError a
    bad item raises here: the caller quarantines that item. An item whose files are Git LFS
    pointers is refused as such (robodata.ingest.landing.kinds.lfs_reason). What the episode
    declares, and the CPU its frames cost, are bounded by its size (robodata.ingest.importers.bounds)."""
    from robodata.ingest import formats

    started_cpu = time.process_time()
    opts = options or ImportOptions()
    fmt = formats.of(kind)
    if fmt is None:
        raise RawEpisodeError(f"{uri}: unknown landing item kind {kind!r}")
    ctx = formats.OpenContext(topic_map or opts.topic_map, decode_threads, opts)
    try:
        raw = fmt.opener(uri, ctx)
    except RobodataError:
        base = fmt.split(uri)[0]
        if "://" not in base and (pointers := lfs_pointers(base)):  # the real cause, named
            raise RawEpisodeError(lfs_reason(uri, pointers)) from None
        raise
    raw.check_identity()
    if fmt is formats.LEROBOT:  # video: a still scene's AV1 / H.264 honestly decodes to 1000s x its bytes
        return raw
    return bounded(raw, fmt.split(uri)[0], opts.bounds, started_cpu)


def _in_landing_zone(base: str) -> None:
    """A local item must resolve inside the folder that lists it: an item that is itself a
    symlink to elsewhere (or reached through one) is refused (UnsafeNameError)."""
    p = Path(base)
    confine(p.parent, p.name, field="landing item", source=base)


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
    The episode keeps the landing uri; a format that stages in parts (LeRobot `<dir>#<index>`:
    meta/, then that episode's files) is staged so (robodata.ingest.formats)."""
    from robodata.ingest import formats

    fmt = formats.of(kind)
    base, sep, frag = fmt.split(uri) if fmt is not None else (uri, "", "")
    first = fmt.stage_first if fmt is not None else None
    remote = objects.is_remote(base)
    opts = StorageLocation.from_env(base).fsspec_options() if remote else {}
    if not remote:
        _in_landing_zone(base)
    with ExitStack() as stack:
        try:
            local = stack.enter_context(objects.local_input(base, opts, only=list(first) if first else None))
        except FileNotFoundError:
            raise RawEpisodeError(f"{uri}: missing") from None
        except OSError as exc:
            raise RawEpisodeError(f"{uri}: cannot stage ({type(exc).__name__}: {exc})") from None
        if remote and fmt is not None and fmt.stage_rest is not None:
            fmt.stage_rest(base, frag, local, opts)
        try:
            raw = open_raw(local + sep + frag, kind, topic_map, decode_threads, options)
        except RobodataError as exc:
            raise relocated(exc, local, base) from None
        raw.uri = uri
        yield raw


__all__ = ["ImportOptions", "open_raw", "staged_raw", "RawEpisode", "RawEpisodeError"]
