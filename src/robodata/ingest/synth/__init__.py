"""Synthetic raw recordings for tests, benches and the demo: one content model, several formats.

episode.py  the content (cameras rendered on demand, joints, commands, events, clock offsets)
legacy.py   per-frame JPEG folders, as robots upload today
mcap.py     one MCAP file per episode (foxglove.CompressedImage + JointState-like JSON)
lerobot.py  small LeRobot v2.1 / v3.0 datasets
"""

from __future__ import annotations

import os
from pathlib import Path

from robodata.ingest.synth.episode import SynthConfig, SynthEpisode, make_episode
from robodata.ingest.synth.legacy import write_jpeg_episode
from robodata.ingest.synth.mcap import write_mcap_episode

__all__ = ["SynthConfig", "SynthEpisode", "make_episode", "synthesize"]


def synthesize(cfg: SynthConfig, root: str | os.PathLike[str]) -> list[Path]:
    """Write cfg.episodes episodes under root; returns their paths."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(cfg.episodes):
        ep = make_episode(cfg, i)
        if cfg.format == "jpeg":
            out.append(write_jpeg_episode(ep, root, cfg.jpeg_quality))
        else:
            out.append(write_mcap_episode(ep, root, cfg.jpeg_quality))
    return out
