"""Synthetic raw recordings for tests, benches and the demo: one content model, several formats.

episode.py  the content (cameras rendered on demand, joints, commands, events, clock offsets)
legacy.py   per-frame JPEG folders, as robots upload today
mcap.py     one MCAP file per episode (foxglove.CompressedImage + JointState-like JSON)
lerobot.py  small LeRobot v2.1 / v3.0 datasets
ros.py      ROS 1 `.bag` and ROS 2 bags of vendor message types (rosbags' writers)
arrays.py   HDF5 (ALOHA / robomimic, h5py) and Zarr replay buffers (zarr)
writers.py  `--format NAME` -> writer, one signature; each format's registry entry names its writers
            (robodata.ingest.formats)
"""

from __future__ import annotations

import os
from pathlib import Path

from robodata.ingest.synth.episode import SynthConfig, SynthEpisode, make_episode

__all__ = ["SynthConfig", "SynthEpisode", "make_episode", "synthesize"]


def synthesize(cfg: SynthConfig, root: str | os.PathLike[str]) -> list[Path]:
    """Write cfg.episodes episodes under root in cfg.format; returns the landing entries written."""
    from robodata.ingest import formats

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    from robodata.ingest.synth import writers

    write = getattr(writers, formats.synth_writer_name(cfg.format))
    return write([make_episode(cfg, i) for i in range(cfg.episodes)], root, cfg)
