"""Landing zone: list complete raw recordings under a local dir or an fsspec URL (s3://...).

Which entry is which format's, and when it is complete, is the format registry's to say
(robodata.ingest.formats: a file by its suffix, once renamed from `.partial`; a folder by its
completion marker, e.g. `_COMPLETE`, `metadata.yaml`, `meta/info.json`; RLDS folders by a probe).
A format whose entries hold many episodes lists one item per episode (`uri = <base>#<episode>`).
Every other entry becomes an `unrecognized` item, hidden (dot-prefixed) ones included, so that it
is a quarantine row with a reason naming what it looks like (robodata.ingest.landing.kinds), never
nothing. A url that is itself a recording folder (a LeRobot dataset given directly) is listed as
its one entry.
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
from dataclasses import dataclass, field
from typing import Any

from robodata.config import require
from robodata.ingest import formats
from robodata.ingest.formats import Entry
from robodata.ingest.landing.item import LandingItem
from robodata.storage import StorageLocation, objects

__all__ = ["LandingCursor", "LandingItem", "new_items", "scan"]


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


def _marker(fs, path: str) -> tuple[formats.Format, dict] | None:
    """The format whose completion marker the folder holds (the first, in registry order), and the
    marker's info."""
    for marker, fmt in formats.markers():
        try:  # one odd entry never fails the listing
            return fmt, fs.info(_join(fs, path, marker))
        except (FileNotFoundError, NotADirectoryError):
            continue
    return None


def _folder(fs, path: str, full: str, name: str, entry: dict, since: float, escapes: bool, local: bool, so):
    hit = _marker(fs, path)
    if hit is not None:
        fmt, minfo = hit
        if _mtime(minfo) < since:
            return
        if escapes:  # out of the landing zone: listed (the importer quarantines it), never read here
            yield LandingItem(full + fmt.unread, fmt.kind, 0, _mtime(minfo), name)
        elif fmt.lister is not None:
            yield from fmt.lister(Entry(fs, path, full, name, -1, _mtime(minfo), fmt.kind, so))
        else:
            yield LandingItem(full, fmt.kind, int(fs.du(path)), _mtime(minfo), name)
        return
    if _mtime(entry) < since:
        return
    for fmt in formats.probes():  # e.g. a TFDS dataset (dataset_info.json here or in its version folder)
        if not escapes and local and fmt.probe is not None and fmt.probe(path):
            if fmt.lister is None:
                yield LandingItem(full, fmt.kind, int(fs.du(path)), _mtime(entry), name)
            else:
                yield from fmt.lister(Entry(fs, path, full, name, -1, _mtime(entry), fmt.kind, so))
            return
    # no format claims the folder: one unrecognized item (its reason is found when aligned)
    yield LandingItem(full, formats.UNRECOGNIZED, 0, _mtime(entry), name)


def _file(fs, path: str, full: str, name: str, entry: dict, since: float, escapes: bool, so):
    if _mtime(entry) < since:
        return
    fmt, size = formats.for_file(name), int(entry.get("size") or 0)
    if fmt is None:
        yield LandingItem(full, formats.UNRECOGNIZED, size, _mtime(entry), name)
    elif fmt.lister is not None and not escapes:
        yield from fmt.lister(Entry(fs, path, full, name, size, _mtime(entry), fmt.kind, so))
    else:
        yield LandingItem(full + (fmt.unread if escapes else ""), fmt.kind, size, _mtime(entry), name)


def scan(url: str, storage_options: dict | None = None, completed_since: float = 0.0) -> Iterator[LandingItem]:
    """Every complete item directly under `url` completed at or after `completed_since` (no
    particular order). Remote URLs without explicit options use the AWS_* variables
    (StorageLocation.from_env), like the storage root. A `url` that is itself a recording folder
    (a LeRobot dataset, a ROS 2 bag, ... given directly) is listed as its one entry."""
    if storage_options is None and objects.is_remote(url):
        storage_options = StorageLocation.from_env(url).fsspec_options()
    fs = objects.filesystem(url, storage_options)  # remote: no listing cache (a sensor must see arrivals)
    root = fs._strip_protocol(url).rstrip("/") or "/"
    if not fs.exists(root):
        return
    local = not objects.is_remote(url)
    so = storage_options
    if fs.isdir(root) and _claimed(fs, root, local):
        info = fs.info(root)
        name = root.rsplit("/", 1)[-1]
        yield from _folder(fs, root, _unstrip(url, fs, root), name, info, completed_since, False, local, so)
        return
    for entry in fs.ls(root, detail=True):
        path = entry["name"]
        name = path.rstrip("/").rsplit("/", 1)[-1]
        if name.endswith(".partial"):  # still being uploaded: listed once renamed
            continue
        full = _unstrip(url, fs, path)
        escapes = False
        if entry.get("islink"):  # a local symlink: listed like what it points at
            try:
                entry = {**fs.info(path), "name": path}
            except OSError:  # dangling: still an entry, quarantined with its reason
                if _mtime(entry) >= completed_since:
                    yield LandingItem(full, formats.UNRECOGNIZED, 0, _mtime(entry), name)
                continue
            escapes = not os.path.realpath(path).startswith(os.path.realpath(root) + os.sep)
        if name.startswith("."):  # hidden (OS metadata, an rsync temporary): a row with its reason
            if _mtime(entry) >= completed_since:
                yield LandingItem(full, formats.UNRECOGNIZED, int(entry.get("size") or 0), _mtime(entry), name)
        elif entry["type"] != "directory":  # a file, or a link fsspec did not follow ("other")
            yield from _file(fs, path, full, name, entry, completed_since, escapes, so)
        else:
            yield from _folder(fs, path, full, name, entry, completed_since, escapes, local, so)


def _claimed(fs, path: str, local: bool) -> bool:
    """Whether a folder is itself a recording some format claims (by marker, or a local probe)."""
    return _marker(fs, path) is not None or (
        local and any(f.probe is not None and f.probe(path) for f in formats.probes())
    )


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
