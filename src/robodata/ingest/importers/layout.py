"""Apply a key map (robodata.ingest.importers.keymap) to one episode's keys: which are cameras,
which are arrays, under which stream names. Shared by the HDF5, Zarr and RLDS importers."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from robodata.ingest.importers.keymap import KeyMap, expand
from robodata.ingest.raw import RawEpisodeError
from robodata.names import is_safe_name


@dataclass
class KeyInfo:
    shape: tuple[int, ...]
    dtype: str  # numpy dtype kind + size, e.g. "u1", "f4", "O" (variable-length bytes)


@dataclass
class Layout:
    cameras: dict[str, str] = field(default_factory=dict)  # stream -> key
    arrays: dict[str, str] = field(default_factory=dict)


def is_image(info: KeyInfo) -> bool:
    """(N, H, W, C) uint8, or encoded frames: (N, L) uint8 padded bytes / (N,) variable bytes, or
    (N, H, W, C) float pixel values (PushT's replay buffer stores 0..255 as float32)."""
    if info.dtype[:1] == "f":
        return len(info.shape) == 4 and info.shape[3] in (1, 3)
    return info.dtype in ("u1", "O", "S") and len(info.shape) in (1, 2, 4)


def plan(km: KeyMap, keys: dict[str, KeyInfo], where: str) -> Layout:
    missing = [k for k in km.required if k not in keys]
    if missing:
        raise RawEpisodeError(f"{where}: missing key {missing[0]!r} (key map {km.name!r} requires {list(km.required)})")
    out = Layout()
    used: set[str] = set()
    for target, rules in ((out.cameras, km.cameras), (out.arrays, km.arrays)):
        for stream, pattern in rules.items():
            for seg, key in expand(pattern, list(keys)).items():
                target[stream.replace("*", seg)] = key
                used.add(key)
    rx = re.compile(km.image_keys) if km.image_keys else None
    for key, info in keys.items():
        if key in used:
            continue
        name = key.rsplit("/", 1)[-1]
        if not is_safe_name(name) or name in out.cameras or name in out.arrays:
            continue
        if rx is not None and rx.search(key) and is_image(info):
            out.cameras[name] = key
        elif km.other_arrays and info.dtype[:1] in "biuf" and len(info.shape) in (1, 2, 3) and not is_image(info):
            out.arrays[name] = key  # (N, a, b) (e.g. keypoints) flattened per step
    for stream, key in out.cameras.items():
        info = keys[key]
        if not is_image(info):
            raise RawEpisodeError(
                f"{where}: camera {stream!r} key {key!r} has dtype {info.dtype} shape {info.shape}, "
                "expected uint8 frames (N, H, W, 3) or encoded images"
            )
    for stream, key in out.arrays.items():
        info = keys[key]
        if info.dtype[:1] not in "biuf":
            raise RawEpisodeError(f"{where}: array {stream!r} key {key!r} has dtype {info.dtype}, expected numbers")
    if not out.cameras and not out.arrays:
        raise RawEpisodeError(f"{where}: no key matches key map {km.name!r} (keys: {sorted(keys)[:20]})")
    return out
