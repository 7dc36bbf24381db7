"""Part payloads rewritten with recomputed CRCs, and zstd bombs (bench.robustness_container).

`rebuild` re-lays a container after some parts changed: offsets, lengths, CRCs, chunk spans
and duration_s all recomputed, so only the checks on the payload itself can catch the change.
`zstd_bomb` is an array part of `rows` zero samples in a few tens of KB (valid zstd frames whose
content sizes match their Arrow length prefixes): what a reader without a decode cap decompresses
into GBs.
"""

from __future__ import annotations

import copy
import json
import random
import struct
from functools import cache
from typing import Any

import numpy as np
import pyarrow as pa
import zstandard

from robodata.codecs.arrays import decode_packets, encode_array, encode_events, encode_packets
from robodata.codecs.ipc import _field, _ref, _u, to_ipc
from robodata.container.format import HEADER, checksum, pack_trailer

BOMB_ROWS = 40_000_000
_EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"


def bitflip(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    return bytes(b)


def with_footer(data: bytes, footer_offset: int, doc: Any) -> bytes:
    """The file with a new footer (CRC and trailer recomputed)."""
    footer = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
    return data[:footer_offset] + footer + pack_trailer(footer_offset, footer)


def rebuild(data: bytes, doc: dict[str, Any], blobs: dict[tuple[int, int], bytes], entries=None) -> bytes:
    """`data` with part (chunk, part) replaced by blobs[(chunk, part)] and its (t_start, t_end,
    count) by entries[(chunk, part)]; everything that depends on them is recomputed."""
    doc = copy.deepcopy(doc)
    entries = entries or {}
    out = bytearray(data[: HEADER.size])
    for ci, c in enumerate(doc["chunks"]):
        old = data[c["off"] : c["off"] + c["len"]]
        body = bytearray()
        for pi, p in enumerate(c["parts"]):
            blob = blobs.get((ci, pi), old[p[1] : p[1] + p[2]])
            p[1], p[2], p[3] = len(body), len(blob), checksum(blob)
            if (ci, pi) in entries:
                p[4], p[5], p[6] = entries[(ci, pi)]
            body += blob
        c["off"], c["len"], c["crc"] = len(out), len(body), checksum(body)
        c["t0"], c["t1"] = min(p[4] for p in c["parts"]), max(p[5] for p in c["parts"])
        out += body
    t0s, t1s = [c["t0"] for c in doc["chunks"]], [c["t1"] for c in doc["chunks"]]
    doc["meta"]["duration_s"] = (max(t1s) - min(t0s)) / 1e9 if t0s else 0.0
    return with_footer(bytes(out), len(out), doc)


def _parts(orig: dict[str, Any]) -> list[tuple[int, int, list[Any]]]:
    return [(ci, pi, p) for ci, c in enumerate(orig["doc"]["chunks"]) for pi, p in enumerate(c["parts"])]


def _blob(orig: dict[str, Any], ci: int, pi: int) -> bytes:
    c = orig["doc"]["chunks"][ci]
    p = c["parts"][pi]
    return orig["data"][c["off"] + p[1] : c["off"] + p[1] + p[2]]


def _batch(blob: bytes) -> tuple[int, int, list[tuple[int, int, int]]]:
    """(metadata start, body start, [(position of the buffer entry, offset, length)]) of the
    first record batch of an IPC stream."""
    pos = 0
    while True:
        meta_len = struct.unpack_from("<i", blob, pos + 4)[0]
        meta = blob[pos + 8 : pos + 8 + meta_len]
        msg = _u("<I", meta, 0)
        rb = _ref(meta, _field(meta, msg, 2))
        at_len, at_kind = _field(meta, msg, 3), _field(meta, msg, 1)
        body_len = 0 if at_len is None else _u("<q", meta, at_len)
        if at_kind is not None and _u("<B", meta, at_kind) == 3 and rb is not None:
            vec = _ref(meta, _field(meta, rb, 2)) or 0
            n = _u("<I", meta, vec)
            bufs = [
                (vec + 4 + 16 * k, _u("<q", meta, vec + 4 + 16 * k), _u("<q", meta, vec + 12 + 16 * k))
                for k in range(n)
            ]
            return pos + 8, pos + 8 + meta_len, bufs
        pos += 8 + meta_len + body_len


def _zeros_frame(n: int) -> bytes:
    cobj = zstandard.ZstdCompressor(level=1).compressobj(size=n)
    zeros = bytes(1 << 20)
    out = [cobj.compress(zeros[: min(len(zeros), n - k)]) for k in range(0, n, len(zeros))]
    return b"".join(out) + cobj.flush()


def _bomb_layout(schema: pa.Schema, rows: int, fat: int) -> tuple[list[int | bytes], list[int]]:
    """(buffers: a size of zeros or explicit bytes, field-node lengths) of `rows` all-zero rows of
    `schema`: no nulls (every validity buffer empty), strings and binaries empty (offsets all 0),
    except that with `fat` each binary value is `fat` zero bytes."""
    buffers: list[int | bytes] = []
    nodes: list[int] = []
    for field in schema:
        t, n = field.type, rows
        nodes.append(n)
        buffers.append(0)  # validity
        if pa.types.is_fixed_size_list(t):
            n, t = n * t.list_size, t.value_type
            nodes.append(n)
            buffers.append(0)
        if pa.types.is_binary(t) and fat:
            buffers += [(np.arange(n + 1, dtype=np.int64) * fat).astype(np.int32).tobytes(), n * fat]
        elif pa.types.is_string(t) or pa.types.is_binary(t):
            buffers += [(n + 1) * 4, 0]
        elif pa.types.is_boolean(t):
            buffers.append((n + 7) // 8)
        else:
            buffers.append(n * t.bit_width // 8)
    return buffers, nodes


@cache
def ipc_bomb(template: bytes, rows: int, fat: int = 0) -> bytes:
    """The IPC stream `template` (one zstd-compressed record batch) holding `rows` all-zero rows
    instead (binary values of `fat` zero bytes each): valid zstd frames whose content sizes match
    their length prefixes, a few tens of KB per GB declared."""
    reader = pa.ipc.MessageReader.open_stream(pa.py_buffer(template))
    schema_msg = reader.read_next_message()
    schema = pa.ipc.read_schema(schema_msg)
    framed = bytearray(reader.read_next_message().serialize().to_pybytes())
    meta_start, _, bufs = _batch(bytes(framed))
    meta = bytes(framed[meta_start:])
    buffers, lengths = _bomb_layout(schema, rows, fat)
    assert len(bufs) == len(buffers), (bufs, buffers)
    body = bytearray()
    for (entry, _, _), b in zip(bufs, buffers, strict=True):
        if isinstance(b, bytes):
            piece = struct.pack("<q", len(b)) + zstandard.ZstdCompressor().compress(b)
        else:
            piece = struct.pack("<q", b) + _zeros_frame(b) if b else b""
        struct.pack_into("<qq", framed, meta_start + entry, len(body), len(piece))
        body += piece + bytes(-len(piece) % 8)
    msg = _u("<I", meta, 0)
    rb = _ref(meta, _field(meta, msg, 2))
    assert rb is not None
    struct.pack_into("<q", framed, meta_start + (_field(meta, msg, 3) or 0), len(body))
    struct.pack_into("<q", framed, meta_start + (_field(meta, rb, 0) or 0), rows)
    nodes = _ref(meta, _field(meta, rb, 1)) or 0
    assert _u("<I", meta, nodes) == len(lengths)
    for k, n in enumerate(lengths):
        struct.pack_into("<qq", framed, meta_start + nodes + 4 + 16 * k, n, 0)
    meta_len = struct.unpack_from("<i", framed, 4)[0]
    return schema_msg.serialize().to_pybytes() + bytes(framed[: 8 + meta_len]) + bytes(body) + _EOS


def zstd_bomb(rows: int, width: int, stream: str) -> bytes:
    """An array part (t_ns int64, value float32[width]) of `rows` zero samples, all at t = 0."""
    return ipc_bomb(encode_array(np.zeros(1, np.int64), np.zeros((1, width), np.float32), stream), rows)


def events_bomb(rows: int, stream: str) -> bytes:
    """An events part of `rows` empty events, all at t = 0."""
    return ipc_bomb(encode_events(np.zeros(1, np.int64), ["x"], stream=stream), rows)


def packets_bomb(rows: int, stream: str, fat: int = 0) -> bytes:
    """A video part of `rows` packets of `fat` zero bytes each, zstd-compressed (which the writer
    never does: packets are compressed video)."""
    table = decode_packets(encode_packets([0], [0], [True], [0], [b"x"], [True], stream))
    return ipc_bomb(to_ipc(table, compress=True), rows, fat)


def lying_prefix(blob: bytes) -> bytes:
    """`blob` with its first compressed buffer's length prefix set to 1 TiB."""
    _, body, bufs = _batch(blob)
    out = bytearray(blob)
    _, off, n = next(b for b in bufs if b[2] >= 8)
    struct.pack_into("<q", out, body + off, 1 << 40)
    return bytes(out)


def tamper_payload(orig: dict[str, Any], rng: random.Random) -> bytes:
    parts = _parts(orig)
    ci, pi, p = rng.choice(parts)
    blob = _blob(orig, ci, pi)
    how = rng.choice(["flip", "flip_head", "swap", "swap_entry", "bomb", "prefix"])
    if how == "flip":
        return rebuild(orig["data"], orig["doc"], {(ci, pi): bitflip(blob, rng)})
    if how == "flip_head":  # the schema and record batch headers (flatbuffers)
        head = bitflip(blob[: min(len(blob), 400)], rng)
        return rebuild(orig["data"], orig["doc"], {(ci, pi): head + blob[len(head) :]})
    cj, pj, q = rng.choice(parts)
    if how in ("swap", "swap_entry"):
        entries = {(ci, pi): tuple(q[4:7])} if how == "swap_entry" else None
        return rebuild(orig["data"], orig["doc"], {(ci, pi): _blob(orig, cj, pj)}, entries)
    ci, pi, p = next(x for x in parts if x[2][0] == "joint_pos")  # the stream's first part
    if how == "bomb":
        bomb = zstd_bomb(BOMB_ROWS, 7, "joint_pos")
        return rebuild(orig["data"], orig["doc"], {(ci, pi): bomb}, {(ci, pi): (p[4], p[4], BOMB_ROWS)})
    return rebuild(orig["data"], orig["doc"], {(ci, pi): lying_prefix(_blob(orig, ci, pi))})
