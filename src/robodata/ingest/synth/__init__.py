"""Synthetic raw recordings for tests, benches and the demo: one content model, several formats.

episode.py  the content (cameras rendered on demand, joints, commands, events, clock offsets)
legacy.py   per-frame JPEG folders, as robots upload today
mcap.py     one MCAP file per episode (foxglove.CompressedImage + JointState-like JSON)
lerobot.py  small LeRobot v2.1 / v3.0 datasets
ros.py      ROS 1 `.bag` and ROS 2 bags of vendor message types (rosbags' writers)
arrays.py   HDF5 (ALOHA / robomimic, h5py) and Zarr replay buffers (zarr)
"""

from __future__ import annotations

import os
from pathlib import Path

from robodata.ingest.synth.arrays import DATASET_WRITERS, write_aloha
from robodata.ingest.synth.episode import SynthConfig, SynthEpisode, make_episode
from robodata.ingest.synth.legacy import write_jpeg_episode
from robodata.ingest.synth.mcap import write_mcap_episode
from robodata.ingest.synth.ros import write_ros1_bag, write_ros2_bag_custom

__all__ = ["SynthConfig", "SynthEpisode", "make_episode", "synthesize"]


def synthesize(cfg: SynthConfig, root: str | os.PathLike[str]) -> list[Path]:
    """Write cfg.episodes episodes under root; returns their paths."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    eps = (make_episode(cfg, i) for i in range(cfg.episodes))
    if cfg.format in DATASET_WRITERS:  # many episodes in one landing item
        return [DATASET_WRITERS[cfg.format](list(eps), root, cfg.jpeg_quality)]
    out = []
    for ep in eps:
        if cfg.format == "jpeg":
            out.append(write_jpeg_episode(ep, root, cfg.jpeg_quality))
        elif cfg.format == "ros1-bag":
            out.append(write_ros1_bag(ep, root, cfg.jpeg_quality))
        elif cfg.format == "ros2-bag-custom":  # the vendor .msg files go to <root>/../<root name>-msgs
            out.append(write_ros2_bag_custom(ep, root, root.parent / f"{root.name}-msgs", cfg.jpeg_quality))
        elif cfg.format == "hdf5-aloha":
            out.append(write_aloha(ep, root, cfg.jpeg_quality))
        else:
            out.append(write_mcap_episode(ep, root, cfg.jpeg_quality))
    return out
