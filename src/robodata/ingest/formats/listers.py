"""How a claimed landing entry that holds many episodes becomes one item per episode.

Each lister takes the Entry the scan found and yields its items (`uri = <base>#<episode>`); an
entry it cannot read is one item all the same (its importer quarantines it with the reason), and
one that holds no episode is one item too: never nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robodata.ingest.landing.item import LandingItem
from robodata.storage import objects


@dataclass(frozen=True)
class Entry:
    """A landing entry a format claims: its fsspec file system and path, the uri items are named
    from, its name in the landing zone, size (files; -1 for folders: listers size them) and
    completion time."""

    fs: Any
    path: str
    uri: str
    name: str
    size: int
    mtime: float
    kind: str
    storage_options: dict | None = None


def lerobot(e: Entry) -> Iterator[LandingItem]:
    """One item per episode of a LeRobot dataset (`<dir>#<episode_index>`, kind `lerobot-<version>`)."""
    from robodata.ingest.importers.lerobot import dataset_episodes

    try:  # the episode list lives under meta/ (staged locally when the landing zone is remote)
        with objects.local_input(e.uri, e.storage_options, only=["meta"]) as local:
            episodes = dataset_episodes(local)
    except Exception:  # unreadable dataset: surface it as one item that will fail QC with a reason
        yield LandingItem(e.uri + "#0", e.kind, 0, e.mtime, e.name)
        return
    total = sum(ep.length for ep in episodes) or 1
    size = e.fs.du(e.path)
    for ep in episodes:
        yield LandingItem(
            f"{e.uri}#{ep.index}",
            f"{e.kind}-{ep.version}",
            int(size * ep.length / total),
            e.mtime,
            f"{e.name}#{ep.index:06d}",
        )


def zarr(e: Entry) -> Iterator[LandingItem]:
    """One item per episode of a replay buffer (`<store>#<index>`)."""
    from robodata.ingest.importers.zarr_buffer import episode_ends, past_ends

    try:
        ends = episode_ends(e.uri, e.storage_options)
    except Exception:  # its importer quarantines it with the reason
        yield LandingItem(e.uri + "#0", e.kind, 0, e.mtime, e.name)
        return
    size, total = int(e.fs.du(e.path)), int(ends[-1]) if len(ends) else 0
    for i in range(len(ends)):
        steps = int(ends[i]) - (int(ends[i - 1]) if i else 0)
        yield LandingItem(f"{e.uri}#{i}", e.kind, size * steps // max(total, 1), e.mtime, f"{e.name}#{i:06d}")
    if len(ends) and past_ends(e.uri, ends, e.storage_options)[0]:  # steps past the last end: a row saying so
        yield LandingItem(f"{e.uri}#{len(ends)}", e.kind, 0, e.mtime, f"{e.name}#{len(ends):06d}")
    if not len(ends):  # zero episodes: still a row
        yield LandingItem(e.uri + "#0", e.kind, 0, e.mtime, e.name)


def is_tfds(path: str) -> bool:
    """A local TFDS dataset folder: dataset_info.json here or in its version folder."""
    p = Path(path)
    return (p / "dataset_info.json").is_file() or any(p.glob("*/dataset_info.json"))


def rlds(e: Entry) -> Iterator[LandingItem]:
    """One item per RLDS episode (TFRecord record): `uri = <dataset>#<shard>:<index>:<offset>`
    (local datasets: the shards' record headers are read, their data skipped)."""
    from robodata.ingest.importers.rlds import list_episodes

    try:
        eps = list_episodes(Path(e.path))
    except Exception:  # its importer quarantines it with the reason
        eps = []
    size = int(sum(f.stat().st_size for f in Path(e.path).rglob("*.tfrecord*")))
    for ep in eps:
        yield LandingItem(f"{e.uri}#{ep}", e.kind, size // len(eps), e.mtime, f"{e.name}#{ep.rsplit(':', 1)[0]}")
    if not eps:
        yield LandingItem(e.uri + "#-:0:0", e.kind, 0, e.mtime, e.name)


def hdf5(e: Entry) -> Iterator[LandingItem]:
    """One item per episode group of a robomimic-style file (`data/demo_N`, or `demo_N` at the
    root), else one for the file (an unreadable file too: its importer quarantines it with the reason)."""
    from robodata.ingest.importers.hdf5 import list_groups

    try:
        with e.fs.open(e.path, "rb") as f:
            groups = list_groups(f)
    except Exception:  # h5py: OSError for a truncated file, and others for garbage
        groups = []
    for g in groups:
        yield LandingItem(f"{e.uri}#{g}", e.kind, e.size // len(groups), e.mtime, f"{e.name}#{g}")
    if not groups:
        yield LandingItem(e.uri, e.kind, e.size, e.mtime, e.name)
