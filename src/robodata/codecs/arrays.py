"""Low-dimensional streams as Arrow IPC (zstd) tables: one table per stream per chunk."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

_ZSTD = pa.ipc.IpcWriteOptions(compression="zstd")
_PLAIN = pa.ipc.IpcWriteOptions()


def _to_ipc(table: pa.Table, compress: bool = True) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=_ZSTD if compress else _PLAIN) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def _from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def encode_array(t_ns: np.ndarray, values: np.ndarray) -> bytes:
    """values: (N, *shape) numeric. Stored flat with the per-sample shape in the schema."""
    n = len(t_ns)
    flat = np.ascontiguousarray(values).reshape(n, -1)
    width = flat.shape[1]
    col = pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1)), width)
    return _to_ipc(pa.table({"t_ns": pa.array(t_ns, pa.int64()), "value": col}))


def decode_array(data: bytes, shape: tuple[int, ...], dtype: str) -> tuple[np.ndarray, np.ndarray]:
    table = _from_ipc(data)
    t = table.column("t_ns").to_numpy()
    col = table.column("value").combine_chunks()
    flat = col.flatten().to_numpy(zero_copy_only=False)
    return t, flat.astype(dtype, copy=False).reshape((len(t), *shape))


def encode_events(t_ns: np.ndarray, labels: list[str], payloads: list[dict] | None = None) -> bytes:
    payload_json = [json.dumps(p, sort_keys=True) for p in (payloads or [{}] * len(labels))]
    return _to_ipc(
        pa.table(
            {
                "t_ns": pa.array(t_ns, pa.int64()),
                "label": pa.array(labels, pa.string()),
                "payload": pa.array(payload_json, pa.string()),
            }
        )
    )


def decode_events(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    table = _from_ipc(data)
    return table.column("t_ns").to_numpy(), np.array(table.column("label").to_pylist(), dtype=object)


def encode_packets(
    pts: list[int], dts: list[int], key: list[bool], t_ns: list[int], data: list[bytes], ref: list[bool]
) -> bytes:
    """A video part: one camera's packets for whole GOPs, in decode order."""
    return _to_ipc(
        pa.table(
            {
                "pts": pa.array(pts, pa.int64()),
                "dts": pa.array(dts, pa.int64()),
                "key": pa.array(key, pa.bool_()),
                "ref": pa.array(ref, pa.bool_()),
                "t_ns": pa.array(t_ns, pa.int64()),
                "data": pa.array(data, pa.binary()),
            }
        ),
        compress=False,
    )  # payloads are already compressed video


def decode_packets(data: bytes) -> pa.Table:
    return _from_ipc(data)
