"""The footer's structure, checked once per open (O(footer)) before any chunk is read.

A footer whose CRC is valid can still be inconsistent (written by another tool, edited, or
damaged before the CRC was taken). Everything the reader later relies on is checked here, so
that a read either returns exactly what was written or raises `ContainerError`:

- types and ranges of every field (ints are ints, int64 times, u32 CRCs, finite rates);
- chunks tile the data region [header, footer) in index order, without gaps or overlaps, and
  each chunk's parts tile the chunk; no stream twice in a chunk; every part's stream is declared
  and belongs to its chunk's group;
- each chunk's time span is exactly the span of its parts, each stream's parts follow each
  other in time without overlap, and `duration_s` is the span of all samples;
- declared shapes and row counts are bounded by the file and by `ReaderConfig`.
"""

from __future__ import annotations

import base64
import binascii
import math
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np

from robodata.container.format import HEADER, ChunkInfo, PartInfo
from robodata.container.limits import MAX_FRAME_SIDE, ReaderConfig
from robodata.container.meta import STREAM_KINDS, EpisodeMeta, Layout, StreamSpec, TopicGroup, VideoSettings
from robodata.errors import ConfigError, ContainerError
from robodata.names import is_safe_name

I64 = (-(1 << 63), (1 << 63) - 1)
U32 = (0, (1 << 32) - 1)
_META_KEYS = {"episode_id", "robot", "site", "task", "start_time_ns", "streams"}
_META_OPT = {"vendor", "duration_s", "extra"}
_STREAM_OPT = {"rate_hz", "shape", "dtype", "units", "names"}
_GROUP_OPT = {"chunk_span_s", "video"}
_VIDEO_KEYS = {"codec", "gop", "crf", "preset", "bframes", "threads", "entropy", "deblock"}
_VIDEO_STRS = ("codec", "preset", "entropy")
_VIDEO_BOOLS = ("deblock",)
_CHUNK_KEYS = ("i", "group", "t0", "t1", "off", "len", "crc", "parts")


@dataclass(frozen=True)
class Footer:
    meta: EpisodeMeta
    layout: Layout
    layout_version: str
    extradata: dict[str, bytes]
    chunks: list[ChunkInfo]


class _Checker:
    def __init__(self, path: str, config: ReaderConfig):
        self.path = path
        self.episode = path  # until the footer names it
        self.config = config

    def fail(self, field: str, why: str, chunk: int | None = None) -> NoReturn:
        raise ContainerError(self.episode, f"footer {field}: {why}", chunk, path=self.path)

    def int_(self, v: Any, field: str, lo: int, hi: int, chunk: int | None = None) -> int:
        if not isinstance(v, int) or isinstance(v, bool):
            self.fail(field, f"must be an integer, got {_show(v)}", chunk)
        if not lo <= v <= hi:
            self.fail(field, f"{v} is outside [{lo}, {hi}]", chunk)
        return v

    def num(self, v: Any, field: str, lo: float) -> float:
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < lo:
            self.fail(field, f"must be a finite number >= {lo}, got {_show(v)}")
        return float(v)

    def str_(self, v: Any, field: str, nonempty: bool = False) -> str:
        if not isinstance(v, str) or (nonempty and not v):
            self.fail(field, f"must be a {'non-empty ' if nonempty else ''}string, got {_show(v)}")
        return v

    def obj(self, v: Any, field: str, required: set[str], optional: set[str] | None = None) -> dict[str, Any]:
        """A dict with every required key; unknown keys are refused unless `optional` is None."""
        if not isinstance(v, dict):
            self.fail(field, f"must be an object, got {_show(v)}")
        missing = sorted(required - set(v))
        if missing:
            self.fail(field, f"misses {missing}")
        if optional is not None and set(v) - required - optional:
            self.fail(field, f"has unknown keys {sorted(set(v) - required - optional)}")
        return v

    def list_(self, v: Any, field: str) -> list[Any]:
        if not isinstance(v, list):
            self.fail(field, f"must be a list, got {_show(v)}")
        return v


def parse_footer(path: str, doc: Any, footer_offset: int, config: ReaderConfig) -> Footer:
    """Typed, cross-checked contents of a decoded footer document.

    Raises:
        ContainerError: any field is missing, of the wrong type, out of range, or inconsistent
            with the rest of the footer or with where the footer lies in the file.
    """
    ck = _Checker(path, config)
    doc = ck.obj(doc, "document", {"meta", "layout", "chunks"})
    meta = _meta(ck, doc["meta"])
    ck.episode = meta.episode_id
    layout, version = _layout(ck, doc["layout"], meta)
    extradata = _codec_data(ck, doc.get("codec_data", {}), meta)
    chunks = _chunks(ck, ck.list_(doc["chunks"], "chunks"), meta, layout, footer_offset)
    span = (max(c.t_end for c in chunks) - min(c.t_start for c in chunks)) / 1e9 if chunks else 0.0
    if meta.duration_s != span:
        ck.fail("meta.duration_s", f"{meta.duration_s} is not the span of the samples ({span} s)")
    return Footer(meta, layout, version, extradata, chunks)


def _meta(ck: _Checker, raw: Any) -> EpisodeMeta:
    d = ck.obj(raw, "meta", _META_KEYS, _META_OPT)
    for k in ("robot", "site", "task", "vendor"):
        if k in d:
            ck.str_(d[k], f"meta.{k}")
    ck.str_(d["episode_id"], "meta.episode_id", nonempty=True)
    ck.int_(d["start_time_ns"], "meta.start_time_ns", *I64)
    ck.num(d.get("duration_s", 0.0), "meta.duration_s", 0.0)
    if not isinstance(d.get("extra", {}), dict):
        ck.fail("meta.extra", f"must be an object, got {_show(d['extra'])}")
    streams_raw = d["streams"]
    if not isinstance(streams_raw, dict):
        ck.fail("meta.streams", f"must be an object, got {_show(streams_raw)}")
    streams = {name: _stream(ck, name, s) for name, s in streams_raw.items()}
    try:
        return EpisodeMeta(**{**d, "streams": streams, "duration_s": float(d.get("duration_s", 0.0))})
    except ConfigError as exc:
        ck.fail("meta", str(exc))


def _stream(ck: _Checker, name: str, raw: Any) -> StreamSpec:
    f = f"meta.streams[{name!r}]"
    if not is_safe_name(name):
        ck.fail(f, "stream names are letters, digits, '.', '_' and '-' (at most 128)")
    d = ck.obj(raw, f, {"name", "kind"}, _STREAM_OPT)
    if d["name"] != name:
        ck.fail(f"{f}.name", f"{_show(d['name'])} differs from its key")
    if d["kind"] not in STREAM_KINDS:
        ck.fail(f"{f}.kind", f"must be one of {STREAM_KINDS}, got {_show(d['kind'])}")
    ck.num(d.get("rate_hz", 0.0), f"{f}.rate_hz", 0.0)
    side = MAX_FRAME_SIDE if d["kind"] == "video" else I64[1]
    shape = tuple(ck.int_(x, f"{f}.shape", 1, side) for x in ck.list_(d.get("shape", []), f"{f}.shape"))
    dtype = ck.str_(d.get("dtype", "float32"), f"{f}.dtype")
    ck.str_(d.get("units", ""), f"{f}.units")
    names = tuple(ck.str_(x, f"{f}.names") for x in ck.list_(d.get("names", []), f"{f}.names"))
    if len(shape) > 8:
        ck.fail(f"{f}.shape", f"has {len(shape)} dimensions (at most 8)")
    if d["kind"] == "array":
        try:
            numeric = np.dtype(dtype).kind in "biuf"
        except (TypeError, ValueError):
            numeric = False
        if not numeric:
            ck.fail(f"{f}.dtype", f"{dtype!r} is not a numeric dtype")
        if math.prod(shape) * np.dtype(dtype).itemsize > ck.config.max_decode_bytes:
            ck.fail(f"{f}.shape", f"one sample of {shape} {dtype} is over ReaderConfig.max_decode_bytes")
    if d["kind"] == "video" and math.prod(shape) > ck.config.max_frame_bytes:
        ck.fail(f"{f}.shape", f"one frame of {shape} is over ReaderConfig.max_frame_bytes")
    try:
        return StreamSpec(**{**d, "shape": shape, "names": names, "rate_hz": float(d.get("rate_hz", 0.0))})
    except ConfigError as exc:
        ck.fail(f, str(exc))


def _layout(ck: _Checker, raw: Any, meta: EpisodeMeta) -> tuple[Layout, str]:
    d = ck.obj(raw, "layout", {"version", "groups"})
    version = ck.str_(d["version"], "layout.version", nonempty=True)
    groups = []
    for k, g in enumerate(ck.list_(d["groups"], "layout.groups")):
        f = f"layout.groups[{k}]"
        g = ck.obj(g, f, {"name", "streams"}, _GROUP_OPT)
        streams = tuple(ck.str_(s, f"{f}.streams", nonempty=True) for s in ck.list_(g["streams"], f"{f}.streams"))
        span = ck.num(g.get("chunk_span_s", 2.0), f"{f}.chunk_span_s", 0.0)
        video = None
        if g.get("video") is not None:
            v = ck.obj(g["video"], f"{f}.video", {"codec"}, _VIDEO_KEYS - {"codec"})
            for key, val in v.items():
                if key in _VIDEO_BOOLS:
                    if not isinstance(val, bool):
                        ck.fail(f"{f}.video.{key}", f"has the wrong type: {_show(val)}")
                elif not isinstance(val, str if key in _VIDEO_STRS else int) or isinstance(val, bool):
                    ck.fail(f"{f}.video.{key}", f"has the wrong type: {_show(val)}")
            try:
                video = VideoSettings(**v)
            except ConfigError as exc:
                ck.fail(f"{f}.video", str(exc))
        try:
            groups.append(TopicGroup(ck.str_(g["name"], f"{f}.name", nonempty=True), streams, span, video))
        except ConfigError as exc:
            ck.fail(f, str(exc))
    try:
        layout = Layout(groups=tuple(groups))
    except ConfigError as exc:
        ck.fail("layout", str(exc))
    owner = {s: g for g in layout.groups for s in g.streams}
    for name, spec in meta.streams.items():
        if name not in owner:
            ck.fail("layout", f"stream {name!r} is in no topic group")
        if (spec.kind == "video") != (owner[name].video is not None):
            ck.fail("layout", f"stream {name!r} ({spec.kind}) is in group {owner[name].name!r}, which does not fit")
    return layout, version


def _codec_data(ck: _Checker, raw: Any, meta: EpisodeMeta) -> dict[str, bytes]:
    if not isinstance(raw, dict):
        ck.fail("codec_data", f"must be an object, got {_show(raw)}")
    out = {}
    for name, v in raw.items():
        if name not in meta.streams or meta.streams[name].kind != "video":
            ck.fail("codec_data", f"{_show(name)} is not a video stream of this episode")
        try:
            out[name] = base64.b64decode(ck.str_(v, f"codec_data[{name!r}]"), validate=True)
        except (binascii.Error, ValueError) as exc:  # ValueError: non-ASCII text
            ck.fail(f"codec_data[{name!r}]", f"is not base64 ({exc})")
    return out


def _chunks(ck: _Checker, raw: list[Any], meta: EpisodeMeta, layout: Layout, footer_offset: int) -> list[ChunkInfo]:
    groups = {g.name: g for g in layout.groups}
    kinds = {name: spec.kind for name, spec in meta.streams.items()}
    max_rows = ck.config.max_decode_bytes // 8  # every sample decodes at least its int64 timestamp
    expected_off = HEADER.size
    last_end: dict[str, int] = {}
    out = []
    for k, c in enumerate(raw):
        # Fast path: one boolean test per entry; the checks that name the field run only on failure.
        keys_ok = type(c) is dict and all(key in c for key in _CHUNK_KEYS)
        vals: tuple[Any, ...] = tuple(c[key] for key in _CHUNK_KEYS[:7]) if keys_ok else (None,) * 7
        i, group, t0, t1, off, length, crc = vals
        g = groups.get(group) if type(group) is str else None
        if not (
            keys_ok
            and g is not None
            and type(i) is int
            and i == k
            and type(t0) is int
            and type(t1) is int
            and I64[0] <= t0 <= t1 <= I64[1]
            and type(off) is int
            and off == expected_off
            and type(length) is int
            and 1 <= length <= footer_offset - off
            and type(crc) is int
            and 0 <= crc <= U32[1]
        ):
            _chunk_fail(ck, k, c, groups, expected_off, footer_offset)
        assert g is not None
        expected_off = off + length
        parts = c["parts"]
        if type(parts) is not list or not parts:
            ck.fail(f"chunks[{k}].parts", f"must be a non-empty list, got {_show(parts)}", k)
        infos: list[PartInfo] = []
        seen: set[str] = set()
        rel = 0
        for j, p in enumerate(parts):
            ok = type(p) is list and len(p) == 7
            fields: list[Any] = p if ok else [None] * 7
            stream, p_off, p_len, p_crc, ts, te, count = fields
            ok = (
                ok
                and type(stream) is str
                and stream in g.streams
                and stream in kinds
                and stream not in seen
                and type(p_off) is int
                and p_off == rel
                and type(p_len) is int
                and 1 <= p_len <= length - rel
                and type(p_crc) is int
                and 0 <= p_crc <= U32[1]
                and type(ts) is int
                and type(te) is int
                and t0 <= ts <= te <= t1
                and type(count) is int
                and 1 <= count <= (min(max_rows, p_len) if kinds[stream] == "video" else max_rows)
                and (stream not in last_end or ts > last_end[stream])
            )
            if not ok:
                _part_fail(ck, k, j, p, g, kinds, seen, rel, length, t0, t1, max_rows, last_end)
            seen.add(stream)
            last_end[stream] = te
            infos.append(PartInfo(stream, p_off, p_len, p_crc, ts, te, count))
            rel += p_len
        if rel != length:
            ck.fail(f"chunks[{k}]", f"parts cover {rel} of its {length} bytes", k)
        if (t0, t1) != (min(p.t_start for p in infos), max(p.t_end for p in infos)):
            ck.fail(f"chunks[{k}]", f"time span [{t0}, {t1}] is not the span of its parts", k)
        out.append(ChunkInfo(i, group, t0, t1, off, length, crc, tuple(infos)))
    if expected_off != footer_offset:
        ck.fail("chunks", f"cover bytes {HEADER.size}..{expected_off}, the data region ends at {footer_offset}")
    return out


def _chunk_fail(
    ck: _Checker, k: int, c: Any, groups: dict[str, TopicGroup], expected_off: int, footer_offset: int
) -> NoReturn:
    """Raises the ContainerError naming the first bad field of chunk entry k."""
    d = ck.obj(c, f"chunks[{k}]", set(_CHUNK_KEYS))
    ck.int_(d["i"], f"chunks[{k}].i", k, k, k)
    if not isinstance(d["group"], str) or d["group"] not in groups:
        ck.fail(f"chunks[{k}].group", f"{_show(d['group'])} is not a topic group of the layout", k)
    ck.int_(d["t0"], f"chunks[{k}].t0", *I64, k)
    ck.int_(d["t1"], f"chunks[{k}].t1", d["t0"], I64[1], k)
    ck.int_(d["off"], f"chunks[{k}].off", expected_off, expected_off, k)
    ck.int_(d["len"], f"chunks[{k}].len", 1, footer_offset - d["off"], k)
    ck.int_(d["crc"], f"chunks[{k}].crc", *U32, k)
    ck.fail(f"chunks[{k}]", "is inconsistent", k)  # not reached: one of the checks above fails


def _part_fail(
    ck: _Checker,
    k: int,
    j: int,
    p: Any,
    g: TopicGroup,
    kinds: dict[str, str],
    seen: set[str],
    rel: int,
    length: int,
    t0: int,
    t1: int,
    max_rows: int,
    last_end: dict[str, int],
) -> NoReturn:
    """Raises the ContainerError naming the first bad field of part j of chunk k."""
    f = f"chunks[{k}].parts[{j}]"
    if not isinstance(p, list) or len(p) != 7:
        ck.fail(f, f"must be a list of 7 fields, got {_show(p)}", k)
    stream, p_off, p_len, p_crc, ts, te, count = p
    if not isinstance(stream, str) or stream not in g.streams or stream not in kinds:
        ck.fail(f, f"stream {_show(stream)} is not a declared stream of group {g.name!r}", k)
    if stream in seen:
        ck.fail(f, f"stream {stream!r} appears twice in the chunk", k)
    ck.int_(p_off, f"{f} offset", rel, rel, k)
    ck.int_(p_len, f"{f} length", 1, length - rel, k)
    ck.int_(p_crc, f"{f} crc", *U32, k)
    ck.int_(ts, f"{f} t_start", t0, t1, k)
    ck.int_(te, f"{f} t_end", ts, t1, k)
    ck.int_(count, f"{f} count", 1, min(max_rows, p_len) if kinds[stream] == "video" else max_rows, k)
    if stream in last_end and ts <= last_end[stream]:
        ck.fail(f, f"stream {stream!r} goes back in time ({ts} after {last_end[stream]})", k)
    ck.fail(f, "is inconsistent", k)  # not reached


def _show(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."
