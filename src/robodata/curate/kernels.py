"""Compiled per-row kernels of curation (Numba): the stable hash over Arrow string layouts
(robodata.curate.stablehash: FNV-1a-64 + splitmix64) and the budget's pass over its candidates.

Loaded on the first hash (importing Numba takes ~0.4 s); compiled once per machine and cached
(Numba's cache: next to this file, else the user's cache folder, else compiled per process).
Each kernel reads the Arrow buffers in place, checks every string's bounds against its buffer
and returns the first row it could not read (-1 when all were read), so a malformed array is an
error, never a read outside its memory:

* `offsets`: string / large_string (n + 1 offsets into one data buffer).
* `views`: string_view, Polars' own layout (16-byte views: length, then the bytes inline when at
  most 12, else a prefix, a buffer index and an offset), read without the copy that converting
  a Polars column to offsets would cost (0.3 s for 20M ids).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from numba import carray, njit, types
from numba.core import cgutils
from numba.core.errors import NumbaWarning
from numba.extending import intrinsic


def _jit(fn: Any, **options: Any) -> Any:
    """njit with the on-disk cache where some cache folder is writable (a read-only install and
    home leave only compiling in each process)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NumbaWarning)
            return njit(nogil=True, cache=True, **options)(fn)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return njit(nogil=True, **options)(fn)


def _inlined(fn: Any) -> Any:
    """A helper of the kernels, inlined where it is called (called, the view hash took 40 % longer)."""
    return _jit(fn, inline="always")


@intrinsic
def _pointer(typingctx: Any, address: Any) -> Any:
    """The address (an integer) as a void pointer, for `carray`."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.inttoptr(args[0], cgutils.voidptr_t)

    return types.voidptr(types.uint64), codegen


@_inlined
def _final(h: Any) -> Any:
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


@_inlined
def _fnv(h: Any, data: Any, lo: Any, hi: Any) -> Any:
    """FNV-1a-64 of `h` continued over data[lo:hi] (bounds checked by the caller)."""
    prime = np.uint64(0x100000001B3)
    for j in range(lo, hi):
        h = (h ^ np.uint64(data[j])) * prime
    return h


@_inlined
def _outside(lo: Any, hi: Any, size: Any) -> bool:
    """[lo, hi) is not a span of a buffer of `size` bytes."""
    return lo < 0 or hi < lo or hi > size


@_jit
def offsets(offs: Any, data: Any, valid: Any, h0: Any, out: Any) -> int:
    """out[i] = hash of row i of (offs, data); a row whose `valid` is 0 hashes as ""
    (`valid` empty: no nulls)."""
    masked = valid.shape[0] > 0
    for i in range(out.shape[0]):
        h = h0
        if not masked or valid[i]:
            if _outside(offs[i], offs[i + 1], data.shape[0]):
                return i
            h = _fnv(h, data, offs[i], offs[i + 1])
        out[i] = _final(h)
    return -1


@_jit
def views(words: Any, inline: Any, addresses: Any, sizes: Any, valid: Any, h0: Any, out: Any) -> int:
    """out[i] = hash of the i-th 16-byte view (`words`: as 4 int32, `inline`: as 16 bytes) over
    the data buffers at `addresses` (of `sizes` bytes); `valid` as in `offsets`."""
    masked = valid.shape[0] > 0
    current = -1
    data = carray(_pointer(np.uint64(0)), (0,), dtype=np.uint8)  # type: ignore[call-arg]
    for i in range(out.shape[0]):
        length = words[i, 0]
        if masked and not valid[i]:
            length = 0
        if length < 0:
            return i
        if length <= 12:
            h = _fnv(h0, inline[i], 4, 4 + length)
        else:
            buf, lo = words[i, 2], np.int64(words[i, 3])
            if buf < 0 or buf >= sizes.shape[0] or _outside(lo, lo + length, sizes[buf]):
                return i
            if buf != current:
                data = carray(_pointer(addresses[buf]), (sizes[buf],), dtype=np.uint8)
                current = buf
            h = _fnv(h0, data, lo, lo + length)
        out[i] = _final(h)
    return -1


@_jit
def at_positions(offs: Any, data: Any, positions: Any, h0: Any, out: Any) -> int:
    """out[k] = hash of row positions[k] of (offs, data); the first k it could not read, else -1."""
    for k in range(positions.shape[0]):
        i = positions[k]
        if i < 0 or i >= offs.shape[0] - 1 or _outside(offs[i], offs[i + 1], data.shape[0]):
            return k
        out[k] = _final(_fnv(h0, data, offs[i], offs[i + 1]))
    return -1


@_jit
def group_sums(codes: Any, dur: Any, groups: int, totals: Any, sizes: Any) -> bool:
    """Per-group duration sums and counts into `totals` / `sizes` (zeroed here); False (and the
    sums unfinished) at the first duration that is negative or not finite."""
    totals[:] = 0.0
    sizes[:] = 0
    for i in range(codes.shape[0]):
        d = dur[i]
        if not (d >= 0.0 and d < np.inf):
            return False
        g = codes[i]
        totals[g] += d
        sizes[g] += 1
    return True


@_jit
def first_rows(values: Any, first: Any) -> None:
    """first[v] = the first row whose value is v (for v < len(first); others untouched)."""
    for i in range(values.shape[0] - 1, -1, -1):
        v = values[i]
        if v < first.shape[0]:
            first[v] = i


@_jit
def map_codes(values: Any, lut: Any, out: Any) -> None:
    """out[i] = lut[values[i]] (values < len(lut)): NumPy's `lut[values]` first widens the indices."""
    for i in range(values.shape[0]):
        out[i] = lut[values[i]]


@_jit
def row_checks(records: Any, id_offs: Any, id_data: Any, uri_offs: Any, uri_data: Any, out: Any) -> int:
    """out[i] = FNV-1a-64 + splitmix64 of row i: its record's bytes but the last 8 (the check
    itself), then its episode_id and uri bytes; the first row whose strings lie outside their
    bytes, else -1 (a sidecar's per-row checksum, robodata.catalog.rowpack)."""
    width = records.shape[1] - 8
    for i in range(out.shape[0]):
        if _outside(id_offs[i], id_offs[i + 1], id_data.shape[0]) or _outside(
            uri_offs[i], uri_offs[i + 1], uri_data.shape[0]
        ):
            return i
        h = _fnv(np.uint64(0xCBF29CE484222325), records[i], 0, width)
        h = _fnv(h, id_data, id_offs[i], id_offs[i + 1])
        out[i] = _final(_fnv(h, uri_data, uri_offs[i], uri_offs[i + 1]))
    return -1
