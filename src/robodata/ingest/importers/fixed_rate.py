"""Episodes stored as fixed-rate step arrays (HDF5, Zarr replay buffers, RLDS) -> RawEpisode.

Such formats keep no per-sample clock: step i is at i / fps on one clock ("state"), shared
by the cameras, so alignment is exact and QC judges counts and values. Cameras are read
lazily: `frames` pulls each camera's images block by block from its reader.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from robodata.codecs.image import Image, ImageError, decode_jpeg_bytes, image_shape
from robodata.errors import RobodataError
from robodata.ingest.rates import STEP_RATE_RANGE_HZ
from robodata.ingest.raw import ArrayTrack, CameraTrack, RawEpisode, RawEpisodeError, describe
from robodata.names import check_name

NOMINAL_HZ = 10.0  # the grid steps are laid on when no source declares a rate (flagged: rate_unknown)
# a camera: (frame count, height, width, frames()) where frames() yields images in order
CameraSource = tuple[int, int, int, Callable[[], Iterator[Image]]]
# what h5py / zarr / numcodecs / protobuf / numpy raise for bad data (blosc: RuntimeError; a size
# field larger than the data: MemoryError; deep nesting: RecursionError)
LIBRARY_ERRORS = (OSError, KeyError, ValueError, TypeError, IndexError, RuntimeError, MemoryError, OverflowError)


@dataclass
class StepEpisode:
    """What a step-array importer read: arrays (N, D) float32 with optional column names."""

    episode_id: str
    source: str  # hdf5 | zarr | rlds
    uri: str
    fps: float
    arrays: Mapping[str, tuple[np.ndarray, tuple[str, ...]]] = field(default_factory=dict)
    cameras: Mapping[str, CameraSource] = field(default_factory=dict)
    robot: str = ""
    task: str = ""  # language instruction when the recording has one
    success: bool | None = None
    source_dataset: str = ""
    epoch_ns: int = 0  # wall time of step 0 (these formats store none: the file's modification time)
    issues: list[str] = field(default_factory=list)
    units: Mapping[str, str] = field(default_factory=dict)  # stream -> declared units (a key map's)
    camera_keys: Mapping[str, str] = field(default_factory=dict)  # camera stream -> the source's key
    camera_roles: Mapping[str, str] = field(default_factory=dict)  # camera stream -> role (a key map's)


def decode_encoded(data: bytes, where: str) -> Image:
    try:
        return decode_jpeg_bytes(bytes(data))  # JPEG (PIL fallback for PNG)
    except ImageError as exc:
        raise RawEpisodeError(f"{where}: undecodable encoded image ({describe(exc)})") from None


def as_rgb(frame: np.ndarray, where: str) -> np.ndarray:
    """An (H, W, 3) or (H, W) / (H, W, 1) uint8 array as RGB; CHW (3, H, W) transposed."""
    a = np.asarray(frame)
    if a.dtype.kind == "f":  # pixel values stored as floats: taken only where they are exactly 0..255 integers
        if not (np.all(a == np.round(a)) and a.min(initial=0) >= 0 and a.max(initial=0) <= 255):
            raise RawEpisodeError(f"{where}: image dtype {a.dtype} holds values that are not integers 0..255")
        a = a.astype(np.uint8)
    if a.dtype != np.uint8:
        raise RawEpisodeError(f"{where}: image dtype {a.dtype}, expected uint8")
    if a.ndim == 3 and a.shape[0] in (1, 3) and a.shape[2] not in (1, 3):
        a = a.transpose(1, 2, 0)
    if a.ndim == 2:
        a = a[..., None]
    if a.ndim != 3 or a.shape[2] not in (1, 3):
        raise RawEpisodeError(f"{where}: image shape {a.shape}, expected (H, W, 3)")
    if a.shape[2] == 1:
        a = np.repeat(a, 3, axis=2)
    return np.ascontiguousarray(a)


def guarded(open_fn: Callable[[str, str], RawEpisode], uri: str, key_map: str, what: str) -> RawEpisode:
    """open_fn(uri, key_map), a library's error for bad data (h5py / zarr / protobuf: OSError,
    KeyError, ValueError, ...) turned into a RawEpisodeError naming the item and `what` it is."""
    try:
        return open_fn(uri, key_map)
    except RobodataError:
        raise
    except LIBRARY_ERRORS as exc:
        raise RawEpisodeError(f"{uri}: unreadable {what} ({describe(exc)})") from None


@contextmanager
def reading(where: str, field: str) -> Iterator[None]:
    """A library's error for bad data while reading `field` of `where` as a RawEpisodeError naming both."""
    try:
        yield
    except RobodataError:
        raise
    except LIBRARY_ERRORS as exc:
        raise RawEpisodeError(f"{where}: {field} unreadable ({describe(exc)})") from None


def declared_rate(value: object, where: str) -> float:
    """A declared rate (`where` names the file and field) as a float, or RawEpisodeError: a declared
    0, text, an array or a rate out of STEP_RATE_RANGE_HZ is a lie, never a reason to fall back to a
    default (these formats have no timestamps to measure the rate from)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    a = np.asarray(value)
    try:
        hz = float(a.reshape(-1)[0]) if a.size == 1 and a.dtype != bool else float("nan")
    except (TypeError, ValueError, OverflowError):  # 10**400 in a JSON attribute
        hz = float("nan")
    lo, hi = STEP_RATE_RANGE_HZ
    if not (np.isfinite(hz) and lo <= hz <= hi):
        said = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:40]}... ({len(repr(value))} characters)"
        raise RawEpisodeError(f"{where} = {said}: not a control rate (expected {lo:g} to {hi:g} Hz)")
    return hz


def to_raw(ep: StepEpisode) -> RawEpisode:
    """The RawEpisode of a step-array episode (checks lengths, a usable rate, names)."""
    where = ep.uri
    fps, issues = ep.fps, list(ep.issues)
    if fps == 0:  # no source declares it: the steps go on a nominal grid, and the episode says so
        fps = NOMINAL_HZ
        issues.append(
            f"rate_unknown: {where}: no control rate declared ({ep.source} stores none here); steps stored "
            f"at a nominal {NOMINAL_HZ:g} Hz, catalog control_hz null (declare `fps` in a key map, --key-map)"
        )
    declared_rate(fps, f"{where}: control rate (the file's, else key map `fps`)")  # hdf5 / zarr checked theirs
    lens = {k: len(v) for k, (v, _) in ep.arrays.items()} | {k: c[0] for k, c in ep.cameras.items()}
    if not lens or max(lens.values()) == 0:
        raise RawEpisodeError(f"{where}: zero steps")
    if len(set(lens.values())) != 1:
        raise RawEpisodeError(f"{where}: streams disagree on the step count ({lens})")
    n = next(iter(lens.values()))
    t = np.round(np.arange(n) * (1e9 / fps)).astype(np.int64)
    arrays = {}
    for name, (vals, names) in ep.arrays.items():
        check_name(name, field="array stream name", source=where)
        v = np.asarray(vals)
        if v.dtype.kind not in "biuf":
            raise RawEpisodeError(f"{where}: array {name!r} has dtype {v.dtype}, expected numbers")
        v = v.reshape(n, -1).astype(np.float32)
        units = ep.units.get(name, "")
        arrays[name] = ArrayTrack(t, v, fps, units, names if len(names) == v.shape[1] else (), "state")
    cams = {}
    for name, (_, h, w, _) in ep.cameras.items():
        check_name(name, field="camera stream name", source=where)
        if not (0 < h <= 16384 and 0 < w <= 16384):
            raise RawEpisodeError(f"{where}: camera {name!r} has shape {h}x{w}")
        cams[name] = CameraTrack(t, h, w, fps, clock="state")
    readers = {name: c[3] for name, c in ep.cameras.items()}
    shapes = {name: (c[1], c[2]) for name, c in ep.cameras.items()}

    def frames() -> Iterator[tuple[str, int, Image]]:
        gens = {c: r() for c, r in readers.items()}
        i = 0
        while gens:
            for c in list(gens):  # the readers run at conversion, outside `guarded`: their errors named here
                with reading(where, f"camera {c!r} ({ep.camera_keys.get(c, c)}) read at frame {i}:"):
                    img = next(gens[c], None)
                if img is None:
                    del gens[c]
                    continue
                got = image_shape(img)[:2]
                if tuple(got) != shapes[c]:
                    raise RawEpisodeError(f"{where}: camera {c!r} frame {i} is {got}, expected {shapes[c]}")
                yield c, i, img
            i += 1

    return RawEpisode(
        check_name(ep.episode_id, field="episode id", source=where),
        ep.source,
        ep.uri,
        ep.robot,
        "",
        ep.task,
        ep.source,
        ep.epoch_ns,
        ep.success,
        cams,
        arrays,
        issues=issues,
        frames=frames,
        robot_type=ep.robot,
        source_dataset=ep.source_dataset,
        language=ep.task,
        camera_roles=dict(ep.camera_roles),
        rate_unknown=ep.fps == 0,
    )
