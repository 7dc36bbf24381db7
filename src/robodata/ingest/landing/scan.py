"""Landing zone: list complete raw recordings under a local dir or an fsspec URL (s3://...).

An item is complete when it can be read in full:
  legacy-jpeg  `<id>/` with a `_COMPLETE` marker (written last by the uploader)
  mcap         `<id>.mcap` (uploaders write `.partial` and rename / multipart-complete)
  ros2-bag     `<id>/metadata.yaml` (rosbag2 writes it on close)
  lerobot-*    `<name>/meta/info.json`: one item per episode, `uri = <dir>#<episode_index>`
  hdf5         `<name>.hdf5|.h5`: one item per `data/demo_*` group (`uri = <file>#data/demo_N`),
               else the file (ALOHA `episode_N.hdf5`)
  zarr         `<name>/meta/episode_ends` (replay buffer): one item per episode, `uri = <dir>#<index>`
  rlds         `<name>/[<version>/]dataset_info.json` + TFRecord shards (local): one item per RLDS
               episode, `uri = <dir>#<shard>:<index>:<offset>`
  unrecognized any other entry (robodata.ingest.landing.kinds): listed so that it becomes a
               quarantine row with a reason naming what it looks like, never nothing
The cursor is a completion-time watermark plus the names completed at that instant, so its
size does not grow with the number of items seen; items younger than `settle_s` wait a tick.
An item completed before the watermark costs its completion check only: it is not sized
(`du`, a recursive listing: ~50 list pages for a 10-minute JPEG episode on S3) and a LeRobot
dataset's meta/ is not staged. A local symlink that leads out of the landing zone is listed (its
marker stat'ed, nothing read or listed through it) so that ingestion quarantines it with a reason.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from robodata.config import require
from robodata.ingest.landing.kinds import file_kind
from robodata.storage import StorageLocation, objects


@dataclass(frozen=True)
class LandingItem:
    uri: str
    kind: str
    size_bytes: int
    completed_at: float  # unix seconds (marker / file modification time)
    name: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _mtime(info: dict) -> float:
    for k in ("mtime", "LastModified", "last_modified", "created"):
        v = info.get(k)
        if v is None:
            continue
        return v.timestamp() if hasattr(v, "timestamp") else float(v)
    return 0.0


def _join(fs, *parts: str) -> str:
    return "/".join(p.rstrip("/") for p in parts)


def _unstrip(url: str, fs, path: str) -> str:
    proto = fs.protocol[0] if isinstance(fs.protocol, (tuple, list)) else fs.protocol
    return path if proto in ("file", "local") else f"{proto}://{path}"


def _lerobot_items(fs, path: str, url: str, info_meta: dict, storage_options: dict | None) -> Iterator[LandingItem]:
    from robodata.ingest.importers.lerobot import dataset_episodes

    try:  # the episode list lives under meta/ (staged locally when the landing zone is remote)
        with objects.local_input(url, storage_options, only=["meta"]) as local:
            episodes = dataset_episodes(local)
    except Exception:  # unreadable dataset: surface it as one item that will fail QC with a reason
        yield LandingItem(url + "#0", "lerobot", 0, _mtime(info_meta), path.rsplit("/", 1)[-1])
        return
    total = sum(e.length for e in episodes) or 1
    size = fs.du(path)
    for e in episodes:
        yield LandingItem(
            f"{url}#{e.index}",
            f"lerobot-{e.version}",
            int(size * e.length / total),
            _mtime(info_meta),
            f"{path.rsplit('/', 1)[-1]}#{e.index:06d}",
        )


def _zarr_items(fs, path: str, full: str, minfo: dict, storage_options: dict | None) -> Iterator[LandingItem]:
    """One item per episode of a replay buffer (`<store>#<index>`); an unreadable one is one item."""
    from robodata.ingest.importers.zarr_buffer import episode_ends

    name = path.rstrip("/").rsplit("/", 1)[-1]
    try:
        ends = episode_ends(full, storage_options)
    except Exception:  # its importer quarantines it with the reason
        yield LandingItem(full + "#0", "zarr", 0, _mtime(minfo), name)
        return
    size, total = int(fs.du(path)), int(ends[-1]) if len(ends) else 0
    for i in range(len(ends)):
        steps = int(ends[i]) - (int(ends[i - 1]) if i else 0)
        yield LandingItem(f"{full}#{i}", "zarr", size * steps // max(total, 1), _mtime(minfo), f"{name}#{i:06d}")
    if not len(ends):  # zero episodes: still a row
        yield LandingItem(full + "#0", "zarr", 0, _mtime(minfo), name)


def _is_tfds(path: str) -> bool:
    from pathlib import Path

    p = Path(path)
    return (p / "dataset_info.json").is_file() or any(p.glob("*/dataset_info.json"))


def _rlds_items(path: str, full: str, mtime: float, name: str) -> Iterator[LandingItem]:
    """One item per RLDS episode (TFRecord record): `uri = <dataset>#<shard>:<index>:<offset>`
    (local datasets: the shards' record headers are read, their data skipped)."""
    from pathlib import Path

    from robodata.ingest.importers.rlds import list_episodes

    try:
        eps = list_episodes(Path(path))
    except Exception:  # its importer quarantines it with the reason
        eps = []
    size = int(sum(f.stat().st_size for f in Path(path).rglob("*.tfrecord*")))
    for e in eps:
        yield LandingItem(f"{full}#{e}", "rlds", size // len(eps), mtime, f"{name}#{e.rsplit(':', 1)[0]}")
    if not eps:
        yield LandingItem(full + "#-:0:0", "rlds", 0, mtime, name)


def _hdf5_items(fs, path: str, full: str, size: int, mtime: float, name: str) -> Iterator[LandingItem]:
    """One item per `data/demo_*` group of a robomimic-style file, else one for the file (an
    unreadable file too: its importer quarantines it with the reason)."""
    from robodata.ingest.importers.hdf5 import list_groups

    try:
        with fs.open(path, "rb") as f:
            groups = list_groups(f)
    except Exception:  # h5py: OSError for a truncated file, and others for garbage
        groups = []
    for g in groups:
        yield LandingItem(f"{full}#{g}", "hdf5", size // len(groups), mtime, f"{name}#{g}")
    if not groups:
        yield LandingItem(full, "hdf5", size, mtime, name)


def scan(url: str, storage_options: dict | None = None, completed_since: float = 0.0) -> Iterator[LandingItem]:
    """Every complete item directly under `url` completed at or after `completed_since` (no
    particular order). Remote URLs without explicit options use the AWS_* variables
    (StorageLocation.from_env), like the storage root."""
    if storage_options is None and objects.is_remote(url):
        storage_options = StorageLocation.from_env(url).fsspec_options()
    fs = objects.filesystem(url, storage_options)  # remote: no listing cache (a sensor must see arrivals)
    root = fs._strip_protocol(url)
    if not fs.exists(root):
        return
    for entry in fs.ls(root, detail=True):
        path = entry["name"]
        name = path.rstrip("/").rsplit("/", 1)[-1]
        if name.startswith(".") or name.endswith(".partial"):
            continue
        full = _unstrip(url, fs, path)
        escapes = False
        if entry.get("islink"):  # a local symlink: listed like what it points at
            try:
                entry = {**fs.info(path), "name": path}
            except OSError:  # dangling: still an entry, quarantined with its reason
                if _mtime(entry) >= completed_since:
                    yield LandingItem(full, "unrecognized", 0, _mtime(entry), name)
                continue
            escapes = not os.path.realpath(path).startswith(os.path.realpath(root) + os.sep)
        if entry["type"] != "directory":  # a file, or a link fsspec did not follow ("other")
            if _mtime(entry) < completed_since:
                continue
            kind, size = file_kind(name), int(entry.get("size") or 0)
            if kind == "hdf5" and not escapes:
                yield from _hdf5_items(fs, path, full, size, _mtime(entry), name)
            else:
                yield LandingItem(full, kind, size, _mtime(entry), name)
            continue
        for marker, kind in (
            ("_COMPLETE", "legacy-jpeg"),
            ("metadata.yaml", "ros2-bag"),
            ("meta/info.json", "lerobot"),
            ("meta/episode_ends/.zarray", "zarr"),  # Zarr v2 replay buffer (diffusion_policy / UMI)
            ("meta/episode_ends/zarr.json", "zarr"),  # Zarr v3
        ):
            mpath = _join(fs, path, marker)
            try:
                minfo = fs.info(mpath)
            except (FileNotFoundError, NotADirectoryError):  # one odd entry never fails the listing
                continue
            if _mtime(minfo) < completed_since:
                break
            if escapes:  # out of the landing zone: listed (the importer quarantines it), never read here
                yield LandingItem(full + ("#0" if kind == "lerobot" else ""), kind, 0, _mtime(minfo), name)
            elif kind == "lerobot":
                yield from _lerobot_items(fs, path, full, minfo, storage_options)
            elif kind == "zarr":
                yield from _zarr_items(fs, path, full, minfo, storage_options)
            else:
                yield LandingItem(full, kind, int(fs.du(path)), _mtime(minfo), name)
            break
        else:  # a TFDS dataset (dataset_info.json here or in its version folder), or unrecognized
            if _mtime(entry) < completed_since:
                continue
            rlds = not escapes and not objects.is_remote(url) and _is_tfds(path)
            if rlds:
                yield from _rlds_items(path, full, _mtime(entry), name)
            else:  # no importer claims the folder: one unrecognized item (its reason is found when aligned)
                yield LandingItem(full, "unrecognized", 0, _mtime(entry), name)


@dataclass
class LandingCursor:
    """Completion watermark: items with (completed_at, name) after it are new."""

    watermark: float = 0.0
    names_at_watermark: list[str] = field(default_factory=list)

    def is_new(self, item: LandingItem) -> bool:
        return item.completed_at > self.watermark or (
            item.completed_at == self.watermark and item.name not in self.names_at_watermark
        )

    def advance(self, items: list[LandingItem]) -> None:
        for it in items:
            if it.completed_at > self.watermark:
                self.watermark, self.names_at_watermark = it.completed_at, [it.name]
            elif it.completed_at == self.watermark and it.name not in self.names_at_watermark:
                self.names_at_watermark.append(it.name)

    def state_dict(self) -> dict[str, Any]:
        return {"watermark": self.watermark, "names_at_watermark": list(self.names_at_watermark)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.watermark = float(state.get("watermark", 0.0))
        self.names_at_watermark = list(state.get("names_at_watermark", []))

    def to_json(self) -> str:
        return json.dumps(self.state_dict())

    @classmethod
    def from_json(cls, s: str | None) -> LandingCursor:
        c = cls()
        if s:
            c.load_state_dict(json.loads(s))
        return c


def new_items(
    url: str,
    cursor: LandingCursor,
    settle_s: float = 0.0,
    limit: int = 100_000,
    storage_options: dict | None = None,
    now: float | None = None,
) -> list[LandingItem]:
    """New, settled items in completion order (at most `limit`); does not move the cursor."""
    require(limit >= 1, "limit must be >= 1")
    now = time.time() if now is None else now
    fresh = [
        it
        for it in scan(url, storage_options, completed_since=cursor.watermark)
        if cursor.is_new(it) and it.completed_at <= now - settle_s
    ]
    fresh.sort(key=lambda it: (it.completed_at, it.name))
    if len(fresh) > limit:  # never split one completion instant across two calls
        cut = fresh[limit - 1].completed_at
        fresh = [it for it in fresh if it.completed_at < cut] or [it for it in fresh if it.completed_at == cut]
    return fresh
