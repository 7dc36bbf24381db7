"""A stable 64-bit string hash, over Arrow string arrays and Polars string columns.

Train/val splits and budget sampling order must never change between library
versions or machines, so this does not use Python's or Polars' hash (both may change).
Definition (reference implementation: `stable_hash64_py`):

    h = FNV-1a-64 over the UTF-8 bytes of salt, then of the string
    result = splitmix64 finaliser of h   (spreads FNV's weak low bits)

The strings are read where they lie (robodata.curate.kernels, compiled with Numba): Arrow's
offsets layouts and the string views Polars holds its columns in, on up to `_THREADS` threads.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
_M64 = (1 << 64) - 1
_THREADS = min(4, os.cpu_count() or 1)
_SPLIT = 1 << 18  # rows per thread below which a chunk is hashed on one thread


def stable_hash64(values: pa.Array | pa.ChunkedArray | pl.Series, salt: str = "") -> np.ndarray:
    """uint64 hash of each string in `values` (nulls hash as the empty string).

    Args:
        values: strings: any Arrow string type (chunked or not) or a Polars String column.
        salt: prepended to every string (e.g. the spec's split salt).

    Returns:
        A uint64 array, one hash per value; stable across versions and machines.

    Raises:
        ValueError: an array whose offsets or views point outside its buffers.
    """
    if isinstance(values, pl.Series):  # string views, shared with Polars (no copy)
        values = values.to_arrow(compat_level=pl.CompatLevel.newest())
    h0 = np.uint64(_fnv_bytes(FNV_OFFSET, salt.encode()))
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    out = np.empty(len(values), dtype=np.uint64)
    at = 0
    for chunk in chunks:
        _hash_chunk(chunk, h0, out[at : at + len(chunk)])
        at += len(chunk)
    return out


def _hash_chunk(arr: pa.Array, h0: np.uint64, out: np.ndarray) -> None:
    from robodata.curate import kernels as k  # compiled on first use (importing Numba: ~0.4 s)

    n = len(arr)
    if n == 0:
        return
    if not (pa.types.is_string_view(arr.type) or pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = arr.cast(pa.large_string())
    valid = np.asarray(arr.is_valid(), dtype=np.uint8) if arr.null_count else np.zeros(0, np.uint8)
    bufs = arr.buffers()
    if pa.types.is_string_view(arr.type):
        raw = np.frombuffer(bufs[1], np.uint8, n * 16, arr.offset * 16)
        words, inline = raw.view(np.int32).reshape(n, 4), raw.reshape(n, 16)
        data = [b for b in bufs[2:] if b is not None]
        addresses = np.array([b.address for b in data], dtype=np.uint64)
        sizes = np.array([b.size for b in data], dtype=np.int64)

        def run(a: int, b: int) -> int:
            mask = valid[a:b] if len(valid) else valid
            return int(k.views(words[a:b], inline[a:b], addresses, sizes, mask, h0, out[a:b]))

    else:
        width = np.int64 if pa.types.is_large_string(arr.type) else np.int32
        offs = np.frombuffer(bufs[1], width, n + 1, arr.offset * np.dtype(width).itemsize)
        chars = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)

        def run(a: int, b: int) -> int:
            mask = valid[a:b] if len(valid) else valid
            return int(k.offsets(offs[a : b + 1], chars, mask, h0, out[a:b]))

    bad = _in_parts(run, n)
    if bad >= 0:
        raise ValueError(f"string row {bad} points outside its Arrow buffers")


def hash_offsets(offsets: np.ndarray, data: np.ndarray, positions: np.ndarray, salt: str, where: str) -> np.ndarray:
    """stable_hash64 of the rows at `positions` of strings in Arrow's offsets layout (`offsets`: n + 1
    int64, `data`: their bytes); `where` names them in the error.

    Raises:
        ValueError: a position outside the rows, or offsets outside the bytes.
    """
    from robodata.curate import kernels as k

    out = np.empty(len(positions), dtype=np.uint64)
    h0 = np.uint64(_fnv_bytes(FNV_OFFSET, salt.encode()))
    at = np.ascontiguousarray(positions, dtype=np.int64)
    bad = _in_parts(lambda a, b: k.at_positions(offsets, data, at[a:b], h0, out[a:b]), len(at))
    if bad >= 0:
        raise ValueError(f"{where}: string row {int(at[bad])} is outside its rows or its offsets outside its bytes")
    return out


def _in_parts(run: Any, n: int) -> int:
    """`run(a, b)` over [0, n) in up to `_THREADS` parts (the kernels release the GIL); the first
    bad row or -1."""
    parts = max(1, min(_THREADS, n // _SPLIT))
    edges = [n * p // parts for p in range(parts + 1)]
    if parts == 1:
        return int(run(0, n))
    with ThreadPoolExecutor(parts) as pool:
        found = list(pool.map(run, edges[:-1], edges[1:]))
    bad = [e + r for e, r in zip(edges[:-1], found, strict=True) if r >= 0]
    return min(bad) if bad else -1


def _fnv_bytes(h: int, raw: bytes) -> int:
    for byte in raw:
        h = ((h ^ byte) * FNV_PRIME) & _M64
    return h


def unit_interval(hashes: np.ndarray) -> np.ndarray:
    """Map uint64 hashes to floats in [0, 1) (top 53 bits).

    Args:
        hashes: uint64 hashes from `stable_hash64`.

    Returns:
        float64 values in [0, 1).
    """
    return (hashes >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def stable_hash64_py(value: str, salt: str = "") -> int:
    """Pure-Python reference of `stable_hash64` for one string."""
    h = FNV_OFFSET
    for byte in salt.encode() + value.encode():
        h = ((h ^ byte) * FNV_PRIME) & _M64
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & _M64
    return h ^ (h >> 31)
