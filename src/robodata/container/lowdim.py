"""Chunking of an episode's low-dimensional streams (arrays, events): a topic group's buffered
samples cut by the group's chunk span into parts, each encoded and bounded by what a reader decodes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from robodata.codecs.arrays import PY_OBJECT_BYTES, encode_array, encode_events
from robodata.codecs.ipc import ipc_info
from robodata.container import inputs
from robodata.container.meta import EpisodeMeta, TopicGroup
from robodata.errors import ContainerError

Part = tuple[str, bytes, int, int, int]  # stream, blob, first and last time, samples


def lowdim_chunks(
    meta: EpisodeMeta, group: TopicGroup, data: dict[str, list[tuple[np.ndarray, Any]]]
) -> Iterator[list[Part]]:
    """Each chunk's parts, in time order, from the pieces each stream was written in.

    Raises:
        ContainerError: a chunk of one stream decodes to more than ReaderConfig.max_decode_bytes.
    """
    if not data:
        return
    merged: dict[str, tuple[np.ndarray, Any]] = {}
    for s, pieces in data.items():
        t = np.concatenate([p[0] for p in pieces])
        if meta.streams[s].kind == "events":
            merged[s] = (t, ([x for p in pieces for x in p[1][0]], [x for p in pieces for x in p[1][1]]))
        else:
            merged[s] = (t, np.concatenate([p[1] for p in pieces]))
    t_lo = min(int(v[0][0]) for v in merged.values())
    t_hi = max(int(v[0][-1]) for v in merged.values())
    span = int(group.chunk_span_s * 1e9)
    for start in range(t_lo, t_hi + 1, span):
        parts = []
        for s, (t, vals) in merged.items():
            lo, hi = np.searchsorted(t, start), np.searchsorted(t, start + span)
            if hi <= lo:
                continue
            if meta.streams[s].kind == "events":
                blob = encode_events(t[lo:hi], vals[0][lo:hi], vals[1][lo:hi], stream=s)
                extra = int(hi - lo) * PY_OBJECT_BYTES
            else:
                blob = encode_array(t[lo:hi], vals[lo:hi], stream=s)
                extra = 0
            if ipc_info(blob).decoded_bytes + extra > inputs.READABLE.max_decode_bytes:
                raise ContainerError(
                    meta.episode_id,
                    f"{s!r}: a {group.chunk_span_s} s chunk of {hi - lo} samples decodes to more than "
                    "ReaderConfig.max_decode_bytes; use a shorter chunk_span_s for its group",
                )
            parts.append((s, blob, int(t[lo]), int(t[hi - 1]), int(hi - lo)))
        if parts:
            yield parts
