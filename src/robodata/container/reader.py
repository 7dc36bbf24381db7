"""EpisodeReader: open a container by its footer, read time windows touching only needed chunks.

For any bytes and any footer hints, a read returns exactly what was written or raises
`ContainerError` (see docs/container-format.md, "Guarantees"): the footer is checked once per
open (robodata.container.footer), every byte read is CRC-checked, every part is verified against
its index entry as it is decoded (robodata.container.window, robodata.container.parts), and what
a read may allocate is capped by `ReaderConfig`. I/O errors of the source itself (a missing
object, a network error) propagate unchanged, so callers can tell them from a bad file and retry them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from robodata.codecs.ipc import DecodeBudget
from robodata.container.footer import Footer, parse_footer
from robodata.container.format import (
    HEADER,
    ChunkInfo,
    PartInfo,
    checksum,
    unpack_header,
)
from robodata.container.limits import ReaderConfig
from robodata.container.opening import locate_footer
from robodata.container.parts import PartDecoder, ReadBudgets
from robodata.container.source import RangeSource, open_source
from robodata.container.window import ReaderStats, Window, WindowDecoder
from robodata.errors import ConfigError, ContainerError

_I64 = (1 << 63) - 1


@dataclass
class _Wanted:
    chunk: ChunkInfo
    parts: list[PartInfo] = field(default_factory=list)


class EpisodeReader:
    """An open container: its checked footer (`meta`, `layout`, `chunks`) and a byte-range source."""

    def __init__(
        self,
        source: RangeSource,
        footer: Footer,
        footer_offset: int,
        footer_length: int,
        decode_threads: int = 1,
        config: ReaderConfig | None = None,
        header_checked: bool = False,
    ):
        self.source = source
        self.config = config or ReaderConfig()
        self.meta = footer.meta
        self.layout = footer.layout
        self.layout_version = footer.layout_version
        self.chunks = footer.chunks
        self.footer_offset = footer_offset
        self.footer_length = footer_length
        self.stats = ReaderStats()
        self._extradata = footer.extradata
        self._decode_threads = decode_threads
        self._pool: ThreadPoolExecutor | None = None
        self._pool_pid = 0
        self._header_checked = header_checked
        self._parts = PartDecoder(self.meta.episode_id, source.name)

    # ----------------------------------------------------------------- opening
    @classmethod
    def open(
        cls,
        target: Any,
        footer_offset: int | None = None,
        footer_length: int | None = None,
        decode_threads: int = 1,
        config: ReaderConfig | None = None,
        **storage_options: Any,
    ) -> EpisodeReader:
        """Open a container and check its footer.

        Args:
            target: a local path, an fsspec URL (s3://...), a seekable file-like or a RangeSource.
            footer_offset, footer_length: the footer's place from a catalog or manifest, which
                saves the trailer read; they must match the file's own trailer.
            decode_threads: threads per video decoder.
            config: memory caps (ReaderConfig() by default).
            storage_options: passed to fsspec for URLs.

        Returns:
            The open reader; nothing but the footer (and trailer) has been read.

        Raises:
            ContainerError: the file is not a container, is truncated or corrupt, its footer is
                inconsistent, or the hints do not match it (ContainerLimitError when the footer is
                over `config.max_footer_bytes`).
            ConfigError: `config` is not a ReaderConfig.
            OSError: the source itself cannot be read (missing object, network).
        """
        if config is not None and not isinstance(config, ReaderConfig):
            raise ConfigError(f"config must be a ReaderConfig, got {type(config).__name__}")
        cfg = config or ReaderConfig()
        source = open_source(target, **storage_options)
        located = locate_footer(source, footer_offset, footer_length, cfg)
        footer = parse_footer(source.name, located.doc, located.offset, cfg)
        return cls(source, footer, located.offset, located.length, decode_threads, cfg, located.header_checked)

    # ----------------------------------------------------------------- reading
    def read_window(self, t0: float, t1: float, streams: list[str] | None = None, every: int = 1) -> dict[str, Window]:
        """All samples of `streams` with t0 <= t <= t1 (seconds since episode start).

        Video frames are decoded from the nearest keyframe at or before t0; `every` keeps
        every k-th frame (and lets the decoder skip non-reference frames).

        Args:
            t0, t1: the window in seconds since the episode's start (inf allowed, not NaN).
            streams: stream names (default: all).
            every: keep every k-th video frame (k >= 1).

        Returns:
            {stream: Window} in the order of `streams`.

        Raises:
            ContainerError: an unknown stream or bad argument, or any corrupt or inconsistent
                byte the read touches (ContainerLimitError: the read would decode more than
                `config.max_decode_bytes` / return more frames than `config.max_frame_bytes`).
        """
        streams = list(self.meta.streams) if streams is None else list(streams)
        for s in streams:
            if not isinstance(s, str) or s not in self.meta.streams:
                raise self._error(f"has no stream {s!r}; has {sorted(self.meta.streams)}")
        if not isinstance(every, int) or isinstance(every, bool) or every < 1:
            raise self._error(f"every must be an integer >= 1, got {every!r}")
        lo, hi = self._ns(t0), self._ns(t1)
        fetched = self.fetch_parts({s: (lo, hi) for s in streams})
        budgets = ReadBudgets(self.config, sum(len(blob) for _, _, blob in fetched))
        windows = WindowDecoder(
            self.meta, self.layout, self._extradata, self._parts, self.stats, self._decode_threads, self.source.name
        )

        def decode(s: str) -> Window:
            return windows.stream(s, [f for f in fetched if f[1].stream == s], lo, hi, every, budgets)

        cams = [s for s in streams if self.meta.streams[s].kind == "video"]
        # one decode thread per camera (PyAV releases the GIL while decoding)
        decoded = dict(zip(cams, self._decode_pool().map(decode, cams), strict=True)) if len(cams) > 1 else {}
        return {s: decoded[s] if s in decoded else decode(s) for s in streams}

    def _ns(self, t: Any) -> int:
        try:
            x = float(t) * 1e9
        except (TypeError, ValueError):
            raise self._error(f"window bound {t!r} is not a number") from None
        if math.isnan(x):
            raise self._error("window bound is NaN")
        return int(round(min(max(x, -_I64), _I64))) if math.isfinite(x) else (_I64 if x > 0 else -_I64)

    def _error(self, message: str, chunk: int | None = None) -> ContainerError:
        return ContainerError(self.meta.episode_id, message, chunk, path=self.source.name)

    def _decode_pool(self) -> ThreadPoolExecutor:
        # A pool inherited through fork has no threads behind it: make a fresh one per process.
        if self._pool is None or self._pool_pid != os.getpid():
            n = sum(1 for s in self.meta.streams.values() if s.kind == "video")
            self._pool = ThreadPoolExecutor(max_workers=max(1, n), thread_name_prefix="rd-decode")
            self._pool_pid = os.getpid()
        return self._pool

    def close(self) -> None:
        """Stop the decode threads and close the source."""
        if self._pool is not None and self._pool_pid == os.getpid():
            self._pool.shutdown(wait=False)
        self._pool = None
        close = getattr(self.source, "close", None)
        if close is not None:
            close()

    def fetch_parts(
        self, ranges: Mapping[str, tuple[int, int] | Sequence[tuple[int, int]]]
    ) -> list[tuple[ChunkInfo, PartInfo, bytes]]:
        """Verified bytes of every part of each stream in a chunk overlapping its [lo_ns, hi_ns] (or any
        of several such spans), in file order.

        Parts are selected by their chunk's span (checked at open to be the span of its parts), so
        a part whose own entry was altered is still read, and then fails its checks. One range
        read per touched chunk (covering only the wanted parts of it); the chunk CRC is checked
        when the whole chunk is read, else each part's CRC.

        Args:
            ranges: {stream: (lo_ns, hi_ns)} or {stream: [(lo_ns, hi_ns), ...]}, ns since
                meta.start_time_ns: scattered samples of one episode fetch only their own chunks.

        Returns:
            (chunk, part, bytes) triples; the bytes are CRC-checked but not decoded (decode them
            with robodata.codecs.arrays, passing the stream name, to have them checked too).

        Raises:
            ContainerError: a short read or a checksum mismatch.
        """
        one = {s: isinstance(r[0], (int, np.integer)) for s, r in ranges.items()}
        spans: dict = {s: [r] if one[s] else list(r) for s, r in ranges.items()}
        plan = []
        for c in self.chunks:
            parts = [
                p
                for p in c.parts
                if p.stream in spans and any(c.t_end >= lo and c.t_start <= hi for lo, hi in spans[p.stream])
            ]
            if parts:
                plan.append(_Wanted(c, parts))
        blobs = self._fetch(plan)
        return [(w.chunk, p, blobs[(w.chunk.index, p.stream)]) for w in plan for p in w.parts]

    def part_table(self, chunk: ChunkInfo, part: PartInfo, blob: bytes, budget: DecodeBudget | None = None) -> pa.Table:
        """The stored table of a part from fetch_parts, verified against its index entry (stream
        tag, schema, sample count, times; a video part's first packet a keyframe).

        `budget`: what the caller's read may still decode (None: this part alone, within
        ReaderConfig's caps relative to its stored bytes, as a read of it would be).

        Raises:
            ContainerError: the part does not hold what its entry declares (ContainerLimitError:
                decoding it would take more than `budget` has left).
        """
        budget = budget if budget is not None else ReadBudgets(self.config, len(blob)).decode
        return self._parts.table(self.meta.streams[part.stream], chunk, part, blob, budget)

    def codec_extradata(self, stream: str) -> bytes:
        """Codec parameter sets of a video stream (what a decoder needs before the first packet)."""
        return self._extradata.get(stream, b"")

    def _fetch(self, wanted: list[_Wanted]) -> dict[tuple[int, str], bytes]:
        out: dict[tuple[int, str], bytes] = {}
        for w in wanted:
            c = w.chunk
            whole = len(w.parts) == len(c.parts)
            start = c.offset + (0 if whole else min(p.offset for p in w.parts))
            end = c.offset + (c.length if whole else max(p.offset + p.length for p in w.parts))
            # The header is checked with the first read that starts next to it (no extra request).
            head = 0 if not self._header_checked and start == HEADER.size else start
            data = self.source.read(head, end - head)
            self.stats.range_reads += 1
            self.stats.bytes_read += len(data)
            self.stats.chunks_read += 1
            if len(data) != end - head:
                raise self._error(f"short read ({len(data)} of {end - head} bytes): truncated file", c.index)
            if head != start:
                unpack_header(self.source.name, data)
                self._header_checked = True
                data = data[start - head :]
            if whole and checksum(data) != c.checksum:
                raise self._error("chunk checksum mismatch (corrupted data)", c.index)
            for p in w.parts:
                rel = c.offset + p.offset - start
                blob = data[rel : rel + p.length]
                if not whole and checksum(blob) != p.checksum:
                    raise self._error(f"part {p.stream!r} checksum mismatch (corrupted data)", c.index)
                out[(c.index, p.stream)] = blob
        return out


def read_window(
    episode: Any,
    t0: float,
    t1: float,
    streams: list[str] | None = None,
    every: int = 1,
    *,
    config: ReaderConfig | None = None,
    **storage_options: Any,
) -> dict[str, Window]:
    """One-shot form of EpisodeReader.read_window: `episode` is a path, URL, file-like or reader.

    Raises:
        ContainerError: as EpisodeReader.open and EpisodeReader.read_window.
    """
    if isinstance(episode, EpisodeReader):
        return episode.read_window(t0, t1, streams, every)
    return EpisodeReader.open(episode, config=config, **storage_options).read_window(t0, t1, streams, every)
