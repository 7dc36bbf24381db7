"""Log one episode to a Rerun recording, chunk by chunk (memory bounded by the chunk size).

Entity paths (timeline `episode_time`, a duration, = the container's t_ns):
    cameras/<stream>          VideoStream: the container's own samples (robodata.viz.samples)
    streams/<stream>          Scalars, one series per component, named by the stream's `names`
    events/<stream>           TextLog per event
    qc                        TextLog per QC outcome at the time it refers to (robodata.viz.qc)
    notes                     TextLog of what the viewer changed (re-encoded parts)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import av
import numpy as np
import pyarrow as pa
import rerun as rr
from rerun.encodings import BlobBatch

from robodata.codecs.video import VideoDecoder
from robodata.container import EpisodeReader
from robodata.container.format import ChunkInfo
from robodata.container.meta import StreamSpec
from robodata.container.parts import ReadBudgets
from robodata.errors import CodecError, ContainerError
from robodata.viz.paramsets import is_annexb
from robodata.viz.qc import QcFinding, StreamMarks, finding_time
from robodata.viz.reencode import reencode_part
from robodata.viz.samples import SampleMuxer, Samples, in_presentation_order

TIMELINE = "episode_time"
# Array samples are sent ARRAY_BATCH_ROWS at a time (a few MB at most): each Rerun chunk carries
# its schema, so 10 s batches of a 100 Hz stream cost ~1% of the recording's size in schemas alone.
ARRAY_BATCH_ROWS = 20_000
SLAB_S = 20.0  # seconds of chunks read and sent at once (fewer, larger Rerun chunks; ~20 s of video in memory)
_RR_CODECS = {"h264": rr.VideoCodec.H264, "hevc": rr.VideoCodec.H265, "av1": rr.VideoCodec.AV1}


@dataclass
class ViewStats:
    """What one `log_episode` wrote."""

    frames: dict[str, int] = field(default_factory=dict)  # video samples per camera
    scalars: dict[str, int] = field(default_factory=dict)  # rows per array stream
    events: int = 0
    reencoded_frames: int = 0
    qc_annotations: int = 0
    notes: list[str] = field(default_factory=list)


def camera_path(stream: str) -> str:
    return f"cameras/{stream}"


def stream_path(stream: str) -> str:
    return f"streams/{stream}"


def event_path(stream: str) -> str:
    return f"events/{stream}"


def _times(t_ns: np.ndarray) -> rr.TimeColumn:
    return rr.TimeColumn(TIMELINE, duration=np.asarray(t_ns, dtype=np.int64).astype("timedelta64[ns]"))


def _series_names(spec: StreamSpec, width: int) -> list[str]:
    if len(spec.names) == width:
        return [str(n) for n in spec.names]
    return [spec.name] if width == 1 else [f"{spec.name}[{i}]" for i in range(width)]


class EpisodeLogger:
    """Logs an open container's streams to `rec` (see the module docstring)."""

    def __init__(self, reader: EpisodeReader, rec: rr.RecordingStream, streams: list[str] | None = None):
        self.reader = reader
        self.rec = rec
        self.streams = list(reader.meta.streams) if streams is None else list(streams)
        self.stats = ViewStats()
        self.marks = StreamMarks()
        self._muxers: dict[str, SampleMuxer] = {}
        self._arrays: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}  # held back until ARRAY_BATCH_ROWS
        self._reencode: set[str] = set()  # cameras logged as re-encoded H.264 (their layout has B-frames)
        self._decoded: set[str] = set()  # cameras whose first logged keyframe decoded with their extradata

    def log_static(self) -> None:
        meta = self.reader.meta
        for s in self.streams:
            spec = meta.streams[s]
            if spec.kind == "video":
                video = self.reader.layout.group_of(s).video
                assert video is not None
                if video.bframes:
                    self._reencode.add(s)
                codec = rr.VideoCodec.H264 if video.bframes else _RR_CODECS[video.codec]
                self.rec.log(camera_path(s), rr.VideoStream(codec=codec), static=True)
                with self._video(s, None, "codec extradata"):
                    self._muxers[s] = SampleMuxer(video.codec, self.reader.codec_extradata(s))
            elif spec.kind == "array":
                width = int(np.prod(spec.shape)) if spec.shape else 1
                self.rec.log(stream_path(s), rr.SeriesLines(names=_series_names(spec, width)), static=True)
        info = {k: getattr(meta, k) for k in ("episode_id", "robot", "site", "task", "vendor", "duration_s")}
        text = "\n".join(f"- **{k}**: {v}" for k, v in info.items())
        self.rec.log("episode", rr.TextDocument(text, media_type=rr.MediaType.MARKDOWN), static=True)

    def chunks(self, t0: float = 0.0, t1: float = float("inf")) -> list[ChunkInfo]:
        """The chunks holding the wanted streams in [t0, t1], in file order."""
        lo, hi = self.reader._ns(t0), self.reader._ns(t1)
        want = set(self.streams)
        return [c for c in self.reader.chunks if c.t_end >= lo and c.t_start <= hi and want & set(c.streams)]

    def slabs(self, t0: float = 0.0, t1: float = float("inf")) -> Iterator[list[ChunkInfo]]:
        """`chunks(t0, t1)` by start time, in runs starting within SLAB_S (or one camera chunk span,
        if longer) of each other: what is read and sent at once, so memory is a few chunks of
        each group whatever the episode's length."""
        cams = max((g.chunk_span_s for g in self.reader.layout.groups if g.video), default=0.0)
        span = int(1e9 * max(SLAB_S, cams))
        run: list[ChunkInfo] = []
        for c in sorted(self.chunks(t0, t1), key=lambda c: (c.t_start, c.index)):
            if run and c.t_start >= run[0].t_start + span:
                yield run
                run = []
            run.append(c)
        if run:
            yield run

    def log_chunks(self, chunks: list[ChunkInfo], lo_ns: int, hi_ns: int) -> None:
        """Read, verify and log the wanted parts of `chunks` (samples with lo_ns <= t <= hi_ns):
        one range read per chunk, one send per stream. The chunks must be the next ones of their
        groups in time (earlier chunks of a group already logged), as `log_episode` passes them."""
        mine = {c.index for c in chunks}
        ranges: dict[str, tuple[int, int]] = {}
        for c in chunks:
            for p in c.parts:
                if p.stream in self.streams:
                    a, b = ranges.get(p.stream, (c.t_start, c.t_end))
                    ranges[p.stream] = (min(a, c.t_start), max(b, c.t_end))
        video: dict[str, list[Samples]] = {}
        arrays: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        fetched = self.reader.fetch_parts(ranges)
        # what the slab may decode, as one read of the same bytes may
        budget = ReadBudgets(self.reader.config, sum(len(blob) for _, _, blob in fetched)).decode
        for c, part, blob in fetched:
            if c.index not in mine or part.stream not in self.streams:
                continue
            table = self.reader.part_table(c, part, blob, budget)
            spec = self.reader.meta.streams[part.stream]
            if spec.kind == "video":
                video.setdefault(spec.name, []).append(self._video_samples(spec, c, table, lo_ns, hi_ns))
                continue
            t = table.column("t_ns").to_numpy()
            keep = (t >= lo_ns) & (t <= hi_ns)
            if spec.kind == "events":
                self._log_events(spec, t[keep], np.asarray(table.column("label").to_pylist(), dtype=object)[keep])
            else:
                arrays.setdefault(spec.name, []).append((t[keep], _array_values(table, spec)[keep]))
        for name, parts in video.items():
            self._send_video(name, parts)
        for name, pieces in arrays.items():
            pending = self._arrays.setdefault(name, [])
            pending += pieces
            if sum(len(t) for t, _ in pending) >= ARRAY_BATCH_ROWS:
                self.flush_arrays(name)

    def flush_arrays(self, name: str | None = None) -> None:
        """Send the array samples held back (all streams when `name` is None)."""
        for s in [name] if name is not None else list(self._arrays):
            pieces = self._arrays.pop(s, [])
            if pieces:
                t = np.concatenate([t for t, _ in pieces])
                self._log_array(self.reader.meta.streams[s], t, np.concatenate([v for _, v in pieces]))

    @contextmanager
    def _video(self, stream: str, chunk: int | None, what: str) -> Iterator[None]:
        """Codec errors inside the block (the viewer's own parsing, libavcodec's) as a
        ContainerError naming the stream, as the reader turns its decode errors."""
        try:
            yield
        except (CodecError, av.FFmpegError) as exc:
            reason = f"video {stream!r}: {what}: {type(exc).__name__}: {exc}"
            raise ContainerError(self.reader.meta.episode_id, reason, chunk, path=self.reader.source.name) from None

    def _check_decodes(self, spec: StreamSpec, codec: str, chunk: ChunkInfo, table: Any) -> None:
        """The stream's first logged keyframe decodes with its extradata to its declared size:
        what the reader's decoder needs before it returns a frame (once per stream)."""
        if spec.name in self._decoded:
            return
        first = (int(table.column("pts")[0].as_py()), int(table.column("dts")[0].as_py()))
        with self._video(spec.name, chunk.index, "its first keyframe does not decode with the codec extradata"):
            dec = VideoDecoder(codec, self.reader.codec_extradata(spec.name), size=(spec.shape[0], spec.shape[1]))
            if not dec.decode([(*first, table.column("data")[0].as_py())], {first[0]}):
                raise CodecError("no frame came out")
        self._decoded.add(spec.name)

    def _video_samples(self, spec: StreamSpec, chunk: ChunkInfo, table: Any, lo: int, hi: int) -> Samples:
        s = spec.name
        muxer = self._muxers[s]
        self._check_decodes(spec, muxer.codec, chunk, table)
        first = table.column("data")[0].as_py()
        playable = in_presentation_order(table) and (muxer.codec == "av1" or is_annexb(first) or muxer.has_lengths)
        if not playable and s not in self._reencode and muxer.codec != "h264":
            # the entity's codec is one for all its samples: from here on every part is re-encoded
            self.rec.log(camera_path(s), rr.VideoStream(codec=rr.VideoCodec.H264), static=True)
            self._reencode.add(s)
        if playable and s not in self._reencode:
            with self._video(s, chunk.index, "packets do not re-mux"):
                return _clip(muxer.samples(table), lo, hi)
        extradata = self.reader.codec_extradata(s)
        with self._video(s, chunk.index, "part does not re-encode"):
            samples = reencode_part(muxer.codec, extradata, table, spec.shape, spec.rate_hz, (lo, hi))
        self.stats.reencoded_frames += len(samples.data)
        why = "B-frames" if not in_presentation_order(table) else "not Annex B"
        note = f"{s}: chunk {chunk.index} re-encoded as H.264 ({why}; {len(samples.data)} frames)"
        self.stats.notes.append(note)
        self.rec.set_time(TIMELINE, duration=np.timedelta64(max(chunk.t_start, lo), "ns"))
        self.rec.log("notes", rr.TextLog(note, level=rr.TextLogLevel.WARN))
        self.rec.reset_time()
        return samples

    def _send_video(self, s: str, parts: list[Samples]) -> None:
        data = pa.concat_arrays([p.data for p in parts]) if parts else pa.array([], pa.binary())
        if not len(data):
            return
        t = np.concatenate([p.t_ns for p in parts])
        key = np.concatenate([p.key for p in parts])
        self.rec.send_columns(
            camera_path(s),
            indexes=[_times(t)],
            columns=rr.VideoStream.columns(
                sample=cast(Any, _blobs(data)), is_keyframe=key.tolist()
            ),  # a BlobBatch works
        )
        self.stats.frames[s] = self.stats.frames.get(s, 0) + len(data)
        self.marks.see(s, t, None)

    def _log_array(self, spec: StreamSpec, t: np.ndarray, values: np.ndarray) -> None:
        if not len(t):
            return
        flat = values.reshape(len(t), -1).astype(np.float64)
        width = flat.shape[1]
        self.rec.send_columns(
            stream_path(spec.name),
            indexes=[_times(t)],
            columns=rr.Scalars.columns(scalars=flat.ravel()).partition([width] * len(t)),
        )
        self.stats.scalars[spec.name] = self.stats.scalars.get(spec.name, 0) + len(t)
        self.marks.see(spec.name, t, flat)

    def _log_events(self, spec: StreamSpec, t: np.ndarray, labels: np.ndarray) -> None:
        if not len(t):
            return
        self.rec.send_columns(
            event_path(spec.name), indexes=[_times(t)], columns=rr.TextLog.columns(text=[str(x) for x in labels])
        )
        self.stats.events += len(t)

    def log_qc(self, findings: list[QcFinding]) -> None:
        """Each QC outcome as a TextLog at the time it refers to (see robodata.viz.qc)."""
        for f in findings:
            t_ns = finding_time(f, self.marks)
            self.rec.set_time(TIMELINE, duration=np.timedelta64(t_ns, "ns"))
            level = (
                rr.TextLogLevel.INFO if f.passed else (rr.TextLogLevel.ERROR if f.blocking else rr.TextLogLevel.WARN)
            )
            verdict = "pass" if f.passed else ("FAIL" if f.blocking else "warn")
            self.rec.log(
                "qc", rr.TextLog(f"[{f.stage}] {f.check}: {verdict}{': ' + f.reason if f.reason else ''}", level=level)
            )
            self.stats.qc_annotations += 1
        self.rec.reset_time()


def _blobs(data: pa.Array) -> BlobBatch:
    """A binary array as Rerun's blob column (list<uint8>) over the same bytes (Rerun's own
    conversion copies each sample through numpy)."""
    data = data.cast(pa.binary())
    _, offsets, values = data.buffers()
    n = len(data)
    offs = np.frombuffer(offsets, np.int32)[data.offset : data.offset + n + 1]
    flat = pa.Array.from_buffers(pa.uint8(), int(offs[-1]), [None, values])
    return BlobBatch(pa.ListArray.from_arrays(pa.array(offs), flat, type=BlobBatch._ARROW_DATATYPE))


def _array_values(table: Any, spec: StreamSpec) -> np.ndarray:
    """(N, width) values of a verified array part table (its value column is a fixed-size list)."""
    flat = table.column("value").combine_chunks().flatten().to_numpy(zero_copy_only=False)
    return flat.reshape(table.num_rows, -1)


def _clip(s: Samples, lo: int, hi: int) -> Samples:
    """The samples in [lo, hi] ns, from the keyframe at or before lo on (so the first decodes)."""
    inside = (s.t_ns >= lo) & (s.t_ns <= hi)
    if inside.all():
        return s
    idx = np.nonzero(inside)[0]
    if not len(idx):
        return Samples(s.t_ns[:0], s.pts[:0], s.key[:0], s.data.slice(0, 0))
    keys = np.nonzero(s.key[: idx[0] + 1])[0]
    start = int(keys[-1]) if len(keys) else 0
    end = int(idx[-1]) + 1
    return Samples(s.t_ns[start:end], s.pts[start:end], s.key[start:end], s.data.slice(start, end - start))


def log_episode(
    reader: EpisodeReader,
    rec: rr.RecordingStream,
    *,
    t0: float = 0.0,
    t1: float = float("inf"),
    streams: list[str] | None = None,
    qc: list[QcFinding] | None = None,
    progress: Callable[[int], None] | None = None,
) -> ViewStats:
    """Log an episode's streams in [t0, t1] s to `rec`, one chunk at a time.

    Args:
        reader: the open container.
        rec: the Rerun recording (saving, spawned or connected).
        t0, t1: the window in seconds since the episode's start (default: all of it).
        streams: the streams to log (default: all).
        qc: QC outcomes to annotate (robodata.viz.qc.read_qc), or None.
        progress: called with 1 after each chunk.

    Returns:
        ViewStats: frames per camera, rows per array stream, events, re-encoded frames, notes.

    Raises:
        ContainerError: any byte read is corrupt or does not hold what its index entry says.
    """
    log = EpisodeLogger(reader, rec, streams)
    log.log_static()
    lo, hi = reader._ns(t0), reader._ns(t1)
    for slab in log.slabs(t0, t1):
        log.log_chunks(slab, lo, hi)
        if progress is not None:
            progress(len(slab))
    log.flush_arrays()
    if qc:
        log.log_qc(qc)
    return log.stats
