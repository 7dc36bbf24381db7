"""Hostile RLDS datasets and ROS 1 / ROS 2 bags for bench.robustness importers_hostile (the
classes and the JPEG damage are bench/robustness_importers_hostile_cases.py's)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from bench.robustness_importers_hostile_cases import Case, damaged_jpegs, episode, everything, jpeg_variants, link_out


def rlds_cases(root: Path, outside: Path, keep: Callable[[str], bool] = everything) -> list[Case]:
    from robodata.ingest.synth import arrays

    d = root / "rlds"
    d.mkdir(parents=True, exist_ok=True)
    out: list[Case] = []
    for name, frame, damage, cls, expect in jpeg_variants(keep):
        with damaged_jpegs(arrays, frame, damage):
            arrays.write_rlds([episode()], d, name=name)
        out.append(Case(name, "rlds", cls, expect))
    for rel, label in (
        ("1.0.0/features.json", "features"),
        ("1.0.0/dataset_info.json", "info"),
        ("1.0.0/{name}-train.tfrecord-00000-of-00001", "shard"),
        ("1.0.0", "version_dir"),
    ):
        name = f"link_{label}"
        if not keep(name):
            continue
        p = arrays.write_rlds([episode()], d, name=name)
        link_out(p / rel.format(name=name), outside)
        out.append(Case(name, "rlds", "outside_root", "outside"))
    return out


def _ros1(d: Path, name: str) -> Path:
    from robodata.ingest.synth.ros import write_ros1_bag

    p = write_ros1_bag(episode(), d)
    return p.rename(d / f"{name}.bag")


def _ros2(d: Path, name: str, msgs: Path) -> Path:
    from robodata.ingest.synth.ros import write_ros2_bag_custom

    p = write_ros2_bag_custom(episode(), d, msgs)
    return p.rename(d / name)


def bag_cases(root: Path, outside: Path, msgs: Path, keep: Callable[[str], bool] = everything) -> list[Case]:
    from robodata.ingest.synth import ros

    out: list[Case] = []
    for fmt in ("ros1", "ros2"):
        d = root / fmt
        d.mkdir(parents=True, exist_ok=True)
        for name, frame, damage, cls, expect in jpeg_variants(keep):
            with damaged_jpegs(ros, frame, damage):
                p = _ros1(d, name) if fmt == "ros1" else _ros2(d, name, msgs)
            out.append(Case(p.name, fmt, cls, expect))
    if keep("linked"):
        os.symlink(_ros1(outside, "target"), root / "ros1" / "linked.bag")
        out.append(Case("linked.bag", "ros1", "outside_root", "outside"))
    d = root / "ros2"
    for label in ("db3", "metadata"):
        if not keep(f"link_{label}"):
            continue
        p = _ros2(d, f"link_{label}", msgs)
        target = next(p.glob("*.db3")) if label == "db3" else p / "metadata.yaml"
        link_out(target, outside)
        out.append(Case(p.name, "ros2", "outside_root", "outside"))
    return out
