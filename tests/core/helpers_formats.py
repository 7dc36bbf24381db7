"""Landing zones holding every public format robodata imports, written by each ecosystem's own
writer (robodata.ingest.synth), plus entries no importer claims; hostile variants of each."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from robodata.ingest.synth import SynthConfig, make_episode, synthesize
from robodata.ingest.synth.arrays import write_aloha

TINY = dict(duration_s=1.0, height=48, width=64, fps=10.0, state_hz=50.0, cameras=("cam_left", "wrist"))
UNKNOWN = {"flight.ulg": "PX4 log", "euroc": "EuRoC", "notes.txt": "text file"}


def write_formats(root: Path, seed: int = 0) -> tuple[Path, Path, dict[str, int]]:
    """root/landing with good items of each new format; returns (landing, msgs dir, items per format)."""
    land = root / "landing"
    land.mkdir(parents=True, exist_ok=True)
    counts = {}
    for fmt, n in (
        ("ros1-bag", 1),
        ("ros2-bag-custom", 1),
        ("hdf5-aloha", 1),
        ("hdf5-robomimic", 2),
        ("zarr", 2),
        ("rlds", 2),
    ):
        cfg = SynthConfig(episodes=n, format=fmt, seed=seed, site=f"s-{fmt}", **TINY)  # type: ignore[arg-type]
        synthesize(cfg, land)
        counts[fmt] = n
    write_aloha(make_episode(SynthConfig(seed=seed, **TINY), 7), land, compress=True)  # type: ignore[arg-type]
    counts["hdf5-aloha"] += 1
    msgs = land.parent / "landing-msgs"
    shutil.move(str(msgs), root / "msgs")
    return land, root / "msgs", counts


def write_unknown(land: Path) -> None:
    (land / "flight.ulg").write_bytes(b"ULog\x01\x12\x35" + bytes(64))
    (land / "euroc" / "mav0" / "cam0").mkdir(parents=True)
    (land / "notes.txt").write_text("not a recording\n")


def hdf5_hostile(land: Path, good: Path) -> dict[str, str]:
    """Hostile ALOHA files next to `good`: name -> phrase its quarantine reason holds."""
    data = good.read_bytes()
    (land / "episode_900.hdf5").write_bytes(data[: len(data) // 3])  # truncated
    out = {"episode_900.hdf5": "HDF5"}
    edits = {
        "episode_901.hdf5": (lambda f: f.__delitem__("observations/qpos"), "missing key 'observations/qpos'"),
        "episode_902.hdf5": (
            lambda f: _replace(f, "observations/images/wrist", np.full((10, 48, 64, 3), 0.5, np.float32)),
            "dtype",
        ),
        "episode_903.hdf5": (lambda f: _zero(f), "zero steps"),
        "episode_904.hdf5": (lambda f: _replace(f, "action", np.zeros((4, 7), np.float32)), "step count"),
    }
    for name, (edit, expect) in edits.items():
        shutil.copy(good, land / name)
        with h5py.File(land / name, "a") as f:
            edit(f)
        out[name] = expect
    return out


def _replace(f, key: str, value: np.ndarray) -> None:
    del f[key]
    f[key] = value


def _zero(f) -> None:
    for key in ("observations/qpos", "observations/qvel", "observations/effort", "action"):
        _replace(f, key, np.zeros((0, 7), np.float32))
    for cam in list(f["observations/images"]):
        _replace(f, f"observations/images/{cam}", np.zeros((0, 48, 64, 3), np.uint8))


def zarr_hostile(land: Path) -> dict[str, str]:
    """A replay buffer whose episode_ends run past its data: both episodes quarantined."""
    import zarr

    synthesize(SynthConfig(episodes=1, format="zarr", **TINY), land / "tmp")  # type: ignore[arg-type]
    bad = land / "short.zarr"
    shutil.move(str(land / "tmp" / "replay.zarr"), bad)
    (land / "tmp").rmdir()
    g = zarr.open_group(str(bad), mode="a")
    del g["meta/episode_ends"]
    meta = g["meta"]
    assert isinstance(meta, zarr.Group)
    meta.create_array("episode_ends", data=np.array([5, 400], np.int64), config={"write_empty_chunks": True})
    return {"short.zarr#1": "meta/episode_ends needs 400"}


def rlds_hostile(land: Path) -> dict[str, str]:
    """RLDS datasets with a cut shard, an episode of zero steps, one without is_first / is_last, one
    whose state is text: item name (dataset#shard:index) -> phrase of its reason."""
    from robodata.ingest.importers.tfrecord import frame, make_example

    good = land / "rlds_ds"
    shard = next(good.rglob("*.tfrecord*"))
    rel = shard.relative_to(good)
    cut = shutil.copytree(good, land / "rlds_cut")
    data = shard.read_bytes()
    (cut / rel).write_bytes(data[: len(data) - 100])  # the second episode's record is cut short
    bad = shutil.copytree(good, land / "rlds_bad")
    records: list[dict[str, Any]] = [
        {
            "steps/is_first": np.zeros(0, np.int64),
            "steps/is_last": np.zeros(0, np.int64),
            "steps/action": np.zeros(0, np.float32),
        },
        {"steps/action": np.zeros((3, 7), np.float32)},
        {"steps/is_first": np.array([1, 0]), "steps/is_last": np.array([0, 1]), "steps/action": [b"a", b"b"]},
    ]
    (bad / rel).write_bytes(b"".join(frame(make_example(r)) for r in records))
    return {
        f"rlds_cut#{rel}:1": "truncated",
        f"rlds_bad#{rel}:0": "zero steps",
        f"rlds_bad#{rel}:1": "is_first",
        f"rlds_bad#{rel}:2": "dtype",
    }


def hostile_format_cases(landing: Path, base: Path, tiny: dict) -> tuple[list[str], dict[str, str]]:
    """For the hostile landing (helpers_hostile.build): a good ALOHA file and ROS 1 bag, and hostile
    HDF5 / ROS 1 items and unknown entries: (good item names, {hostile name: reason phrase})."""
    aloha = synthesize(SynthConfig(episodes=1, format="hdf5-aloha", **tiny), base / "aloha")[0]
    bag = synthesize(SynthConfig(episodes=1, format="ros1-bag", site="site-r", **tiny), base / "ros1")[0]
    for src in (aloha, bag):
        shutil.copy(src, landing / src.name)
    cases = hdf5_hostile(landing, landing / aloha.name)
    data = bag.read_bytes()
    (landing / "rb-truncated.bag").write_bytes(data[: len(data) // 2])
    (landing / "rb-garbage.bag").write_bytes(b"#ROSBAG V2.0\n" + bytes(range(256)) * 4)
    cases |= {"rb-truncated.bag": "ROS 1 bag", "rb-garbage.bag": "ROS 1 bag"}
    write_unknown(landing)
    cases |= {"flight.ulg": "PX4 log", "euroc": "EuRoC dataset folder", "notes.txt": "unrecognized"}
    return [aloha.name, bag.name], cases
