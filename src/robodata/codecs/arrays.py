"""Low-dimensional streams as Arrow IPC (zstd) tables: one table per stream per chunk.

Decoders check the stream's schema exactly (column names, types, no nulls) and take what they
allocate from an optional `DecodeBudget` first; anything else is a `CodecError`. Encoders tag the
schema with the part's stream name (and an array's per-sample shape); decoders given a stream
name check the tags when present (parts written before the tags have none), so an index entry
that points a part at another stream, or reshapes it, is caught.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa

from robodata.codecs.ipc import DecodeBudget, read_ipc, to_ipc, to_ipc_view
from robodata.errors import CodecError

PY_OBJECT_BYTES = 64  # what one decoded label costs as a Python object, beyond its characters

_PACKETS = {"pts": pa.int64(), "dts": pa.int64(), "key": pa.bool_(), "t_ns": pa.int64(), "data": pa.binary()}
_EVENTS = {"t_ns": pa.int64(), "label": pa.string(), "payload": pa.string()}
STREAM_TAG = b"robodata.stream"
SHAPE_TAG = b"robodata.shape"


def _tags(stream: str, shape: tuple[int, ...] | None = None) -> dict[bytes, bytes]:
    tags = {STREAM_TAG: stream.encode()} if stream else {}
    if stream and shape is not None:
        tags[SHAPE_TAG] = json.dumps(list(shape)).encode()
    return tags


def encode_array(t_ns: np.ndarray, values: np.ndarray, stream: str = "") -> bytes:
    """values: (N, *shape) numeric. Stored flat with the per-sample shape in the schema."""
    n = len(t_ns)
    flat = np.ascontiguousarray(values).reshape(n, -1)
    width = flat.shape[1]
    col = pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1)), width)
    table = pa.table({"t_ns": pa.array(t_ns, pa.int64()), "value": col})
    return to_ipc(table.replace_schema_metadata(_tags(stream, tuple(values.shape[1:]))))


def array_decoded_bytes(rows: int, shape: tuple[int, ...], dtype: str) -> int:
    """Bytes decode_array allocates for `rows` samples (timestamps + values)."""
    return rows * (8 + math.prod(shape) * np.dtype(dtype).itemsize)


def decode_array(
    data: bytes,
    shape: tuple[int, ...],
    dtype: str,
    budget: DecodeBudget | None = None,
    stream: str | None = None,
    rows: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(t_ns (N,), values (N, *shape)) of one array part.

    Raises:
        CodecError: the part is not an array table of `dtype` values, `prod(shape)` per sample
            (of `rows` rows, when given: checked before anything is decompressed).
        DecodeLimitError: decoding would take more than `budget` has left.
    """
    table, flat = _array_table(data, shape, dtype, budget, stream, rows)
    t = table.column("t_ns").to_numpy()
    values = flat.to_numpy(zero_copy_only=False)
    return t, values.astype(dtype, copy=False).reshape((len(t), *shape))


def array_table(
    data: bytes,
    shape: tuple[int, ...],
    dtype: str,
    budget: DecodeBudget | None = None,
    stream: str | None = None,
    rows: int | None = None,
) -> pa.Table:
    """An array part's table (t_ns int64, value fixed-size list of `dtype`), checked as decode_array checks it."""
    return _array_table(data, shape, dtype, budget, stream, rows)[0]


def _array_table(
    data: bytes, shape: tuple[int, ...], dtype: str, budget: DecodeBudget | None, stream: str | None, rows: int | None
) -> tuple[pa.Table, pa.Array]:
    table = read_ipc(data, budget, "array part", rows)
    value_type = pa.list_(pa.from_numpy_dtype(np.dtype(dtype)), math.prod(shape))
    _check_schema(table, {"t_ns": pa.int64(), "value": value_type}, stream, shape)
    flat = table.column("value").combine_chunks().flatten()
    if flat.null_count:
        raise CodecError("array part holds null values")
    return table, flat


def encode_events(t_ns: np.ndarray, labels: list[str], payloads: list[dict] | None = None, stream: str = "") -> bytes:
    payload_json = [json.dumps(p, sort_keys=True) for p in (payloads or [{}] * len(labels))]
    table = pa.table(
        {
            "t_ns": pa.array(t_ns, pa.int64()),
            "label": pa.array(labels, pa.string()),
            "payload": pa.array(payload_json, pa.string()),
        }
    )
    return to_ipc(table.replace_schema_metadata(_tags(stream)))


def events_table(
    data: bytes, budget: DecodeBudget | None = None, stream: str | None = None, rows: int | None = None
) -> pa.Table:
    """An events part's table (t_ns int64, label string, payload string; no nulls).

    Raises:
        CodecError: the part is not an events table.
        DecodeLimitError: decoding would take more than `budget` has left.
    """
    table = read_ipc(data, budget, "events part", rows)
    _check_schema(table, _EVENTS, stream)
    return table


def decode_events(data: bytes, budget: DecodeBudget | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(t_ns (N,), labels (N,) object) of one events part."""
    table = events_table(data, budget)
    if budget is not None:
        budget.take(table.num_rows * PY_OBJECT_BYTES, "events labels")
    return table.column("t_ns").to_numpy(), np.array(table.column("label").to_pylist(), dtype=object)


def encode_packets(
    pts: list[int],
    dts: list[int],
    key: list[bool],
    t_ns: list[int],
    data: list[bytes],
    ref: list[bool],
    stream: str = "",
) -> bytes:
    """A video part: one camera's packets for whole GOPs, in decode order."""
    return bytes(packets_view((pts, dts, key, t_ns, data, ref), stream))


PacketColumns = tuple[list[int], list[int], list[bool], list[int], list[bytes], list[bool]]  # as encode_packets'


def packets_view(columns: PacketColumns, stream: str = "") -> memoryview:
    """encode_packets' part as a view of Arrow's buffer (the writer's: no copy of megabytes of packets)."""
    pts, dts, key, t_ns, data, ref = columns
    table = pa.table(
        {
            "pts": pa.array(pts, pa.int64()),
            "dts": pa.array(dts, pa.int64()),
            "key": pa.array(key, pa.bool_()),
            "ref": pa.array(ref, pa.bool_()),
            "t_ns": pa.array(t_ns, pa.int64()),
            "data": pa.array(data, pa.binary()),
        }
    )
    return to_ipc_view(table.replace_schema_metadata(_tags(stream)), compress=False)  # payloads are compressed video


def decode_packets(
    data: bytes, budget: DecodeBudget | None = None, stream: str | None = None, rows: int | None = None
) -> pa.Table:
    """A video part's packet table (columns pts, dts, key, [ref], t_ns, data; no nulls).

    Raises:
        CodecError: the part is not a packet table.
        DecodeLimitError: decoding would take more than `budget` has left.
    """
    table = read_ipc(data, budget, "video part", rows)
    expected = dict(_PACKETS)
    if "ref" in table.column_names:  # containers written before per-packet reference flags lack it
        expected["ref"] = pa.bool_()
    _check_schema(table, expected, stream)
    return table


def _check_schema(
    table: pa.Table, expected: dict[str, pa.DataType], stream: str | None = None, shape: tuple[int, ...] | None = None
) -> None:
    got = {f.name: f.type for f in table.schema}
    if len(table.schema) != len(got) or got != expected:
        want = ", ".join(f"{k}: {v}" for k, v in expected.items())
        have = ", ".join(f"{f.name}: {f.type}" for f in table.schema)
        raise CodecError(f"part columns are ({have}), expected ({want})")
    for name in table.column_names:
        if table.column(name).null_count:
            raise CodecError(f"part column {name!r} holds nulls")
    tags = table.schema.metadata or {}
    if stream is not None and STREAM_TAG in tags and tags[STREAM_TAG] != stream.encode():
        raise CodecError(f"part holds stream {tags[STREAM_TAG].decode(errors='replace')!r}, not {stream!r}")
    want_shape = json.dumps(list(shape)).encode() if shape is not None else None
    if stream is not None and want_shape is not None and tags.get(SHAPE_TAG, want_shape) != want_shape:
        got = tags[SHAPE_TAG].decode(errors="replace")
        raise CodecError(f"part holds samples of shape {got}, not {list(shape or ())}")
