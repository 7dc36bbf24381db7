"""Issue 37: a key map declares what a camera shows (`camera_roles`), and the catalog row carries it."""

from __future__ import annotations

import pytest

from robodata.container import EpisodeReader
from robodata.errors import ConfigError
from robodata.ingest.align import aligned_tracks
from robodata.ingest.convert import convert
from robodata.ingest.importers import open_raw
from robodata.ingest.importers.keymap import KeyMap
from robodata.ingest.importers.options import ImportOptions
from robodata.ingest.steps.episode_metadata import container_row
from robodata.ingest.synth import SynthConfig, make_episode
from robodata.ingest.synth.arrays import write_zarr

TINY = SynthConfig(episodes=1, duration_s=1.0, height=16, width=16, fps=10.0, state_hz=10.0, cameras=("cam", "aux"))
MAP = """
- name: lab
  format: zarr
  fps: 10
  arrays: {cmd: action, joint_pos: state}
  image_keys: "_rgb$"
  camera_roles: {cam_rgb: front, aux_rgb: wrist, not_here: top}
"""


def _row(tmp_path, key_map: str) -> dict:
    store = write_zarr([make_episode(TINY, 0)], tmp_path)
    raw = open_raw(f"{store}#0", "zarr", None, 0, ImportOptions(key_map=key_map))
    convert(raw, aligned_tracks(raw), tmp_path / "ep.rdep")
    r = EpisodeReader.open(tmp_path / "ep.rdep")
    try:
        return container_row(r, str(tmp_path / "ep.rdep"), "b")
    finally:
        r.close()


def test_a_key_maps_camera_roles_land_in_the_catalog_row(tmp_path):
    km = tmp_path / "km.yaml"
    km.write_text(MAP)
    row = _row(tmp_path, str(km))
    roles = dict(zip(row["cameras"], row["camera_roles"], strict=True))
    assert roles == {"aux_rgb": "wrist", "cam_rgb": "front"}  # a role for a camera it lacks is not invented
    assert (row["state_stream"], row["action_stream"]) == ("joint_pos", "cmd")


def test_without_a_declaration_the_names_say_nothing(tmp_path):
    row = _row(tmp_path, "")  # the built-in diffusion_policy map declares no roles; `cam_rgb` names none
    assert row["camera_roles"] == ["", ""]


@pytest.mark.parametrize("role", ["state", "", 3])
def test_a_bad_camera_role_is_refused_naming_the_map_and_the_camera(tmp_path, role):
    with pytest.raises(ConfigError, match=r"key map 'lab'.*camera_roles"):
        KeyMap("lab", "zarr", cameras={"cam": "img"}, camera_roles={"cam": role})
