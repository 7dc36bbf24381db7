"""A stable 64-bit string hash, vectorised over Arrow string arrays.

Train/val splits and budget sampling order must never change between library
versions or machines, so this does not use Python's or Polars' hash (both may change).
Definition (reference implementation: `stable_hash64_py`):

    h = FNV-1a-64 over the UTF-8 bytes of salt, then of the string
    result = splitmix64 finaliser of h   (spreads FNV's weak low bits)
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
_M64 = (1 << 64) - 1
_CHUNK = 1 << 16  # rows per block of the fixed-width path (its working set stays in cache)
_THREADS = min(4, os.cpu_count() or 1)
_BATCH = 1 << 20  # rows of a chunked input converted (copied) at a time


def stable_hash64(values: pa.Array | pa.ChunkedArray, salt: str = "") -> np.ndarray:
    """uint64 hash of each string in `values` (nulls hash as the empty string).

    Args:
        values: strings (any Arrow string type, chunked or not).
        salt: prepended to every string (e.g. the spec's split salt).

    Returns:
        A uint64 array, one hash per value; stable across versions and machines.
    """
    h0 = _fnv_bytes(FNV_OFFSET, salt.encode())
    if isinstance(values, pa.ChunkedArray):  # in batches of ~_BATCH rows: one batch copied at a time
        batches: list[pa.Array] = []
        parts: list[np.ndarray] = []
        rows = 0
        for chunk in [*values.chunks, None]:
            if chunk is None or (rows >= _BATCH and batches):
                if batches:
                    parts.append(_hash_array(pa.chunked_array(batches, values.type).combine_chunks(), h0))
                batches, rows = [], 0
            if chunk is not None:
                batches.append(chunk)
                rows += len(chunk)
        return np.concatenate(parts) if parts else np.full(0, h0, dtype=np.uint64)
    return _hash_array(values, h0)


def _hash_array(values: pa.Array, h0: int) -> np.ndarray:
    values = values.cast(pa.large_string())
    n = len(values)
    if n == 0:
        return np.full(0, h0, dtype=np.uint64)
    bufs = values.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64, count=n + 1, offset=values.offset * 8)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    starts = offsets[:-1]
    lengths = offsets[1:] - starts
    if values.null_count:
        lengths = np.where(np.asarray(values.is_valid()), lengths, 0)
    width = int(lengths[0])
    if not values.null_count and width > 0 and int(offsets[-1] - offsets[0]) == n * width and (lengths == width).all():
        mat = data[int(offsets[0]) : int(offsets[0]) + n * width].reshape(n, width)
        return _fixed_width(mat, h0)
    return _variable_width(data, starts, lengths, h0)


def _fnv_bytes(h: int, raw: bytes) -> int:
    for byte in raw:
        h = ((h ^ byte) * FNV_PRIME) & _M64
    return h


def _fixed_width(mat: np.ndarray, h0: int) -> np.ndarray:
    """Strings of one width (e.g. zero-padded ids): leading bytes shared by all are hashed once,
    the rest column by column in cache-sized chunks, on up to `_THREADS` threads (NumPy's loops
    release the GIL)."""
    n, width = mat.shape
    lead = 0
    while lead < width and bool((mat[:, lead] == mat[0, lead]).all()):
        lead += 1
    h0 = _fnv_bytes(h0, mat[0, :lead].tobytes())
    out = np.empty(n, dtype=np.uint64)
    blocks = range(0, n, _CHUNK)
    threads = min(_THREADS, len(blocks))
    if threads > 1:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda a: _fixed_block(mat, out, a, lead, h0), blocks))
    else:
        for a in blocks:
            _fixed_block(mat, out, a, lead, h0)
    return out


def _fixed_block(mat: np.ndarray, out: np.ndarray, a: int, lead: int, h0: int) -> None:
    prime = np.uint64(FNV_PRIME)
    h = out[a : a + _CHUNK]
    h.fill(h0)
    block = mat[a : a + _CHUNK]
    with np.errstate(over="ignore"):
        for j in range(lead, mat.shape[1]):
            np.bitwise_xor(h, block[:, j], out=h, casting="unsafe")
            np.multiply(h, prime, out=h)
    _splitmix_final_inplace(h)


def _variable_width(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, h0: int) -> np.ndarray:
    n = len(starts)
    h = np.full(n, h0, dtype=np.uint64)
    prime = np.uint64(FNV_PRIME)
    max_len = int(lengths.max())
    full = int(lengths.min())
    with np.errstate(over="ignore"):
        for j in range(max_len):
            if j < full:  # every string is at least this long: no mask needed
                h = (h ^ data[starts + j].astype(np.uint64)) * prime
            else:
                sel = np.nonzero(lengths > j)[0]
                h[sel] = (h[sel] ^ data[starts[sel] + j].astype(np.uint64)) * prime
        return _splitmix_final(h)


def unit_interval(hashes: np.ndarray) -> np.ndarray:
    """Map uint64 hashes to floats in [0, 1) (top 53 bits).

    Args:
        hashes: uint64 hashes from `stable_hash64`.

    Returns:
        float64 values in [0, 1).
    """
    return (hashes >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def _splitmix_final(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _splitmix_final_inplace(z: np.ndarray) -> None:
    t = np.empty_like(z)
    for shift, mult in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
        np.right_shift(z, np.uint64(shift), out=t)
        np.bitwise_xor(z, t, out=z)
        np.multiply(z, np.uint64(mult), out=z)
    np.right_shift(z, np.uint64(31), out=t)
    np.bitwise_xor(z, t, out=z)


def stable_hash64_py(value: str, salt: str = "") -> int:
    """Pure-Python reference of `stable_hash64` for one string."""
    h = FNV_OFFSET
    for byte in salt.encode() + value.encode():
        h = ((h ^ byte) * FNV_PRIME) & _M64
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & _M64
    return h ^ (h >> 31)
