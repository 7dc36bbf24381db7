"""Step-array recordings (RLDS, Zarr, HDF5) that lie or are damaged in ways whose quarantine reason
used to be a library's bare exception (issue 44): shared by the tests and bench.robustness's
`reasons` section.

`write_case(root, name) -> Case`: one tiny well-formed recording (16x16, 1 s at 10 Hz) written
under root with one thing wrong. `Case.item` is the landing item whose QC row must carry the reason
(a fragment-addressed item's name: `<case>#1.0.0/<shard>:0`); `Case.expect` are phrases the reason
must hold: the file and the field.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from robodata.ingest.synth import SynthConfig, make_episode
from robodata.ingest.synth.arrays import write_aloha, write_rlds, write_zarr
from tests.core.helpers_semantics import _rlds_rewrite, aloha_replace_frame, zarr_attr, zarr_episode_end

TINY = SynthConfig(episodes=1, duration_s=1.0, height=16, width=16, fps=10.0, state_hz=50.0, cameras=("cam",))
GARBAGE = b"\x00garbage, not an image " * 8


@dataclass(frozen=True)
class Case:
    name: str
    family: str  # rlds | zarr | aloha
    item: str  # the landing item name whose row carries the reason
    expect: tuple[str, ...]  # phrases the reason must hold (file, field)


def _declare_tensors(ds: Path, shapes: dict[str, list[str]]) -> None:
    """features.json declares steps/<key> tensors of `shapes` (as TFDS writes a Tensor; [] a Scalar)."""
    ff = ds / "1.0.0" / "features.json"
    doc = json.loads(ff.read_text())
    steps = doc["featuresDict"]["features"]["steps"]["sequence"]["feature"]["featuresDict"]["features"]
    for key, dims in shapes.items():
        node = steps
        *parents, leaf = key.split("/")
        for p in parents:
            node = node[p]["featuresDict"]["features"]
        shape = {"dimensions": dims} if dims else {}
        node[leaf] = {"tensor": {"shape": shape, "dtype": "float32", "encoding": "none"}}
    ff.write_text(json.dumps(doc))


def _per_step(feats: dict, key: str, keep: int) -> None:
    n = len(feats["steps/is_first"])
    v = np.asarray(feats[key]).reshape(n, -1)
    feats[key] = (v[:, :keep] if keep <= v.shape[1] else np.pad(v, ((0, 0), (0, keep - v.shape[1])))).reshape(-1)


def _shard(ds: Path) -> Path:
    return next((ds / "1.0.0").glob("*.tfrecord*"))


def _rlds_twice(ds: Path, key: str, at: int, first: bool) -> None:
    """The record holds `key` twice: a copy set at step `at` only, before (first) or after the real one."""
    from robodata.ingest.importers.tfrecord import frame, make_example, parse_example, read_record

    shard = _shard(ds)
    data = read_record(shard, 0)
    feats = parse_example(data, str(shard))
    n = len(feats["steps/is_first"])
    v = np.zeros(n, np.int64) if key.endswith(("is_last", "is_first")) else np.asarray(feats[key])[::-1].copy()
    if v.dtype == np.int64:
        v[at] = 1
    extra = make_example({key: v})
    shard.write_bytes(frame(extra + data if first else data + extra))  # concatenated messages merge


def _rlds_length(ds: Path, n: int) -> None:
    """The record's length field says n bytes (its CRC valid): a lie the data cannot back."""
    from robodata.ingest.importers.tfrecord import masked_crc

    shard = _shard(ds)
    raw = shard.read_bytes()
    head = struct.pack("<Q", n)
    shard.write_bytes(head + struct.pack("<I", masked_crc(head)) + raw[12:])


def _nested(ds: Path, depth: int) -> None:
    (ds / "1.0.0" / "features.json").write_text('{"featuresDict": ' * depth + "{}" + "}" * depth)


def _h5_filtered_garbage(path: Path, key: str, chunk: int) -> None:
    """`key` rewritten gzip-compressed a row a chunk, then chunk `chunk`'s bytes overwritten."""
    with h5py.File(path, "a") as f:
        a = f[key][()]
        del f[key]
        f.create_dataset(key, data=a, chunks=(1, *a.shape[1:]), compression="gzip")
    with h5py.File(path, "r") as f:
        info = f[key].id.get_chunk_info(chunk)
    with open(path, "r+b") as fh:
        fh.seek(info.byte_offset)
        fh.write(b"\xff" * info.size)


def _zarr_chunk(store: Path, key: str, chunk: str) -> None:
    (store / "data" / key / chunk).write_bytes(GARBAGE)


def _values(key: str, declared: list[str], keep: int) -> Callable[[Path], None]:
    """features.json declares steps/<key> of shape `declared`; the record stores `keep` values a step."""

    def edit(ds: Path) -> None:
        _declare_tensors(ds, {key: declared})
        _rlds_rewrite(ds, lambda f: _per_step(f, f"steps/{key}", keep))

    return edit


def _image(step: int, data: bytes) -> Callable[[Path], None]:
    return lambda ds: _rlds_rewrite(ds, lambda f: f["steps/observation/cam_image"].__setitem__(step, data))


def _twice(key: str, at: int, first: bool) -> Callable[[Path], None]:
    return lambda ds: _rlds_twice(ds, key, at, first)


SHARD = ""  # an expected phrase: the case's shard file name
STATE, PNG_CUT = "steps/observation/state", b"\x89PNG\r\n\x1a\n\x00\x00"
CAM = "steps/observation/cam_image"
Edit = Callable[[Path], object]
# name: (family, edit, expected phrases, index of the item in a Zarr store)
CASES: dict[str, tuple[str, Edit, tuple[str, ...], int]] = {
    "rlds_action_6_of_7": ("rlds", _values("action", ["7"], 6), ("features.json", "steps/action"), 0),
    "rlds_state_8_of_7": (
        "rlds",
        _values("observation/state", ["7"], 8),
        ("features.json", "steps/observation/state"),
        0,
    ),
    "rlds_reward_scalar_twice": ("rlds", _values("reward", [], 2), ("features.json", "steps/reward"), 0),
    "rlds_is_last_twice_before": (
        "rlds",
        _twice("steps/is_last", 4, True),
        (SHARD, "steps/is_last"),
        0,
    ),
    "rlds_is_last_twice_after": (
        "rlds",
        _twice("steps/is_last", 4, False),
        (SHARD, "steps/is_last"),
        0,
    ),
    "rlds_is_first_twice": (
        "rlds",
        _twice("steps/is_first", 0, True),
        (SHARD, "steps/is_first"),
        0,
    ),
    "rlds_action_twice": ("rlds", _twice("steps/action", 0, True), (SHARD, "steps/action"), 0),
    "rlds_length_2e40": ("rlds", lambda ds: _rlds_length(ds, 1 << 40), (SHARD, "length field"), 0),
    "rlds_length_2e64": ("rlds", lambda ds: _rlds_length(ds, (1 << 64) - 1), (SHARD, "length field"), 0),
    "rlds_features_nested": ("rlds", lambda ds: _nested(ds, 100_000), ("features.json", "nested"), 0),
    "rlds_jpeg_garbage_step_3": ("rlds", _image(3, GARBAGE), (SHARD, "steps/observation/cam_image step 3"), 0),
    "rlds_jpeg_garbage_step_0": ("rlds", _image(0, GARBAGE), (SHARD, "steps/observation/cam_image step 0"), 0),
    "rlds_png_cut_step_5": (
        "rlds",
        _image(5, b"\x89PNG\r\n\x1a\n\x00\x00"),
        (SHARD, "steps/observation/cam_image step 5"),
        0,
    ),
    "zarr_camera_chunk_garbage": ("zarr", lambda s: _zarr_chunk(s, "cam_rgb", "5.0.0.0"), ("data/cam_rgb",), 0),
    "zarr_action_chunk_garbage": ("zarr", lambda s: _zarr_chunk(s, "action", "0.0"), ("data/action",), 0),
    "zarr_state_chunk_garbage": ("zarr", lambda s: _zarr_chunk(s, "state", "0.0"), ("data/state",), 0),
    "zarr_fps_10e400": ("zarr", lambda s: zarr_attr(s, "fps", 10**400), ("attrs fps",), 0),
    "zarr_ends_short_by_3": (
        "zarr",
        lambda s: zarr_episode_end(s, 0, 7),
        ("meta/episode_ends", "belong to no episode"),
        1,  # the steps past the last end: an item of their own
    ),
    "aloha_jpeg_garbage_frame_4": (
        "aloha",
        lambda p: aloha_replace_frame(p, 4, GARBAGE),
        ("observations/images/cam frame 4",),
        0,
    ),
    "aloha_qpos_chunk_garbage": (
        "aloha",
        lambda p: _h5_filtered_garbage(p, "observations/qpos", 0),
        ("observations/qpos",),
        0,
    ),
    "aloha_image_chunk_garbage": (
        "aloha",
        lambda p: _h5_filtered_garbage(p, "observations/images/cam", 6),
        ("observations/images/cam", "frame 6"),
        0,
    ),
}


def write_case(root: Path, name: str) -> Case:
    family, edit, expect, index = CASES[name]
    ep = make_episode(TINY, 0)
    if family == "rlds":
        ds = write_rlds([ep], root, name=name)
        edit(ds)
        shard = _shard(ds).name
        return Case(name, family, f"{name}#1.0.0/{shard}:0", tuple(e or shard for e in expect))
    if family == "zarr":
        store = write_zarr([ep], root, name=name)
        edit(store)
        return Case(name, family, f"{store.name}#{index:06d}", (store.name, *expect))
    path = write_aloha(ep, root, compress=True, index=[n for n in CASES if CASES[n][0] == "aloha"].index(name))
    edit(path)
    return Case(name, family, path.name, (path.name, *expect))
