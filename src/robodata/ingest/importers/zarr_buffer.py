"""Zarr replay buffers (diffusion_policy / UMI) -> RawEpisode, one per episode range.

Layout: `data/<key>` arrays concatenated over episodes (images (N, H, W, 3) uint8, chunked a
frame or a few at a time), `meta/episode_ends` (cumulative step counts). Item uri
`<store>#<episode index>`; streams by key map (robodata.ingest.importers.keymap). Images
are read a few whole chunks at a time inside the episode's range (bounded memory). Before any of it
is read, every chunk of the range must be present and inside the store, and what the range declares
is bounded by the chunks' bytes (robodata.ingest.importers.zarr_chunks, .bounds); episode_ends must
be integers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from robodata.errors import RobodataError
from robodata.ingest import format_kinds
from robodata.ingest.importers.bounds import WorkBounds, check_declared
from robodata.ingest.importers.fixed_rate import StepEpisode, as_rgb, declared_rate, guarded, reading, to_raw
from robodata.ingest.importers.keymap import choose
from robodata.ingest.importers.layout import KeyInfo, plan
from robodata.ingest.importers.zarr_chunks import chunk_bytes, confined_store
from robodata.ingest.raw import RawEpisode, RawEpisodeError

BLOCK = 16


def _open_group(store: str, storage_options: dict | None = None):
    import zarr

    try:
        return zarr.open_group(store, mode="r", storage_options=storage_options or None)
    except Exception as exc:  # zarr: GroupNotFoundError, FileNotFoundError, JSON errors
        raise RawEpisodeError(f"{store}: not a readable Zarr store ({type(exc).__name__}: {exc})") from None


def episode_ends(store: str, storage_options: dict | None = None) -> np.ndarray:
    return _ends(_open_group(store, storage_options), store)


def _ends(g, store: str, root: Path | None = None) -> np.ndarray:
    """meta/episode_ends of an open group (with `root`: every chunk of it present, inside the store)."""
    try:
        arr = g["meta/episode_ends"]
        if root is not None:
            chunk_bytes(arr, root, 0, int(arr.shape[0]), store)
        raw = np.asarray(arr[:]).reshape(-1)
    except RobodataError:
        raise
    except Exception as exc:
        raise RawEpisodeError(f"{store}: meta/episode_ends unreadable ({type(exc).__name__}: {exc})") from None
    if raw.dtype.kind not in "iu":  # floats would be truncated into boundaries nobody declared
        raise RawEpisodeError(f"{store}: meta/episode_ends has dtype {raw.dtype}, expected integer step counts")
    ends = raw.astype(np.int64)
    if len(ends) and (np.any(np.diff(ends) < 0) or ends[0] < 0):
        raise RawEpisodeError(f"{store}: meta/episode_ends must be non-decreasing counts, got {ends[:8].tolist()}")
    return ends


def past_ends(store: str, ends: np.ndarray, storage_options: dict | None = None) -> tuple[str, int]:
    """(key, steps) of the longest data/ array when it holds steps past meta/episode_ends' last
    (steps no episode covers), else ("", 0). The lister makes them an item of their own (index
    len(ends)) that the importer refuses naming the array: a buffer never loses steps silently."""
    last = int(ends[-1]) if len(ends) else 0
    try:
        data = _open_group(store, storage_options).get("data")
        lengths = {name: int(arr.shape[0]) for name, arr in data.arrays() if arr.shape} if data is not None else {}
    except Exception:  # unreadable arrays: the episodes' own items say why
        return "", 0
    key = max(lengths, key=lambda k: lengths[k], default="")
    return (key, lengths[key]) if key and lengths[key] > last else ("", 0)


def _arrays(g) -> dict:
    """data/<name> -> its zarr array (opened once: each open is a round trip through zarr's loop)."""
    data = g.get("data")
    return {} if data is None else dict(sorted(data.arrays()))


def _keys(arrs: dict) -> dict[str, KeyInfo]:
    out = {}
    for name, arr in arrs.items():
        dt = np.dtype(arr.dtype)
        out[name] = KeyInfo(tuple(arr.shape), f"{dt.kind}{dt.itemsize}")
    return out


def _reader(store: str, key: str, lo: int, hi: int, where: str):
    def frames() -> Iterator:
        arr = _open_group(store)["data"][key]
        # whole chunks, at least BLOCK frames a read: each zarr read is a round trip through its
        # event-loop thread, and stores chunked a frame at a time (UMI's) paid it per frame
        chunk = max(1, int(arr.chunks[0]) if arr.chunks else 1)
        step = chunk * max(1, -(-BLOCK // chunk))
        for a in range(lo, hi, step):
            block = np.asarray(arr[a : min(hi, a + step)])
            for j, row in enumerate(block):
                yield as_rgb(row, f"{where} data/{key} step {a + j}")

    return frames


def open_zarr(uri: str, key_map: str = "", bounds: WorkBounds | None = None) -> RawEpisode:
    return guarded(lambda u, k: _open(u, k, bounds or WorkBounds()), uri, key_map, "Zarr episode")


def _open(uri: str, key_map: str, bounds: WorkBounds) -> RawEpisode:
    store, _, frag = uri.partition("#")
    path = Path(store)
    try:
        index = int(frag or 0)
    except ValueError:
        raise RawEpisodeError(f"{uri}: episode index {frag!r} is not a number") from None
    root = confined_store(store)  # a group folder or metadata file linked out of the store is refused
    g = _open_group(store)
    ends = _ends(g, uri, root)
    key, steps = past_ends(store, ends) if index == len(ends) else ("", 0)
    if key:
        last = int(ends[-1]) if len(ends) else 0
        raise RawEpisodeError(
            f"{uri}: data/{key} holds {steps} steps, meta/episode_ends ends at {last}: steps {last} to "
            f"{steps - 1} belong to no episode (append {steps} to meta/episode_ends if they are one)"
        )
    if not 0 <= index < len(ends):
        raise RawEpisodeError(f"{uri}: no episode {index} (meta/episode_ends lists {len(ends)})")
    lo, hi = (int(ends[index - 1]) if index else 0), int(ends[index])
    km = choose(format_kinds.ZARR, f"{path.name}#{index}", key_map)
    arrs = _arrays(g)
    keys = _keys(arrs)
    lay = plan(km, keys, uri)
    for key, info in keys.items():
        if (key in lay.arrays.values() or key in lay.cameras.values()) and info.shape[0] < hi:
            raise RawEpisodeError(f"{uri}: data/{key} has {info.shape[0]} steps, meta/episode_ends needs {hi}")
    used = sorted(set(lay.arrays.values()) | set(lay.cameras.values()))
    declared = sum((hi - lo) * int(np.prod(keys[k].shape[1:], dtype=np.int64)) * arrs[k].dtype.itemsize for k in used)
    size = sum(chunk_bytes(arrs[k], root, lo, hi, uri) for k in used)  # every chunk present, inside the store
    check_declared(declared, size, bounds, uri, f"{hi - lo} steps of {len(used)} arrays")
    arrays = {}
    for s, k in lay.arrays.items():
        with reading(uri, f"data/{k}"):
            arrays[s] = (np.asarray(arrs[k][lo:hi]), ())
    cameras = {}
    for s, k in lay.cameras.items():
        shape = keys[k].shape
        if len(shape) != 4:
            raise RawEpisodeError(f"{uri}: camera data/{k} has shape {shape}, expected (N, H, W, 3)")
        h, w = (shape[1], shape[2]) if shape[3] in (1, 3) else (shape[2], shape[3])
        cameras[s] = (hi - lo, int(h), int(w), _reader(store, k, lo, hi, uri))
    # a declared fps is used as declared (an explicit 0 is a lie, not "use the key map's")
    fps = declared_rate(g.attrs["fps"], f"{uri}: attrs fps") if "fps" in g.attrs else km.fps
    ep = StepEpisode(
        f"{path.stem}-{index:06d}",
        format_kinds.ZARR,
        uri,
        fps,
        arrays,
        cameras,
        robot=km.robot_type,
        source_dataset=path.name,
        epoch_ns=int(path.stat().st_mtime * 1e9) if path.exists() else 0,
        units=dict(km.units),
        camera_keys={s: f"data/{k}" for s, k in lay.cameras.items()},
        camera_roles=km.roles_of(lay.cameras),
    )
    raw = to_raw(ep)
    raw.input_bytes = size
    return raw
