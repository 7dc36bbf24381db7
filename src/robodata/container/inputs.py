"""What EpisodeWriter accepts: checks of a caller's streams, timestamps and events.

Each check raises ContainerError naming the episode and the stream, so that a bad call is told
apart from a bug, and nothing is written that a reader with the default `ReaderConfig` refuses.
"""

from __future__ import annotations

import json
import math
import operator
from typing import Any

import numpy as np

from robodata.codecs.arrays import array_decoded_bytes
from robodata.container.limits import ReaderConfig
from robodata.container.meta import Layout, StreamSpec
from robodata.errors import ContainerError
from robodata.names import is_safe_name

READABLE = ReaderConfig()  # never write what a reader with the default caps refuses


def check_stream(episode: str, name: str, spec: StreamSpec, layout: Layout) -> None:
    """A declared stream: a safe name, in one group that fits its kind, of a readable size."""
    if not is_safe_name(name):
        raise ContainerError(
            episode, f"stream name {name!r} may hold only letters, digits, '.', '_' and '-' (at most 128)"
        )
    try:
        g = layout.group_of(name)
    except KeyError:
        raise ContainerError(episode, f"stream {name!r} is in no topic group of the layout") from None
    if (spec.kind == "video") != (g.video is not None):
        raise ContainerError(
            episode,
            f"stream {name!r} ({spec.kind}) is in group {g.name!r} which "
            f"{'has' if g.video else 'has no'} video settings; never mix cameras and other streams",
        )
    if spec.kind == "video" and math.prod(spec.shape) > READABLE.max_frame_bytes:
        raise ContainerError(episode, f"stream {name!r}: frames of {spec.shape} are over ReaderConfig.max_frame_bytes")
    if spec.kind == "array":
        if np.dtype(spec.dtype).kind not in "biuf" or any(d < 1 for d in spec.shape):
            raise ContainerError(episode, f"array stream {name!r}: needs a numeric dtype and dimensions >= 1")
        if array_decoded_bytes(1, spec.shape, spec.dtype) > READABLE.max_decode_bytes:
            raise ContainerError(
                episode, f"stream {name!r}: one sample of {spec.shape} is over ReaderConfig.max_decode_bytes"
            )


def time(episode: str, stream: str, t: Any) -> int:
    """One timestamp (int64 ns)."""
    try:
        v = operator.index(t) if not isinstance(t, float) else int(t)
    except (TypeError, ValueError, OverflowError):
        raise ContainerError(episode, f"{stream!r}: timestamp {t!r} is not an integer (ns)") from None
    if not -(1 << 63) <= v < (1 << 63):
        raise ContainerError(episode, f"{stream!r}: timestamp {v} is outside int64")
    return v


def times(episode: str, stream: str, t: Any) -> np.ndarray:
    """(N,) int64 ns from integers, or from finite floats (truncated, as they always were)."""
    try:
        arr = np.asarray(t)
        if arr.ndim != 1:
            raise ValueError(f"shape {arr.shape}, expected (N,)")
        if arr.dtype.kind not in "iuf" and arr.size:
            raise TypeError(f"dtype {arr.dtype}")
        if arr.size and arr.dtype.kind in "uf" and not (np.all(np.isfinite(arr)) and arr.max() < 2.0**63):
            raise OverflowError("a timestamp is not finite or outside int64")
        if arr.size and arr.dtype.kind == "f" and arr.min() < -(2.0**63):
            raise OverflowError("a timestamp is outside int64")
        return arr.astype(np.int64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ContainerError(episode, f"{stream!r}: timestamps must be integer ns: {exc}") from None


def events(episode: str, stream: str, n: int, labels: Any, payloads: Any) -> tuple[list[str], list[dict[str, Any]]]:
    """n string labels and n JSON-object payloads (empty objects when none are given)."""
    labels = list(labels)
    payloads = list(payloads) if payloads else [{}] * len(labels)
    if len(labels) != n or len(payloads) != n:
        raise ContainerError(episode, f"{stream!r}: {len(labels)} labels, {len(payloads)} payloads for {n} timestamps")
    if not all(isinstance(x, str) for x in labels):
        raise ContainerError(episode, f"{stream!r}: event labels must be strings")
    try:
        if not all(isinstance(p, dict) for p in payloads):
            raise TypeError("payloads must be dicts")
        for p in payloads:
            json.dumps(p, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ContainerError(episode, f"{stream!r}: event payloads must be JSON objects: {exc}") from None
    return labels, payloads
