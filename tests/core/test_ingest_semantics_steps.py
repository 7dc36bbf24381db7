"""Issue 24 for the step-array importers (HDF5, Zarr, RLDS): formats with no per-sample clock take
their rate, step count and frame size from what the file declares, so a declaration that is not a
rate, or that contradicts the data or another declaration, is refused naming the field."""

import json
from pathlib import Path

import h5py
import pytest

from robodata.ingest.importers import open_raw
from robodata.ingest.raw import RawEpisodeError
from robodata.ingest.synth import SynthConfig, make_episode
from robodata.ingest.synth.arrays import write_aloha, write_robomimic, write_zarr

TINY = SynthConfig(episodes=1, duration_s=1.0, height=16, width=16, fps=15.0, state_hz=50.0, cameras=("cam",))


def _ep(seed: int = 0):
    return make_episode(TINY, seed)


def _zarr(root: Path, fps) -> str:
    root.mkdir(exist_ok=True)
    p = write_zarr([_ep()], root)
    attrs = json.loads((p / ".zattrs").read_text())
    attrs["fps"] = fps
    (p / ".zattrs").write_text(json.dumps(attrs))
    return f"{p}#0"


def test_zarr_declared_zero_fps_is_refused_not_replaced_by_the_key_map_default(tmp_path):
    with pytest.raises(RawEpisodeError, match=r"attrs fps = 0: not a control rate"):
        open_raw(_zarr(tmp_path, 0), "zarr")
    raw = open_raw(_zarr(tmp_path / "ok", 15.0), "zarr")  # a declared rate is the rate
    assert {t.fps for t in raw.cameras.values()} == {15.0}


@pytest.mark.parametrize("fps", [1e-9, 0.01, -15.0, "fifteen", 1e9])
def test_a_step_rate_that_is_not_a_control_rate_is_refused_naming_the_field(tmp_path, fps):
    path = write_aloha(_ep(), tmp_path, index=3)
    with h5py.File(path, "a") as f:
        f.attrs["fps"] = fps
    with pytest.raises(RawEpisodeError, match=r"episode_3\.hdf5: / attrs fps = .*not a control rate"):
        open_raw(str(path), "hdf5")
    with pytest.raises(RawEpisodeError, match=r"attrs fps = .*not a control rate"):
        open_raw(_zarr(tmp_path / "z", fps), "zarr")


def _robomimic(root: Path, demo_fps=None, control_freq=15.0, num_samples=None) -> str:
    root.mkdir()
    path = write_robomimic([_ep()], root)
    with h5py.File(path, "a") as f:
        env = json.loads(f["data"].attrs["env_args"])
        env["env_kwargs"]["control_freq"] = control_freq
        f["data"].attrs["env_args"] = json.dumps(env)
        if demo_fps is not None:
            f["data/demo_0"].attrs["fps"] = demo_fps
        if num_samples is not None:
            f["data/demo_0"].attrs["num_samples"] = num_samples
    return f"{path}#data/demo_0"


def test_robomimic_rate_declarations_that_disagree_are_refused_naming_both(tmp_path):
    with pytest.raises(RawEpisodeError, match=r"disagree: /data/demo_0 attrs fps = 45 Hz, .*control_freq = 15 Hz"):
        open_raw(_robomimic(tmp_path / "a", demo_fps=45.0), "hdf5")
    raw = open_raw(_robomimic(tmp_path / "b", demo_fps=15.0), "hdf5")  # agreeing declarations
    assert {t.fps for t in raw.cameras.values()} == {15.0}
    with pytest.raises(RawEpisodeError, match=r"control_freq = '1e-09': not a control rate"):
        open_raw(_robomimic(tmp_path / "c", control_freq=1e-9), "hdf5")


def test_robomimic_num_samples_must_be_the_step_count(tmp_path):
    n = len(make_episode(TINY, 0).frame_t["cam"])
    with pytest.raises(RawEpisodeError, match=rf"attrs num_samples = {n + 4}, but the episode's streams hold \[{n}\]"):
        open_raw(_robomimic(tmp_path / "a", num_samples=n + 4), "hdf5")
    assert open_raw(_robomimic(tmp_path / "b", num_samples=n), "hdf5").cameras["cam_image"].t_ns.shape == (n,)
