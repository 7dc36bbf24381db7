"""TFRecord files and tf.train.Example without TensorFlow: CRC-framed records (google-crc32c)
and the Example protobuf from a descriptor compiled here (protobuf's own runtime).

A record: uint64 length, uint32 masked CRC32C of the length, the data, uint32 masked CRC32C
of the data (little-endian). TFDS writes one serialized Example per RLDS episode, its steps
flattened into `steps/<key>` features holding every step's values back to back.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import numpy as np

from robodata.ingest.raw import RawEpisodeError

_MASK_DELTA = 0xA282EAD8


def masked_crc(data: bytes) -> int:
    import google_crc32c

    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame(data: bytes) -> bytes:
    head = struct.pack("<Q", len(data))
    return head + struct.pack("<I", masked_crc(head)) + data + struct.pack("<I", masked_crc(data))


def record_offsets(f) -> list[int]:
    """Byte offsets of every record of an open shard (headers read, data skipped); a truncated
    or corrupt record's offset is listed too (reading it raises RawEpisodeError with the reason)."""
    out: list[int] = []
    f.seek(0, 2)
    size = f.tell()
    pos = 0
    while pos < size:
        f.seek(pos)
        head = f.read(12)
        out.append(pos)
        (n,) = struct.unpack("<Q", head[:8]) if len(head) == 12 else (size,)
        if len(head) < 12 or struct.unpack("<I", head[8:])[0] != masked_crc(head[:8]) or pos + 16 + n > size:
            break  # the rest is one bad record
        pos += 16 + n
    return out


def read_record(path: Path, offset: int) -> bytes:
    """The record at `offset`; its length field is checked against the bytes the shard holds after
    it before anything is read (a length of 2**40 is a lie, never an allocation)."""
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        f.seek(offset)
        head = f.read(12)
        if len(head) < 12:
            raise RawEpisodeError(f"{path}: truncated TFRecord shard: {len(head)} header bytes at offset {offset}")
        (n,) = struct.unpack("<Q", head[:8])
        if struct.unpack("<I", head[8:])[0] != masked_crc(head[:8]):
            raise RawEpisodeError(f"{path}: bad length CRC at offset {offset}")
        if n > size - offset - 16:
            raise RawEpisodeError(
                f"{path}: record at offset {offset}: length field declares {n} bytes, the shard holds "
                f"{max(0, size - offset - 16)} after its header (truncated, or not a TFRecord length)"
            )
        data = f.read(n)
        crc = f.read(4)
        if len(data) < n or len(crc) < 4:
            raise RawEpisodeError(f"{path}: truncated TFRecord shard: record at offset {offset} is cut short")
        if struct.unpack("<I", crc)[0] != masked_crc(data):
            raise RawEpisodeError(f"{path}: bad data CRC in the record at offset {offset}")
        return data


@lru_cache(maxsize=1)
def example_class():
    """tensorflow.Example (Features / Feature / BytesList / FloatList / Int64List), same wire format."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="robodata/tf_example.proto", package="robodata.tf", syntax="proto3")

    def msg(name: str, *fields: tuple[str, int, int, int, str]):
        m = fdp.message_type.add(name=name)
        for fname, num, typ, label, tname in fields:
            f = m.field.add(name=fname, number=num, type=typ, label=label)
            if tname:
                f.type_name = tname
        return m

    rep, opt = F.LABEL_REPEATED, F.LABEL_OPTIONAL
    msg("BytesList", ("value", 1, F.TYPE_BYTES, rep, ""))
    msg("FloatList", ("value", 1, F.TYPE_FLOAT, rep, ""))
    msg("Int64List", ("value", 1, F.TYPE_INT64, rep, ""))
    feat = msg(
        "Feature",
        ("bytes_list", 1, F.TYPE_MESSAGE, opt, ".robodata.tf.BytesList"),
        ("float_list", 2, F.TYPE_MESSAGE, opt, ".robodata.tf.FloatList"),
        ("int64_list", 3, F.TYPE_MESSAGE, opt, ".robodata.tf.Int64List"),
    )
    feat.oneof_decl.add(name="kind")
    for fld in feat.field:
        fld.oneof_index = 0
    # Features.feature is a map<string, Feature> in TensorFlow's proto; read here as the repeated
    # entries it is on the wire (a map keeps the last of two entries of one key: a record holding
    # `steps/is_last` twice would pass as the second; parse_example refuses it)
    feats = msg("Features", ("feature", 1, F.TYPE_MESSAGE, rep, ".robodata.tf.Features.FeatureEntry"))
    entry = feats.nested_type.add(name="FeatureEntry")
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=opt)
    entry.field.add(name="value", number=2, type=F.TYPE_MESSAGE, label=opt, type_name=".robodata.tf.Feature")
    msg("Example", ("features", 1, F.TYPE_MESSAGE, opt, ".robodata.tf.Features"))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("robodata.tf.Example"))


def parse_example(data: bytes, where: str) -> dict[str, list | np.ndarray]:
    """{key: list of bytes | float32 array | int64 array}; a key given twice is refused."""
    ex = example_class()()
    try:
        ex.ParseFromString(data)
    except Exception as exc:  # google.protobuf.message.DecodeError
        raise RawEpisodeError(f"{where}: not a tf.train.Example ({type(exc).__name__}: {exc})") from None
    out: dict[str, list | np.ndarray] = {}
    for e in ex.features.feature:
        key, feat = e.key, e.value
        if key in out:
            raise RawEpisodeError(
                f"{where}: feature {key!r} appears twice in the record (a tf.train.Example holds each key "
                "once; a reader keeps the last, so the record says two things)"
            )
        kind = feat.WhichOneof("kind")
        if kind == "bytes_list":
            out[key] = list(feat.bytes_list.value)
        elif kind == "float_list":
            out[key] = np.asarray(feat.float_list.value, np.float32)
        elif kind == "int64_list":
            out[key] = np.asarray(feat.int64_list.value, np.int64)
        else:
            out[key] = []
    return out


def make_example(features: dict[str, list | np.ndarray]) -> bytes:
    """Serialize {key: list of bytes | float array | int array} as tf.train.Example (as TFDS writes)."""
    ex = example_class()()
    for key, v in features.items():
        feat = ex.features.feature.add(key=key).value
        if isinstance(v, list) and (not v or isinstance(v[0], bytes)):
            feat.bytes_list.value.extend(v)
        elif np.asarray(v).dtype.kind == "f":
            feat.float_list.value.extend(np.asarray(v, np.float32).reshape(-1).tolist())
        else:
            feat.int64_list.value.extend(np.asarray(v, np.int64).reshape(-1).tolist())
    return ex.SerializeToString()


def iter_shard(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as f:
        offsets = record_offsets(f)
    for off in offsets:
        yield read_record(path, off)
