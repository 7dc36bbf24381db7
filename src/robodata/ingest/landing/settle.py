"""Claiming landing entries only once they are whole (the sensors' side; Dagster-free).

A listed entry (robodata.ingest.landing.scan: a folder format only once its marker is there) is
claimed into a batch when it is complete:

* its name is not an upload's temporary name (`TEMP_SUFFIXES`: the writer renames it when done, as
  the edge uploader does with `<name>.partial`);
* it is **settled**: its signature (files, bytes and newest modification time over the whole entry,
  every file of a folder) was the same on two ticks at least `settle_s` apart, so a copy that is
  still writing, or writing another file of the folder, is not cut;
* and its format says it is whole (`format_complete`: an MCAP file ends with its footer magic, an
  HDF5 file is as long as its superblock's end-of-file address) or, for an entry that never will
  be (a truncated recording, a folder whose marker never comes), it stayed settled for
  `incomplete_after_s`: then it is claimed as it is, and ingestion quarantines it with the reason.
  A folder no importer claims yet (no marker: `unrecognized`) waits the same way, since its marker
  may be the file still to come (an unrecognized file is claimed once settled).

`settle_s` 0 claims an entry on sight (tests, hand-cut batches). The state (`SettleState`, part of
the sensor's cursor) holds only the entries seen but not claimed yet.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import Any

from robodata.ingest.landing.scan import LandingItem
from robodata.storage import objects

TEMP_SUFFIXES = (".partial", ".part", ".tmp", ".crdownload", ".download")
MCAP_MAGIC = b"\x89MCAP0\r\n"
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"


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
    """Whether the item's format says the file is whole (True for formats without such a check)."""
    base = _base(item.uri)
    kind = item.kind
    if kind not in ("mcap", "hdf5"):
        return True
    try:
        with objects.filesystem(base, storage_options).open(base, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            if kind == "mcap":
                f.seek(max(size - len(MCAP_MAGIC), 0))
                return f.read(len(MCAP_MAGIC)) == MCAP_MAGIC
            f.seek(0)
            eof = _hdf5_eof(f.read(128))
            return eof is None or size >= eof
    except OSError:
        return True  # unreadable: settled is all we can know; ingestion says why


def _hdf5_eof(head: bytes) -> int | None:
    """The end-of-file address of an HDF5 superblock at offset 0 (None when not found)."""
    if not head.startswith(HDF5_MAGIC) or len(head) < 24:
        return None
    version = head[8]
    if version in (0, 1):
        size_o = head[13]
        at = 24 + (4 if version == 1 else 0) + 2 * size_o  # base address, free-space address
    elif version in (2, 3):
        size_o = head[9]
        at = 12 + 2 * size_o  # base address, superblock extension address
    else:
        return None
    fmt = {4: "<I", 8: "<Q"}.get(size_o)
    if fmt is None or len(head) < at + size_o:
        return None
    return int(struct.unpack_from(fmt, head, at)[0])


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
        whole = not (it.kind == "unrecognized" and sig[3]) and format_complete(it, storage_options)
        if whole or stable_s >= incomplete_after_s:
            out.append(it)
            del state.seen[it.name]
    for name in [n for n in state.seen if n not in listed]:  # renamed or removed before it settled
        del state.seen[name]
    return out
