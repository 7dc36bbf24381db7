"""Issue 24 for the step-array importers (HDF5, Zarr, RLDS): formats with no per-sample clock take
their rate, step count and frame size from what the file declares, so a declaration that is not a
rate, or that contradicts the data or another declaration, is refused naming the field."""

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from robodata.ingest.importers import open_raw
from robodata.ingest.importers.tfds_features import contradicts, image_shapes
from robodata.ingest.raw import RawEpisodeError
from robodata.ingest.synth import SynthConfig, make_episode
from robodata.ingest.synth.arrays import write_aloha, write_rlds, write_robomimic, write_zarr

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


def _features(shape: list[str]) -> dict:
    """features.json as TFDS writes it: steps (a Dataset) of observation/image (an Image)."""
    image = {"pythonClassName": "tensorflow_datasets.core.features.image_feature.Image",
             "image": {"shape": {"dimensions": shape}, "dtype": "uint8", "encodingFormat": "jpeg"}}  # fmt: skip
    obs = {"featuresDict": {"features": {"image": image, "state": {"tensor": {"shape": {"dimensions": ["7"]}}}}}}
    step = {"featuresDict": {"features": {"observation": obs}}}
    return {"featuresDict": {"features": {"steps": {"sequence": {"feature": step, "length": "-1"}}}}}


def test_tfds_image_shapes_are_read_from_the_proto_json_tfds_writes():
    assert image_shapes(_features(["256", "320", "3"])) == {"steps/observation/image": (256, 320, 3)}
    assert image_shapes(_features(["-1", "-1", "3"])) == {"steps/observation/image": (None, None, 3)}
    assert image_shapes({"featuresDict": 3}) == {} and image_shapes([]) == {}
    assert contradicts((256, 320, 3), 320, 256) and not contradicts((None, 320, 3), 10, 320)


def test_rlds_frames_must_be_the_size_features_json_declares(tmp_path):
    ds = write_rlds([_ep()], tmp_path)
    uri = f"{ds}#1.0.0/rlds_ds-train.tfrecord-00000-of-00001:0:0"
    assert open_raw(uri, "rlds").cameras["cam_image"].height == 16  # the synthetic writer declares 16x16x3
    ff = ds / "1.0.0" / "features.json"
    doc = json.loads(ff.read_text())
    obs = doc["featuresDict"]["features"]["steps"]["sequence"]["feature"]["featuresDict"]["features"]["observation"]
    obs["featuresDict"]["features"]["cam_image"]["image"]["shape"]["dimensions"] = ["32", "32", "3"]
    ff.write_text(json.dumps(doc))
    with pytest.raises(RawEpisodeError, match=r"features\.json: field steps/observation/cam_image .*32x32x3.*16x16x3"):
        open_raw(uri, "rlds")
    obs["featuresDict"]["features"]["cam_image"]["image"]["shape"]["dimensions"] = ["-1", "16", "3"]
    ff.write_text(json.dumps(doc))
    assert np.isclose(open_raw(uri, "rlds").cameras["cam_image"].fps, 10.0)  # a free dimension fits any
