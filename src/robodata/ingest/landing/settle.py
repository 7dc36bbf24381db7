"""Claiming landing entries only once they are whole (the sensors' side; Dagster-free).

A listed entry (robodata.ingest.landing.scan: a folder format only once its marker is there) is
claimed into a batch when it is complete:

* its name is not an upload's temporary name (`TEMP_SUFFIXES`: the writer renames it when done, as
  the edge uploader does with `<name>.partial`);
* it is **settled**: its signature (files, bytes and newest modification time over the whole entry,
  every file of a folder) was the same on two ticks at least `settle_s` apart, so a copy that is
  still writing, or writing another file of the folder, is not cut;
* and its format says it is whole (`format_complete` asks the format's registry entry,
  robodata.ingest.formats.whole: an MCAP file ends with its footer magic, an HDF5 file is as long
  as its superblock's end-of-file address; a folder format is listed only once its marker is
  there) or, for an entry that never will be (a truncated recording, a folder whose marker never
  comes), it stayed settled for `incomplete_after_s`: then it is claimed as it is, and ingestion
  quarantines it with the reason.
  A folder no importer claims yet (no marker: `unrecognized`) waits the same way, since its marker
  may be the file still to come (an unrecognized file is claimed once settled).

`settle_s` 0 claims an entry on sight (tests, hand-cut batches). The state (`SettleState`, part of
the sensor's cursor) holds only the entries seen but not claimed yet.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from robodata.ingest import formats
from robodata.ingest.landing.scan import LandingItem
from robodata.storage import objects

TEMP_SUFFIXES = (".partial", ".part", ".tmp", ".crdownload", ".download")


def is_temporary(name: str) -> bool:
    return name.lower().endswith(TEMP_SUFFIXES)


def _base(uri: str) -> str:
    return uri.split("#", 1)[0]


def signature(uri: str, storage_options: dict | None = None) -> list[float]:
    """[files, bytes, newest mtime, is a folder] of the entry `uri` (its base, for one episode of a dataset)."""
    base = _base(uri)
    fs = objects.filesystem(base, storage_options)
    path = fs._strip_protocol(base)
    if not objects.is_remote(base):
        if os.path.islink(path) or not os.path.isdir(path):
            st = os.lstat(path)
            return [1, st.st_size, st.st_mtime, 0]
        n, size, newest = 0, 0, os.lstat(path).st_mtime
        for dirpath, _dirs, files in os.walk(path, followlinks=False):
            for f in files:
                st = os.lstat(os.path.join(dirpath, f))
                n, size, newest = n + 1, size + st.st_size, max(newest, st.st_mtime)
        return [n, size, newest, 1]
    folder = fs.isdir(path)
    infos = fs.find(path, detail=True, withdirs=False) if folder else {path: fs.info(path)}
    mtimes = [_mtime(i) for i in infos.values()]
    return [len(infos), sum(int(i.get("size") or 0) for i in infos.values()), max(mtimes, default=0.0), int(folder)]


def _mtime(info: dict[str, Any]) -> float:
    for k in ("mtime", "LastModified", "last_modified", "created"):
        v = info.get(k)
        if v is not None:
            return v.timestamp() if hasattr(v, "timestamp") else float(v)
    return 0.0


def format_complete(item: LandingItem, storage_options: dict | None = None) -> bool:
    """Whether the item's format says the file is whole (its registry entry's `whole` check:
    robodata.ingest.formats.whole); True for formats without such a check."""
    fmt = formats.of(item.kind)
    if fmt is None or fmt.whole is None:
        return True
    base = _base(item.uri)
    try:
        with objects.filesystem(base, storage_options).open(base, "rb") as f:
            return fmt.whole(f, f.seek(0, os.SEEK_END))
    except OSError:
        return True  # unreadable: settled is all we can know; ingestion says why


@dataclass
class SettleState:
    """Entries seen but not claimed: name -> [signature, since (first tick with it), uri, completed_at]."""

    seen: dict[str, list[Any]] = field(default_factory=dict)

    def state_dict(self) -> dict[str, Any]:
        return {"seen": self.seen}

    def load_state_dict(self, d: dict[str, Any]) -> None:
        self.seen = {str(k): list(v) for k, v in d.get("seen", {}).items()}

    def oldest(self) -> float | None:
        """The earliest completion time among the waiting entries (the listing must reach back to it)."""
        return min((float(v[3]) for v in self.seen.values()), default=None)


def claim(
    items: list[LandingItem],
    state: SettleState,
    now: float,
    settle_s: float,
    incomplete_after_s: float,
    storage_options: dict | None = None,
) -> list[LandingItem]:
    """The items complete at `now` (see the module docstring); the others are remembered in `state`."""
    if settle_s <= 0:
        state.seen.clear()
        return [it for it in items if not is_temporary(it.name)]
    out: list[LandingItem] = []
    sigs: dict[str, list[float]] = {}
    listed: set[str] = set()
    for it in items:
        if is_temporary(it.name):
            continue
        listed.add(it.name)
        base = _base(it.uri)
        try:
            sig = sigs[base] if base in sigs else sigs.setdefault(base, signature(it.uri, storage_options))
        except OSError:  # gone between the listing and now (a rename): look again next tick
            state.seen.pop(it.name, None)
            continue
        held = state.seen.get(it.name)
        if held is None or held[0] != sig or held[2] != it.uri:
            state.seen[it.name] = [sig, now, it.uri, it.completed_at]
            continue
        stable_s = now - float(held[1])
        if stable_s < settle_s:
            continue
        whole = not (it.kind == formats.UNRECOGNIZED and sig[3]) and format_complete(it, storage_options)
        if whole or stable_s >= incomplete_after_s:
            out.append(it)
            del state.seen[it.name]
    for name in [n for n in state.seen if n not in listed]:  # renamed or removed before it settled
        del state.seen[name]
    return out
