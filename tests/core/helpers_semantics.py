"""Lies injected into well-formed recordings of the bag and step-array families (issue 24): shared
by the semantics property tests and bench.robustness's semantics section.

Before writing (on a SynthEpisode): `odd_frame` (one frame rendered at twice the size),
`stamps_tick` (header stamps ticking at a multiple of the frame rate: ROS bag writers). After
writing (on the file): HDF5 attributes and datasets, Zarr attributes and episode ends, RLDS
records and features.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np

from robodata.ingest.synth import SynthEpisode
from robodata.ingest.synth.episode import jpeg_bytes


class _OddFrame:
    """A renderer whose frame at robot time `at_s` is twice the size."""

    def __init__(self, inner, at_s: float):
        self.inner, self.at_s = inner, at_s

    def render(self, t_s: float, q, held: bool) -> np.ndarray:
        img = self.inner.render(t_s, q, held)
        return np.repeat(np.repeat(img, 2, 0), 2, 1) if abs(t_s - self.at_s) < 1e-6 else img


def odd_frame(ep: SynthEpisode, k: int, cam: str = "cam") -> None:
    """Frame k of `cam` renders at twice the size (for writers that store each frame as it comes)."""
    at = (int(ep.frame_t[cam][k]) - ep.offsets_ns[cam]) / 1e9
    ep.renderers[cam] = _OddFrame(ep.renderers[cam], at)  # type: ignore[assignment]


def stamps_tick(ep: SynthEpisode, factor: float, cam: str = "cam") -> None:
    """Header stamps of `cam` at `factor` x its rate (a driver stamping frame i at i / (factor * fps)),
    received when they were recorded."""
    t = ep.frame_t[cam]
    ep.stamps[cam] = t[0] + (np.arange(len(t)) * (1e9 / (factor * ep.meta["cameras"][cam]["fps"]))).astype(np.int64)


def big_jpeg(ep: SynthEpisode, k: int, cam: str = "cam") -> bytes:
    """Frame k of `cam` as a JPEG at twice the size."""
    rgb = next(x for j, (_, x) in enumerate(ep.frames(cam)) if j == k)
    return jpeg_bytes(np.repeat(np.repeat(rgb, 2, 0), 2, 1))


def aloha_replace_frame(path: Path, k: int, data: bytes, cam: str = "cam") -> None:
    """Frame k of a compressed ALOHA file replaced by the JPEG `data` (rows re-padded, lengths kept)."""
    with h5py.File(path, "a") as f:
        key = f"observations/images/{cam}"
        rows, lens = f[key][()], f["compress_len"][()]
        pad = max(rows.shape[1], len(data))
        out = np.zeros((rows.shape[0], pad), np.uint8)
        out[:, : rows.shape[1]] = rows
        out[k] = 0
        out[k, : len(data)] = np.frombuffer(data, np.uint8)
        lens[list(f["observations/images"]).index(cam), k] = len(data)
        del f[key], f["compress_len"]
        f.create_dataset(key, data=out, chunks=(1, pad))
        f["compress_len"] = lens


def h5_set(path: Path, group: str, attr: str, value) -> None:
    with h5py.File(path, "a") as f:
        f[group].attrs[attr] = value


def h5_cut(path: Path, key: str, m: int) -> None:
    """The last m steps of dataset `key` removed (its stream then disagrees on the step count)."""
    with h5py.File(path, "a") as f:
        a = f[key][:-m]
        del f[key]
        f[key] = a


def robomimic_control_freq(path: Path, value) -> None:
    with h5py.File(path, "a") as f:
        env = json.loads(f["data"].attrs["env_args"])
        env["env_kwargs"]["control_freq"] = value
        f["data"].attrs["env_args"] = json.dumps(env)


def zarr_attr(path: Path, key: str, value) -> None:
    attrs = json.loads((path / ".zattrs").read_text())
    attrs[key] = value
    (path / ".zattrs").write_text(json.dumps(attrs))


def zarr_episode_end(path: Path, index: int, value: int) -> None:
    import zarr

    ends = zarr.open_array(str(path / "meta" / "episode_ends"), mode="r+", zarr_format=2)
    ends[index] = value


def _rlds_rewrite(path: Path, edit) -> None:
    from robodata.ingest.importers.tfrecord import frame, make_example, parse_example, read_record

    shard = next((path / "1.0.0").glob("*.tfrecord*"))
    feats = parse_example(read_record(shard, 0), str(shard))
    edit(feats)
    shard.write_bytes(frame(make_example(feats)))


def rlds_replace_image(path: Path, k: int, data: bytes, cam: str = "cam") -> None:
    """Step k's image of the one-episode RLDS dataset at `path` replaced by `data`."""
    _rlds_rewrite(path, lambda feats: feats[f"steps/observation/{cam}_image"].__setitem__(k, data))


def rlds_framing(path: Path, key: str, at: int) -> None:
    """`steps/is_last` set at step `at` and cleared at the end, or `steps/is_first` set a second time."""

    def edit(feats: dict) -> None:
        v = np.asarray(feats[key]).copy()
        v[at] = 1
        if key == "steps/is_last":
            v[-1] = 0
        feats[key] = v

    _rlds_rewrite(path, edit)


def rlds_declare_shape(path: Path, h: int, w: int, cam: str = "cam") -> None:
    """features.json declares `cam`'s images as h x w x 3."""
    ff = path / "1.0.0" / "features.json"
    doc = json.loads(ff.read_text())
    steps = doc["featuresDict"]["features"]["steps"]["sequence"]["feature"]
    image = steps["featuresDict"]["features"]["observation"]["featuresDict"]["features"][f"{cam}_image"]["image"]
    image["shape"]["dimensions"] = [str(h), str(w), "3"]
    ff.write_text(json.dumps(doc))


def h5_demos_at_root(path: Path) -> None:
    """A robomimic file rewritten with its demo groups at the root and data/'s attributes on the file."""
    with h5py.File(path, "a") as f:
        for k in list(f["data"]):
            f.move(f"data/{k}", k)
        for k, v in f["data"].attrs.items():
            f.attrs[k] = v
        del f["data"]
