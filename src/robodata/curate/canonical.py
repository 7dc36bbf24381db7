"""Canonical logical encoding of a manifest table: what its content hash (schemes v2 and v3) covers.

Only values are encoded, never Arrow buffers, so two tables with the same rows hash the same
whatever their buffers hold: sliced arrays, bytes left behind rows a filter dropped, list
entries hidden behind nulls, `string` vs `large_string` vs `string_view`, any chunking.

Encoding (integers and floats little-endian; `n` rows):

    v4 (the current scheme): "robodata-manifest-v4\\0" spec_hash "\\0" n "\\0"
    v3:                      "robodata-manifest-v3\\0" spec_hash "\\0" n "\\0"
    v2:                      "robodata-manifest-v2\\0" spec_hash "\\0" catalog_version "\\0" n "\\0"
    then per column of MANIFEST_SCHEMA (v4), of MANIFEST_BASE_SCHEMA (v2, v3: the columns before the
    mixing facts of issue 37), in schema order:
        name "\\0" type "\\0"
        validity      n bytes (1 = value, 0 = null)
        values        bool      n bytes (null: 0)
                      integer   n int64 (null: 0)
                      floating  n float64; -0.0 as 0.0, every NaN as one quiet NaN (null: 0)
                      string    n int64 byte lengths (null: 0), then the UTF-8 bytes of the values
                      list      n int64 item counts (null: 0), then the items, encoded as a column
                                (validity + values) of the list's item type

Rows are taken in canonical order (`canonical_order`): by episode_id, ties broken by the
other columns, so the order a table arrives in does not matter either.

v3 leaves the catalog version out: a manifest is its rows and its spec, so the same rows selected
at two catalog versions are one manifest (one file, one hash, one Dagster data version); the
version it was selected at stays in the file's metadata, as provenance. v2 (written from issue 16
until v3) hashed the version too; files that name it are verified with it, unchanged. v4 (issue 37)
is v3 over the manifest's mixing facts too (robot_type, dims, roles, ...); v2 and v3 files hold only
the base columns and are verified over them, unchanged.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from robodata.catalog.schema import MANIFEST_BASE_COLUMNS

SCHEME = "v4"
V3 = "v3"
V2 = "v2"
_EMPTY = np.zeros(0, np.uint8)


def canonical_order(table: pa.Table) -> pa.Table:
    """`table` with rows in canonical order; returned unchanged when episode_id already increases strictly."""
    if table.num_rows < 2:
        return table
    ids = table.column("episode_id")
    if ids.null_count == 0 and pc.all(pc.less(ids.slice(0, len(ids) - 1), ids.slice(1))).as_py():
        return table
    keys: list[tuple[str, str, str]] = []
    sortable = table
    for f in table.schema:
        if pa.types.is_list(f.type) or pa.types.is_large_list(f.type):
            key = f"__order_{f.name}"  # a tie-break only: items joined (null if the list or an item is null)
            joined = pc.binary_join(table.column(f.name).cast(pa.list_(pa.string())), "\x00")
            sortable = sortable.append_column(key, joined)
            keys.append((key, "ascending", "at_start"))
        else:
            keys.append((f.name, "ascending", "at_start"))
    keys.sort(key=lambda k: k[0] != "episode_id")  # stable: episode_id first, the others in schema order
    order = pc.sort_indices(sortable, sort_keys=keys)
    return table.take(order)


def content_hash(table: pa.Table, spec_hash: str, catalog_version: int | None = None) -> str:
    """v4: sha256 hex digest of the canonical encoding of `table` (already cast to MANIFEST_SCHEMA)
    and the spec hash. `catalog_version` is metadata, not hashed (accepted for the schemes' common
    signature, robodata.curate.manifest.HASH_SCHEMES)."""
    return _digest(table, f"robodata-manifest-{SCHEME}\0{spec_hash}\0")


def content_hash_v3(table: pa.Table, spec_hash: str, catalog_version: int | None = None) -> str:
    """v3: as v4 over the base columns only (verifies files written before v4)."""
    return _digest(table.select(MANIFEST_BASE_COLUMNS), f"robodata-manifest-{V3}\0{spec_hash}\0")


def content_hash_v2(table: pa.Table, spec_hash: str, catalog_version: int) -> str:
    """v2: as v3, with the catalog version hashed too (verifies files written before v3)."""
    base = table.select(MANIFEST_BASE_COLUMNS)
    return _digest(base, f"robodata-manifest-{V2}\0{spec_hash}\0{catalog_version}\0")


def _digest(table: pa.Table, header: str) -> str:
    table = canonical_order(table)
    h = hashlib.sha256()
    h.update(f"{header}{table.num_rows}\0".encode())
    for f in table.schema:
        h.update(f"{f.name}\0{f.type}\0".encode())
        column = table.column(f.name)
        arr = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
        _encode(arr, h)
    return h.hexdigest()


def _validity(arr: pa.Array) -> np.ndarray:
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    return arr.is_valid().to_numpy(zero_copy_only=False)


def _encode(arr: pa.Array, h) -> None:
    valid = _validity(arr)
    h.update(valid.astype(np.uint8).tobytes())
    t = arr.type
    if pa.types.is_boolean(t):
        h.update(pc.fill_null(arr, False).to_numpy(zero_copy_only=False).astype(np.uint8).tobytes())
    elif pa.types.is_integer(t):
        h.update(pc.fill_null(arr, 0).to_numpy(zero_copy_only=False).astype("<i8").tobytes())
    elif pa.types.is_floating(t):
        x = pc.fill_null(arr, 0).to_numpy(zero_copy_only=False).astype("<f8")
        x = np.where(x == 0.0, 0.0, x)  # -0.0 -> 0.0
        x = np.where(np.isnan(x), np.nan, x).astype("<f8")  # one NaN bit pattern
        h.update(x.tobytes())
    elif pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t) or pa.types.is_binary(t):
        lengths, data = _string_values(arr, valid)
        h.update(lengths.astype("<i8").tobytes())
        h.update(data)
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False).astype("<i8")
        h.update(lengths.tobytes())
        items = arr.cast(pa.large_list(t.value_type)).flatten()  # skips slicing and null-backed sub-lists
        _encode(items.combine_chunks() if isinstance(items, pa.ChunkedArray) else items, h)
    else:  # pragma: no cover - MANIFEST_SCHEMA holds only the types above
        raise TypeError(f"no canonical encoding for {t}")


def _string_values(arr: pa.Array, valid: np.ndarray) -> tuple[np.ndarray, bytes]:
    """Per-row byte lengths (0 for nulls) and the concatenated bytes of the non-null values."""
    arr = arr.cast(pa.large_binary())
    n = len(arr)
    if n == 0:
        return np.zeros(0, np.int64), b""
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype="<i8", count=n + 1, offset=arr.offset * 8)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else _EMPTY
    raw = np.diff(offsets)
    seg = data[offsets[0] : offsets[-1]]
    if valid.all():
        return raw, seg.tobytes()
    return np.where(valid, raw, 0), seg[np.repeat(valid, raw)].tobytes()
