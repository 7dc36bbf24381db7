"""Synthetic episodes in step-array layouts, written by the ecosystem's own libraries.

hdf5-aloha      `episode_<i>.hdf5` (ALOHA / ACT): observations/qpos, qvel, effort,
                observations/images/<cam> (N, H, W, 3) uint8 chunked one frame a chunk, action;
                attrs sim, compress. With compress=True the images are JPEG bytes padded to one
                length plus `compress_len` (cams, N), as ALOHA's compressed recordings.
hdf5-robomimic  `demo.hdf5`: data/demo_<i>/obs/{<cam>_image, robot0_joint_pos}, actions;
                data attrs env_args (robomimic), problem_info (LIBERO's language instruction).
zarr            `replay.zarr` (diffusion_policy / UMI replay buffer, Zarr v2): data/<cam>_rgb,
                data/state, data/action, meta/episode_ends.
A synthetic episode's cameras and joints run at different rates; these formats have one rate,
so each step is a camera frame and the joint sample nearest it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from robodata.ingest.synth.episode import SynthEpisode, jpeg_bytes

if TYPE_CHECKING:
    from zarr.core.array_spec import ArrayConfigParams


def _steps(ep: SynthEpisode):
    """(frames per camera (N, H, W, 3), joint_pos, joint_vel, joint_cur, cmd) at the camera rate."""
    frames = {c: [rgb for _, rgb in ep.frames(c)] for c in ep.frame_t}
    n = min(len(f) for f in frames.values())
    t0 = ep.frame_t[next(iter(ep.frame_t))][:n] - ep.offsets_ns[next(iter(ep.frame_t))]
    k = np.clip(np.searchsorted(ep.state_t, t0), 0, len(ep.state_t) - 1)
    pos = ep.joint_pos[k].astype(np.float32)
    vel = np.gradient(pos, axis=0).astype(np.float32) if n > 1 else np.zeros_like(pos)
    return {c: np.stack(f[:n]) for c, f in frames.items()}, pos, vel, ep.joint_cur[k].astype(np.float32), ep.cmd[k]


def _fps(ep: SynthEpisode) -> float:
    return float(ep.meta["cameras"][next(iter(ep.frame_t))]["fps"])


def write_aloha(ep: SynthEpisode, root: Path, quality: int = 90, compress: bool = False, index: int = -1) -> Path:
    import h5py

    cams, pos, vel, cur, cmd = _steps(ep)
    i = index if index >= 0 else int(ep.episode_id.rsplit("-", 1)[-1])
    path = root / f"episode_{i}.hdf5"
    tmp = root / f"episode_{i}.hdf5.partial"
    with h5py.File(tmp, "w") as f:
        f.attrs["sim"] = False
        f.attrs["fps"] = _fps(ep)  # ALOHA files store none (50 Hz); a synthetic episode's own rate
        f.attrs["compress"] = compress
        obs = f.create_group("observations")
        obs["qpos"], obs["qvel"], obs["effort"] = pos, vel, cur
        f["action"] = cmd.astype(np.float32)
        imgs = obs.create_group("images")
        lens = []
        for c, frames in cams.items():
            if compress:
                enc = [np.frombuffer(jpeg_bytes(x, quality), np.uint8) for x in frames]
                pad = max(len(e) for e in enc)
                data = np.zeros((len(enc), pad), np.uint8)
                for j, e in enumerate(enc):
                    data[j, : len(e)] = e
                imgs.create_dataset(c, data=data, chunks=(1, pad))
                lens.append([len(e) for e in enc])
            else:
                imgs.create_dataset(c, data=frames, chunks=(1, *frames.shape[1:]))
        if compress:
            f["compress_len"] = np.asarray(lens, np.int64)
    tmp.rename(path)
    return path


def write_robomimic(eps: list[SynthEpisode], root: Path, quality: int = 90, name: str = "demo") -> Path:
    import h5py

    path = root / f"{name}.hdf5"
    tmp = root / f"{name}.hdf5.partial"
    with h5py.File(tmp, "w") as f:
        data = f.create_group("data")
        data.attrs["env_args"] = json.dumps(
            {"env_name": "Lift", "type": 1, "env_kwargs": {"robots": ["Panda"], "control_freq": _fps(eps[0])}}
        )
        f.attrs["problem_info"] = json.dumps({"language_instruction": "pick up the cube"})
        total = 0
        for i, ep in enumerate(eps):
            cams, pos, _, _, cmd = _steps(ep)
            g = data.create_group(f"demo_{i}")
            g.attrs["num_samples"] = len(pos)
            total += len(pos)
            g["actions"] = cmd.astype(np.float64)
            obs = g.create_group("obs")
            obs["robot0_joint_pos"] = pos.astype(np.float64)
            obs["robot0_eef_pos"] = pos[:, :3].astype(np.float64)
            for c, frames in cams.items():
                obs.create_dataset(f"{c}_image", data=frames, chunks=(1, *frames.shape[1:]), compression="gzip")
        data.attrs["total"] = total
    tmp.rename(path)
    return path


# every chunk written, fill-valued ones too (zarr 3 leaves those out by default; the importer refuses a
# store missing a chunk: robodata.ingest.importers.zarr_chunks)
ALL_CHUNKS: ArrayConfigParams = {"write_empty_chunks": True}


def write_zarr(eps: list[SynthEpisode], root: Path, quality: int = 90, name: str = "replay") -> Path:
    import zarr

    path = root / f"{name}.zarr"
    tmp = root / f"{name}.zarr.partial"
    g = zarr.open_group(str(tmp), mode="w", zarr_format=2)
    g.attrs["fps"] = _fps(eps[0])  # diffusion_policy stores none (10 Hz); a synthetic episode's own rate
    steps = [_steps(ep) for ep in eps]
    ends = np.cumsum([len(s[1]) for s in steps]).astype(np.int64)
    data = g.create_group("data")
    meta = g.create_group("meta")
    meta.create_array("episode_ends", data=ends, config=ALL_CHUNKS)
    data.create_array("state", data=np.concatenate([s[1] for s in steps]), config=ALL_CHUNKS)
    data.create_array("action", data=np.concatenate([s[4] for s in steps]).astype(np.float32), config=ALL_CHUNKS)
    for c in steps[0][0]:
        frames = np.concatenate([s[0][c] for s in steps])
        data.create_array(f"{c}_rgb", data=frames, chunks=(1, *frames.shape[1:]), config=ALL_CHUNKS)
    tmp.rename(path)
    return path


def write_rlds(eps: list[SynthEpisode], root: Path, quality: int = 90, name: str = "rlds_ds") -> Path:
    """A TFDS RLDS dataset folder `<name>/1.0.0/`: dataset_info.json, features.json and one shard of
    tf.train.Example records, one per episode (steps/observation/<cam>_image JPEG bytes,
    steps/observation/state, steps/action, steps/language_instruction, steps/is_first/is_last)."""
    from robodata.ingest.importers.tfrecord import frame, make_example

    top = root / f"{name}.partial"
    d = top / "1.0.0"
    d.mkdir(parents=True)
    cams = list(eps[0].frame_t)
    (d / "dataset_info.json").write_text(json.dumps({"name": name, "version": "1.0.0", "fileFormat": "tfrecord"}))
    (d / "features.json").write_text(json.dumps(_tfds_features(cams, eps[0].meta["cameras"])))
    with open(d / f"{name}-train.tfrecord-00000-of-00001", "wb") as f:
        for ep in eps:
            frames, pos, _, _, cmd = _steps(ep)
            n = len(pos)
            feats: dict = {f"steps/observation/{c}_image": [jpeg_bytes(x, quality) for x in frames[c]] for c in cams}
            feats["steps/observation/state"] = pos
            feats["steps/action"] = cmd.astype(np.float32)
            feats["steps/language_instruction"] = [b"pick up the cube"] * n
            feats["steps/is_first"] = np.eye(1, n, 0, np.int64)[0]
            feats["steps/is_last"] = np.eye(1, n, n - 1, np.int64)[0]
            feats["steps/reward"] = np.zeros(n, np.float32)
            f.write(frame(make_example(feats)))
    path = root / name
    top.rename(path)
    return path


def _tfds_features(cams: list[str], meta: dict) -> dict:
    """features.json as TFDS writes it (proto JSON): steps/observation/<cam>_image Image features."""

    def feats(d: dict) -> dict:
        return {"pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
                "featuresDict": {"features": d}}  # fmt: skip

    images = {
        f"{c}_image": {
            "pythonClassName": "tensorflow_datasets.core.features.image_feature.Image",
            "image": {
                "shape": {"dimensions": [str(meta[c]["height"]), str(meta[c]["width"]), "3"]},
                "dtype": "uint8",
                "encodingFormat": "jpeg",
            },
        }
        for c in cams
    }
    steps = {"pythonClassName": "tensorflow_datasets.core.features.dataset_feature.Dataset",
             "sequence": {"feature": feats({"observation": feats(images)}), "length": "-1"}}  # fmt: skip
    return feats({"steps": steps})
