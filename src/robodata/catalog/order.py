"""The catalog's budget order: a stable, salted hash of each episode id, stored as `budget_hash`.

Train/val splits and budget sampling order must never change between library versions or
machines, so this does not use Python's or Polars' hash (both may change). Definition
(reference implementation: `stable_hash64_py`):

    h = FNV-1a-64 over the UTF-8 bytes of salt, then of the string
    result = splitmix64 finaliser of h   (spreads FNV's weak low bits)

A curation spec's budget keeps each capped group's episodes in `stable_hash64(episode_id,
split.salt + "/budget")` order (robodata.curate.budget). The catalog stores that hash for the
site's salt as the int64 column `budget_hash` (the uint64 hash with its top bit flipped, so signed
order is the hash's order: Delta has no unsigned type), written by every merge and by `optimize`,
which sorts each day by it (robodata.catalog.maintenance). The salt is recorded in the table's
metadata, as the `budget_hash` field's metadata in the Delta schema (`SALT_KEY`; `COMPLETE_KEY`
says every row's hash follows it): a Metadata action of the log, versioned with the rows. (Table
properties would do as well, but deltalake 1.6.6's `set_table_properties` hangs on S3, while
`set_column_metadata` works there.) A salt change (`optimize` with another `split_salt`) first
records the new salt with `COMPLETE_KEY` "false" and sets it back to "true" once every day has
been rewritten with the new hashes, so a reader never trusts hashes of another salt. Both commits
carry the merge lock (robodata.catalog.identity), so a merge planned before a salt change is
redone with the new salt.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
from deltalake import DeltaTable

COLUMN = "budget_hash"
SALT_KEY = "robodata.budget.salt"  # the site's split salt: budget_hash = its budget order
COMPLETE_KEY = "robodata.budget.complete"  # "true": every row's budget_hash follows SALT_KEY
FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
_M64 = (1 << 64) - 1
_SIGN = np.uint64(1 << 63)
_BLOCK = 1 << 20  # rows hashed at a time (bounded temporaries)


def budget_salt(split_salt: str) -> str:
    """The salt of the budget order of specs whose `split.salt` is `split_salt`."""
    return split_salt + "/budget"


def stable_hash64(values: pa.Array | pa.ChunkedArray | pl.Series, salt: str = "") -> np.ndarray:
    """uint64 hash of each string in `values` (nulls hash as the empty string), stable across
    versions and machines; `salt` is prepended to every string."""
    if isinstance(values, pl.Series):
        values = values.to_arrow(compat_level=pl.CompatLevel.oldest())
    h0 = _fnv(FNV_OFFSET, salt.encode())
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    out = np.empty(len(values), dtype=np.uint64)
    at = 0
    for chunk in chunks:
        if not pa.types.is_large_string(chunk.type):
            chunk = chunk.cast(pa.large_string())
        n = len(chunk)
        offsets = np.frombuffer(chunk.buffers()[1], np.int64, n + 1, chunk.offset * 8) if n else np.zeros(1, np.int64)
        data = chunk.buffers()[2]
        raw = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
        lengths = np.diff(offsets)
        if chunk.null_count:
            lengths = np.where(np.asarray(chunk.is_valid(), dtype=bool), lengths, 0)
        for a in range(0, n, _BLOCK):
            b = min(n, a + _BLOCK)
            out[at + a : at + b] = _hash_block(offsets[a:b], lengths[a:b], raw, h0)
        at += n
    return out


def _hash_block(starts: np.ndarray, lengths: np.ndarray, raw: np.ndarray, h0: int) -> np.ndarray:
    """FNV-1a + splitmix64 of strings raw[starts[i] : starts[i] + lengths[i]], one byte position at
    a time over all of them (NumPy's uint64 arithmetic wraps, as FNV's does)."""
    n = len(starts)
    h = np.full(n, h0, dtype=np.uint64)
    prime = np.uint64(FNV_PRIME)
    longest = int(lengths.max()) if n else 0
    shortest = int(lengths.min()) if n else 0
    fixed = None  # equal lengths laid end to end: a (rows, length) view, no gathers
    if n and longest == shortest and starts[-1] - starts[0] == (n - 1) * longest:
        fixed = raw[starts[0] : starts[0] + n * longest].reshape(n, longest)
    for j in range(longest):
        if j < shortest:
            np.bitwise_xor(h, fixed[:, j] if fixed is not None else raw[starts + j], out=h)
            np.multiply(h, prime, out=h)
        else:
            more = lengths > j
            byte = raw[np.where(more, starts + j, 0)]
            h = np.where(more, (h ^ byte) * prime, h)
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


def _fnv(h: int, raw: bytes) -> int:
    for byte in raw:
        h = ((h ^ byte) * FNV_PRIME) & _M64
    return h


def stable_hash64_py(value: str, salt: str = "") -> int:
    """Pure-Python reference of `stable_hash64` for one string."""
    h = _fnv(FNV_OFFSET, salt.encode() + value.encode())
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & _M64
    return h ^ (h >> 31)


def unit_interval(hashes: np.ndarray) -> np.ndarray:
    """uint64 hashes as floats in [0, 1) (their top 53 bits)."""
    return (hashes >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def stored(hashes: np.ndarray) -> np.ndarray:
    """uint64 hashes as `budget_hash` stores them: int64 in the same order (top bit flipped)."""
    return (hashes ^ _SIGN).view(np.int64)


def unsigned(values: np.ndarray) -> np.ndarray:
    """`budget_hash` values back to the uint64 hashes."""
    return values.astype(np.int64, copy=False).view(np.uint64) ^ _SIGN


def with_budget_hash(table: pa.Table, split_salt: str) -> pa.Table:
    """`table` (CATALOG_SCHEMA) with `budget_hash` computed from its episode ids for `split_salt`."""
    values = pa.array(stored(stable_hash64(table.column("episode_id"), budget_salt(split_salt))), pa.int64())
    return table.set_column(table.schema.get_field_index(COLUMN), COLUMN, values)


def recorded(dt: DeltaTable) -> dict[str, str]:
    """The budget order's metadata the table records ({} for a table from before it)."""
    schema = dt.schema().to_arrow()
    at = schema.get_field_index(COLUMN)
    meta = schema.field(at).metadata or {} if at >= 0 else {}
    return {k.decode(): v.decode() for k, v in meta.items() if k.decode() in (SALT_KEY, COMPLETE_KEY)}


def table_salt(dt: DeltaTable) -> str | None:
    """The salt the table records for `budget_hash` (None: none recorded, a table from before it)."""
    return recorded(dt).get(SALT_KEY)


def ordered_salt(dt: DeltaTable) -> str | None:
    """The split salt every row's `budget_hash` follows at this version; None while a salt change
    (or the first hashing of an older table) has not rewritten every day yet."""
    meta = recorded(dt)
    return meta.get(SALT_KEY) if meta.get(COMPLETE_KEY) == "true" else None


def metadata(salt: str, complete: bool) -> dict[str, str]:
    """The `budget_hash` field's metadata recording `salt` (and whether every row follows it)."""
    return {SALT_KEY: salt, COMPLETE_KEY: "true" if complete else "false"}


def field(salt: str, complete: bool) -> pa.Field:
    """The `budget_hash` field recording `salt` (for a new table, or one from before the column)."""
    return pa.field(COLUMN, pa.int64(), metadata=metadata(salt, complete))
