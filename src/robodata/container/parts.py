"""Verified decoding of one part: its bytes must hold exactly what its footer entry declares.

Each decoder takes its memory from the read's budgets before allocating (see codecs.ipc), then
checks the decoded rows against the part's entry: row count, first and last timestamp, sorted
times (strictly increasing frames for video, which must start with a keyframe). Any mismatch is
a `ContainerError` naming the episode, the file and the chunk; a budget overrun is a
`ContainerLimitError`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pyarrow as pa

from robodata.codecs.arrays import PY_OBJECT_BYTES, array_table, decode_array, decode_packets, events_table
from robodata.codecs.ipc import DecodeBudget
from robodata.container.format import ChunkInfo, PartInfo
from robodata.container.limits import ReaderConfig
from robodata.container.meta import StreamSpec
from robodata.errors import CodecError, ContainerError, ContainerLimitError, DecodeLimitError


class ReadBudgets:
    """The decode-memory budgets of one read (shared by its decode threads).

    `stored` is what the read fetched (the parts' bytes): the read may decompress at most
    max(config.expansion_floor_bytes, config.max_expansion x stored) of it, and never more than
    config.max_decode_bytes (None: max_decode_bytes alone)."""

    def __init__(self, config: ReaderConfig, stored: int | None = None):
        self.decode = _Locked(config.max_decode_bytes, "ReaderConfig.max_decode_bytes")
        if stored is not None:
            limit = max(config.expansion_floor_bytes, config.max_expansion * stored)
            if limit < config.max_decode_bytes:
                basis = f"{config.max_expansion} x the {stored:,} bytes read, at least {config.expansion_floor_bytes:,}"
                self.decode = _Locked(limit, "ReaderConfig.max_expansion", basis)
        self.frames = _Locked(config.max_frame_bytes, "ReaderConfig.max_frame_bytes")


class _Locked(DecodeBudget):
    def __init__(self, limit: int, knob: str, basis: str = ""):
        super().__init__(limit, knob, basis)
        self._lock = threading.Lock()

    def take(self, n: int, what: str) -> None:
        with self._lock:
            super().take(n, what)


class PartDecoder:
    """Decodes and verifies the parts of one episode; errors name `episode` and `path`."""

    def __init__(self, episode: str, path: str):
        self.episode = episode
        self.path = path

    def fail(self, message: str, chunk: int | None) -> ContainerError:
        return ContainerError(self.episode, message, chunk, path=self.path)

    @contextmanager
    def decoding(self, stream: str, chunk: int | None) -> Iterator[None]:
        """Turns codec errors inside the block into ContainerError / ContainerLimitError."""
        try:
            yield
        except DecodeLimitError as exc:
            raise ContainerLimitError(self.episode, f"{stream!r}: {exc}", chunk, path=self.path) from None
        except CodecError as exc:
            raise self.fail(f"cannot decode {stream!r}: {exc}", chunk) from None

    def lowdim(
        self, spec: StreamSpec, chunk: ChunkInfo, part: PartInfo, blob: bytes, lo: int, hi: int, budgets: ReadBudgets
    ) -> tuple[np.ndarray, np.ndarray]:
        """(t_ns, values) of an array or events part with lo <= t <= hi."""
        with self.decoding(spec.name, chunk.index):
            if spec.kind == "events":
                table = events_table(blob, budgets.decode, spec.name, part.count)
                t = table.column("t_ns").to_numpy()
                self._check_times(spec.name, chunk, part, t, strict=False)
                keep = np.nonzero((t >= lo) & (t <= hi))[0]
                budgets.decode.take(len(keep) * PY_OBJECT_BYTES, f"{spec.name!r} labels")
                labels = table.column("label").take(pa.array(keep)).to_pylist()
                return t[keep], np.array(labels, dtype=object)
            t, values = decode_array(blob, spec.shape, spec.dtype, budgets.decode, spec.name, part.count)
        self._check_times(spec.name, chunk, part, t, strict=False)
        m = (t >= lo) & (t <= hi)
        return t[m], values[m]

    def table(
        self, spec: StreamSpec, chunk: ChunkInfo, part: PartInfo, blob: bytes, budget: DecodeBudget | None
    ) -> pa.Table:
        """Any part's table as stored (exact ns times, payloads kept), verified like the reads verify it."""
        if spec.kind == "video":
            return self.packets(spec.name, chunk, part, blob, budget)
        with self.decoding(spec.name, chunk.index):
            if spec.kind == "events":
                table = events_table(blob, budget, spec.name, part.count)
            else:
                table = array_table(blob, spec.shape, spec.dtype, budget, spec.name, part.count)
        self._check_times(spec.name, chunk, part, table.column("t_ns").to_numpy(), strict=False)
        return table

    def packets(
        self, stream: str, chunk: ChunkInfo, part: PartInfo, blob: bytes, budget: DecodeBudget | None
    ) -> pa.Table:
        """A video part's packet table, verified: one row per declared packet, distinct pts whose
        times increase with pts, the first packet a keyframe."""
        with self.decoding(stream, chunk.index):
            table = decode_packets(blob, budget, stream, part.count)
        pts = table.column("pts").to_numpy()
        order = np.argsort(pts, kind="stable")
        if len(pts) and np.any(np.diff(pts[order]) == 0):
            raise self.fail(f"video {stream!r}: two packets share a pts", chunk.index)
        self._check_times(stream, chunk, part, table.column("t_ns").to_numpy()[order], strict=True)
        if not table.column("key")[0].as_py():
            raise self.fail(f"video {stream!r}: part does not start with a keyframe", chunk.index)
        return table

    def _check_times(self, stream: str, chunk: ChunkInfo, part: PartInfo, t: np.ndarray, strict: bool) -> None:
        if len(t) != part.count:
            raise self.fail(f"{stream!r}: part holds {len(t)} samples, its index entry says {part.count}", chunk.index)
        step = np.diff(t)
        if np.any(step <= 0 if strict else step < 0):
            raise self.fail(f"{stream!r}: sample times are not {'increasing' if strict else 'sorted'}", chunk.index)
        if (int(t[0]), int(t[-1])) != (part.t_start, part.t_end):
            raise self.fail(
                f"{stream!r}: samples span [{int(t[0])}, {int(t[-1])}] ns, its index entry says "
                f"[{part.t_start}, {part.t_end}]",
                chunk.index,
            )
