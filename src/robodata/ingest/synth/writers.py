"""`robodata synth --format NAME` writers, one signature for all: (episodes, landing root, config)
-> the landing entries written. Each format's registry entry (robodata.ingest.formats) names the
writers that produce it."""

from __future__ import annotations

from pathlib import Path

from robodata.ingest.synth.episode import SynthConfig, SynthEpisode


def jpeg(eps: list[SynthEpisode], root: Path, cfg: SynthConfig) -> list[Path]:
    from robodata.ingest.synth.legacy import write_jpeg_episode

    return [write_jpeg_episode(ep, root, cfg.jpeg_quality) for ep in eps]


def mcap(eps: list[SynthEpisode], root: Path, cfg: SynthConfig) -> list[Path]:
    from robodata.ingest.synth.mcap import write_mcap_episode

    return [write_mcap_episode(ep, root, cfg.jpeg_quality) for ep in eps]


def ros1_bag(eps: list[SynthEpisode], root: Path, cfg: SynthConfig) -> list[Path]:
    from robodata.ingest.synth.ros import write_ros1_bag

    return [write_ros1_bag(ep, root, cfg.jpeg_quality) for ep in eps]


def ros2_bag_custom(eps: list[SynthEpisode], root: Path, cfg: SynthConfig) -> list[Path]:
    """The vendor .msg files go to `<root>/../<root name>-msgs` (pass it as `--msgs`)."""
    from robodata.ingest.synth.ros import write_ros2_bag_custom

    return [write_ros2_bag_custom(ep, root, root.parent / f"{root.name}-msgs", cfg.jpeg_quality) for ep in eps]


def hdf5_aloha(eps: list[SynthEpisode], root: Path, cfg: SynthConfig) -> list[Path]:
    from robodata.ingest.synth.arrays import write_aloha

    return [write_aloha(ep, root, cfg.jpeg_quality) for ep in eps]


def hdf5_robomimic(eps: list[SynthEpisode], root: Path, cfg: SynthConfig) -> list[Path]:
    from robodata.ingest.synth.arrays import write_robomimic

    return [write_robomimic(eps, root, cfg.jpeg_quality)]


def zarr(eps: list[SynthEpisode], root: Path, cfg: SynthConfig) -> list[Path]:
    from robodata.ingest.synth.arrays import write_zarr

    return [write_zarr(eps, root, cfg.jpeg_quality)]


def rlds(eps: list[SynthEpisode], root: Path, cfg: SynthConfig) -> list[Path]:
    from robodata.ingest.synth.arrays import write_rlds

    return [write_rlds(eps, root, cfg.jpeg_quality)]


def _lerobot(version: str, eps: list[SynthEpisode], root: Path, cfg: SynthConfig) -> list[Path]:
    """A LeRobot dataset of cfg's shape (its own content model: robodata.ingest.synth.lerobot)."""
    from robodata.ingest.synth.lerobot import write_lerobot

    fps = max(1, round(cfg.fps))
    return [
        write_lerobot(
            root / f"lerobot_{version.replace('.', '')}",
            version,
            episodes=len(eps),
            frames_per_episode=max(2, round(cfg.duration_s * fps)),
            fps=fps,
            height=cfg.height,
            width=cfg.width,
            cameras=cfg.cameras,
            seed=cfg.seed,
        )
    ]


def lerobot_v21(eps: list[SynthEpisode], root: Path, cfg: SynthConfig) -> list[Path]:
    return _lerobot("v2.1", eps, root, cfg)


def lerobot_v30(eps: list[SynthEpisode], root: Path, cfg: SynthConfig) -> list[Path]:
    return _lerobot("v3.0", eps, root, cfg)
