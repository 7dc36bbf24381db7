"""Structured messages -> one named numeric vector (topic rules of kind `vector`).

Walks a rosbags message object (a dataclass) or a JSON dict in field order: numbers become
one entry each (`pose.position.x`), numeric arrays one entry per element (`position[2]`, or
`position.<joint>` when a sibling `name` list names them, as in JointState). Headers, frame
ids, strings and covariance matrices are not state and are skipped. Vector3, Quaternion,
Pose, Twist, Imu, Odometry, TransformStamped, JointState ... all flatten without a rule per
scalar; the names are the stream's column names.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

SKIP = ("header", "child_frame_id", "frame_id", "__msgtype__")


def _fields(msg: Any) -> list[tuple[str, Any]]:
    if isinstance(msg, dict):
        return list(msg.items())
    if dataclasses.is_dataclass(msg):
        return [(f.name, getattr(msg, f.name)) for f in dataclasses.fields(msg)]
    return []


def flatten(msg: Any, prefix: str = "") -> tuple[list[str], list[float]]:
    """(names, values) of every numeric leaf under `msg`."""
    names: list[str] = []
    values: list[float] = []
    labels = None
    items = _fields(msg)
    for k, v in items:
        if k == "name" and isinstance(v, list | tuple) and all(isinstance(x, str) for x in v):
            labels = [str(x) for x in v]
    for k, v in items:
        if k in SKIP or k.endswith("covariance") or isinstance(v, str | bytes):
            continue
        key = f"{prefix}{k}"
        if isinstance(v, bool | int | float | np.integer | np.floating):
            names.append(key)
            values.append(float(v))
        elif isinstance(v, np.ndarray | list | tuple):
            arr = np.asarray(v)
            if arr.dtype.kind not in "biuf":
                continue
            flat = arr.reshape(-1).astype(np.float64)
            use = labels if labels is not None and len(labels) == len(flat) else None
            names += [f"{key}.{use[i]}" if use else f"{key}[{i}]" for i in range(len(flat))]
            values += flat.tolist()
        else:
            n, x = flatten(v, key + ".")
            names += n
            values += x
    return names, values
