"""HDF5 episodes (h5py) -> RawEpisode: ALOHA / ACT `episode_N.hdf5` (one episode a file) and
robomimic / LIBERO `demo.hdf5` (one episode per `data/demo_N` group, uri `<file>#data/demo_N`;
`demo_N` groups at the file's root likewise, `<file>#demo_N`),
other layouts by a declared key map (robodata.ingest.importers.keymap).

Nothing outside the file is read (external links, external storage and virtual datasets are refused)
and what the episode declares is bounded by the file's size before it is read (hdf5_checks, bounds).
Camera datasets are read lazily, a chunk of frames at a time (bounded memory): raw uint8
(N, H, W, 3), or encoded (ALOHA's padded JPEG rows with `compress_len`, or variable-length bytes).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from robodata.codecs.image import image_shape
from robodata.ingest import format_kinds
from robodata.ingest.importers.bounds import WorkBounds, check_declared
from robodata.ingest.importers.fixed_rate import (
    StepEpisode,
    as_rgb,
    declared_rate,
    decode_encoded,
    guarded,
    reading,
    to_raw,
)
from robodata.ingest.importers.hdf5_checks import (
    compress_lens,
    confined_group,
    dataset_outside,
    declared_frame,
    hard_path,
)
from robodata.ingest.importers.keymap import KeyMap, choose
from robodata.ingest.importers.layout import KeyInfo, is_image, plan
from robodata.ingest.raw import RawEpisode, RawEpisodeError

BLOCK = 16  # frames per read when a dataset is not chunked


DEMO = __import__("re").compile(r"demo_\d+")  # robomimic's episode groups, also found at the file's root


def list_groups(fileobj) -> list[str]:
    """Episode groups of a robomimic-style file (`data/demo_*`, or `demo_N` groups at the root as
    some exporters write them), [] for a one-episode file."""
    import h5py

    with h5py.File(fileobj, "r") as f:
        # an external link is listed (never followed: its import refuses it, naming the link)
        data = f.get("data", getlink=True)
        if isinstance(data, h5py.HardLink) and isinstance(f["data"], h5py.Group):
            return sorted((f"data/{k}" for k in f["data"] if _group_or_link(f["data"], k)), key=_natural)
        return sorted((k for k in f if DEMO.fullmatch(k) and _group_or_link(f, k)), key=_natural)


def _group_or_link(parent, name: str) -> bool:
    import h5py

    link = parent.get(name, getlink=True)
    return isinstance(link, h5py.ExternalLink) or isinstance(parent.get(name), h5py.Group)


def _natural(s: str) -> tuple:
    return tuple(int(x) if x.isdigit() else x for x in __import__("re").split(r"(\d+)", s))


def _keys(group, where: str) -> dict[str, KeyInfo]:
    """Every dataset below the group; one whose data lives in other files is refused (hdf5_checks)."""
    import h5py

    out: dict[str, KeyInfo] = {}

    def visit(name, obj):  # a value stops the visit (h5py cannot raise through it)
        if isinstance(obj, h5py.Dataset):
            if (outside := dataset_outside(obj, where)) is not None:
                return outside
            dt = obj.dtype
            out[name] = KeyInfo(tuple(obj.shape), "O" if dt.kind == "O" else f"{dt.kind}{dt.itemsize}")
        return None

    if (found := group.visititems(visit)) is not None:
        raise found
    return out


def _attr(f, group, dotted: str) -> str:
    """An attribute (JSON strings descended into by the dotted rest), on the group or the file."""
    head, _, rest = dotted.partition(".")
    for obj in (group, f):
        v = obj.attrs.get(head)
        if v is None:
            continue
        v = v.decode() if isinstance(v, bytes) else v
        if rest:
            try:
                v = json.loads(v) if isinstance(v, str) else v
                for part in rest.split("."):
                    v = v[part]
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
        return str(v)
    return ""


RATE_ATTRS = ("fps", "control_hz", "control_freq")
ENV_RATE = "env_args.env_kwargs.control_freq"  # robomimic / LIBERO: the simulator's control rate


def _fps(f, group, km: KeyMap, where: str) -> float:
    """The rate the file declares (RATE_ATTRS on the episode group or the file, robomimic's env_args),
    else the key map's. A declaration that is not a rate, or two that disagree by more than 1 %, is
    refused naming them: the steps' times are i / rate, nothing else could show the lie."""
    found: dict[str, float] = {}
    for obj in (group, f):
        for k in RATE_ATTRS:
            if k in obj.attrs:
                field = f"{obj.name} attrs {k}"
                found[field] = declared_rate(obj.attrs[k], f"{where}: {field}")
    env = _attr(f, group.parent if group.name != "/" else group, ENV_RATE)
    if env:
        found[f"data attrs {ENV_RATE}"] = declared_rate(env, f"{where}: data attrs {ENV_RATE}")
    if not found:
        return km.fps  # 0: no source declares it (to_raw lays the steps on a nominal grid, flagged)
    (first, hz), *rest = found.items()
    for other, v in rest:
        if abs(v / hz - 1) > 0.01:
            raise RawEpisodeError(f"{where}: declared rates disagree: {first} = {hz:g} Hz, {other} = {v:g} Hz")
    return hz


def _declared_steps(g, arrays: dict, cameras: dict, where: str) -> None:
    """robomimic's `num_samples` attribute (what its own loader indexes by) must be the step count."""
    if "num_samples" not in g.attrs:
        return
    ns = g.attrs["num_samples"]
    lens = sorted({len(v) for v, _ in arrays.values()} | {c[0] for c in cameras.values()})
    if lens != [ns]:
        raise RawEpisodeError(f"{where}: attrs num_samples = {ns}, but the episode's streams hold {lens} steps")


def _camera_reader(path: Path, group: str, key: str, where: str, lens: np.ndarray | None):
    def frames() -> Iterator:
        import h5py

        with h5py.File(path, "r") as f:
            g = f[group] if group else f
            ds = g[key]
            step = (ds.chunks[0] if ds.chunks else BLOCK) or BLOCK
            for lo in range(0, ds.shape[0], step):
                block = ds[lo : lo + step]
                for j, row in enumerate(block):
                    i = lo + j
                    if ds.ndim == 4:
                        yield as_rgb(row, f"{where} {key} frame {i}")
                    else:
                        at = f"{where} {key} frame {i}"
                        data = declared_frame(bytes(row[: lens[i]]), int(lens[i]), at) if lens is not None else row
                        yield decode_encoded(bytes(data), at)

    return frames


def _shape(g, key: str, where: str, lens: np.ndarray | None) -> tuple[int, int]:
    ds = g[key]
    if ds.ndim == 4:
        h, w = (ds.shape[1], ds.shape[2]) if ds.shape[3] in (1, 3) else (ds.shape[2], ds.shape[3])
        return int(h), int(w)
    if ds.shape[0] == 0:
        return 0, 0
    row = bytes(ds[0])
    if lens is not None:
        row = declared_frame(row[: lens[0]], int(lens[0]), f"{where} {key} frame 0")
    h, w, _ = image_shape(decode_encoded(row, f"{where} {key} frame 0"))
    return h, w


def _declared(keys: dict[str, KeyInfo], lay, cameras: dict, where: str, size: int, bounds: WorkBounds) -> None:
    """What the episode's streams declare (frames x resolution, array bytes) within the work bound
    for the file's size, before any of it is read."""
    arrays = sum(int(np.prod(keys[k].shape, dtype=np.int64)) * int(keys[k].dtype[1:] or 1) for k in lay.arrays.values())
    frames = sum(n * h * w * 3 for n, h, w, _ in cameras.values())
    n = sum(c[0] for c in cameras.values())
    check_declared(arrays + frames, size, bounds, where, f"{n} frames x resolution + {len(lay.arrays)} arrays")


def open_hdf5(uri: str, key_map: str = "", bounds: WorkBounds | None = None) -> RawEpisode:
    return guarded(lambda u, k: _open(u, k, bounds or WorkBounds()), uri, key_map, "HDF5")


def _open(uri: str, key_map: str, bounds: WorkBounds) -> RawEpisode:
    import h5py

    base, _, group = uri.partition("#")
    path = Path(base)
    item = path.name + (f"#{group}" if group else "")
    where = f"{path}" + (f"#{group}" if group else "")
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise RawEpisodeError(f"{path}: not a readable HDF5 file (truncated? {exc})") from None
    with f:
        hard_path(f, group, where)  # the episode's group reached without leaving the file
        if group and group not in f:
            raise RawEpisodeError(f"{where}: no group {group!r} in the file")
        g = f[group] if group else f
        confined_group(g, where)  # no external link, external storage or virtual dataset below it
        km = choose(format_kinds.HDF5, item, key_map)
        keys = _keys(g, where)
        lay = plan(km, keys, where)
        size = path.stat().st_size
        cameras = {}
        for stream, key in lay.cameras.items():
            ds = g[key]
            lens = compress_lens(f, key, int(ds.shape[1]), int(ds.shape[0]), where) if ds.ndim == 2 else None
            h, w = _shape(g, key, where, lens)
            cameras[stream] = (int(ds.shape[0]), h, w, _camera_reader(path, group, key, where, lens))
        _declared(keys, lay, cameras, where, size, bounds)
        arrays = {}
        for stream, key in lay.arrays.items():
            with reading(where, f"key {key!r}"):
                v = np.asarray(g[key][()])
            if v.ndim == 0:
                raise RawEpisodeError(f"{where}: key {key!r} is a scalar, expected one row per step")
            arrays[stream] = (v, ())
        _declared_steps(g, arrays, cameras, where)
        lang = _attr(f, g, km.language) if km.language else ""
        if km.language and not lang and km.language in keys and not is_image(keys[km.language]):
            v = g[km.language][()]
            lang = v.decode() if isinstance(v, bytes) else str(v)
        ep = StepEpisode(
            f"{path.stem}-{group.rsplit('/', 1)[-1]}" if group else path.stem,
            format_kinds.HDF5,
            uri,
            _fps(f, g, km, where),
            arrays,
            cameras,
            robot=km.robot_type,
            task=lang,
            source_dataset=path.name if group else path.parent.name,
            epoch_ns=int(path.stat().st_mtime * 1e9),
            units=dict(km.units),
            camera_keys=dict(lay.cameras),
            camera_roles=km.roles_of(lay.cameras),
        )
    return to_raw(ep)
