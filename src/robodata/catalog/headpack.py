"""A data file's filter columns in the budget's hash order: the *head* beside its row sidecar.

A budgeted spec keeps, in every group, a prefix of `stable_hash64(episode_id, salt)` order
(robodata.curate.budget). At 5M rows that prefix is ~5 % of the rows that pass its filters, at
50M ~0.5 %; yet a Parquet key scan decodes the filter columns of every row (robodata.curate.keyscan).
A head holds those columns of one data file with its rows in that order, column by column, so a
spec evaluates its predicate on the prefix alone (robodata.curate.prefix) and widens it only as
far as its caps need.

Columns (`COLUMNS`): every catalog column a spec may filter, mix or exclude on, but the
per-episode strings (episode_id, uri, texts, digests), the name lists and the partition column
`day` (the file's partition says it). Each is fixed width, so any range of rows is a slice:

* numbers and booleans as little-endian values, with a byte per row (1: present) where the file
  has nulls;
* strings and lists as codes into the column's values in this file (int16 or int32; -1: null),
  the values in the header.

Besides, per row (`KEYS`): its hash (ascending), its row in the data file and whether it has a
container (uri neither null nor empty); and what the budget's rounding bound needs of the whole
file without every candidate: how many rows have a duration that is negative or not finite
(`bad_durations`; those rows again, in sections of their own, `BAD`, so a spec checks whether it
admits one without reading the file: if it does, it takes the key scan) and an upper bound of
the sum of the other durations (`duration_sum`).

Layout: `MAGIC`, the header's length and CRC-32C (u32 each), the header (JSON), then the sections,
each padded to 8 bytes. The header holds the file's row count, the CRC-32C of its data file's
Parquet footer (a head is used only for the file it was written for), the order's salt, and each
section's place and the CRC-32C of every block of `BLOCK` rows: a range read is checked block by
block before it is returned.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import google_crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from robodata.catalog import rowpack
from robodata.catalog.schema import CATALOG_SCHEMA

MAGIC = b"RDHEAD02"  # 01: the rows with a bad duration listed by position, read from the main sections
BLOCK = 4096  # rows per checksummed block of a section
_NOT_HELD = {"episode_id", "uri", "day", "qc_reason", "source_digest", "language", "stream_rates_json"}
_NOT_HELD |= {"state_names", "action_names", "streams", "footer_offset", "footer_length"}
COLUMNS = tuple(c for c in CATALOG_SCHEMA.names if c not in _NOT_HELD)
KEYS = "__keys"  # per row: its hash, its row in the data file, whether it has a container
KEY = np.dtype([("hash", "<u8"), ("row", "<u4"), ("loadable", "u1"), ("_pad", "V3")])
BAD = "@bad"  # suffix of the sections holding only the rows whose duration is < 0 or not finite
_PRE = struct.Struct("<8sII")


@dataclass(frozen=True)
class Slice:
    """Rows [lo, hi) of one column: values (codes for a coded column), presence (None: no nulls)."""

    values: np.ndarray
    present: np.ndarray | None
    dictionary: list[Any] | None  # a coded column's values (codes index it), else None


def encode(table: pa.Table, footer_crc: int, order_salt: str) -> bytes:
    """The head image of one data file (`table`: its rows, with episode_id, uri and `COLUMNS`,
    catalog types; missing ones as nulls)."""
    from robodata.curate.stablehash import stable_hash64  # Numba, loaded on first use

    held = ["episode_id", "uri", *COLUMNS]
    table = table.select(held).cast(pa.schema([CATALOG_SCHEMA.field(c) for c in held]))
    n = table.num_rows
    hashes = stable_hash64(table.column("episode_id"), order_salt)
    order = np.argsort(hashes, kind="stable")
    table = table.take(pa.array(order, pa.int64()))
    uri = table.column("uri")
    loadable = pc.fill_null(pc.not_equal(uri, ""), False).to_numpy(zero_copy_only=False).astype(np.uint8)
    keys = np.zeros(n, KEY)
    keys["hash"], keys["row"], keys["loadable"] = hashes[order], order, loadable
    sections: dict[str, tuple[np.ndarray, np.ndarray | None]] = {KEYS: (keys, None)}
    columns: dict[str, dict[str, Any]] = {}
    for c in COLUMNS:
        col = table.column(c).combine_chunks()
        present = None if col.null_count == 0 else col.is_valid().to_numpy(zero_copy_only=False).astype(np.uint8)
        if pa.types.is_string(col.type) or pa.types.is_list(col.type):
            codes, distinct = _codes(col)
            sections[c] = (codes.astype("<i2" if len(distinct) < 2**15 else "<i4"), None)
            columns[c] = {"dict": distinct, "nulls": col.null_count > 0}
        else:
            sections[c] = (_numbers(col), present)
            columns[c] = {}
    duration = table.column("duration_s").combine_chunks()
    valid = duration.is_valid().to_numpy(zero_copy_only=False)
    seconds = duration.fill_null(0.0).to_numpy(zero_copy_only=False)
    good = np.isfinite(seconds) & (seconds >= 0)
    bad = np.flatnonzero(valid & ~good)  # positions (hash order) of durations < 0, NaN or infinite
    total = math.fsum(seconds[good].tolist())  # correctly rounded: within half an ulp of the sum
    for name, (values, present) in list(sections.items()) if len(bad) else []:  # those rows again (BAD)
        sections[name + BAD] = (values[bad], present[bad] if present is not None else None)
        columns[name + BAD] = {"dict_of": name} if "dict" in columns.get(name, {}) else {}
    body: list[bytes] = []
    places: dict[str, dict[str, Any]] = {}
    at = 0
    for name, (values, present) in sections.items():
        raw = values.tobytes()
        mask = present.tobytes() if present is not None else None
        width, count = values.dtype.itemsize, len(values)
        crcs = [_crc(raw, mask, lo, min(lo + BLOCK, count), width) for lo in range(0, count, BLOCK)]
        places[name] = {
            "dtype": _dtype_name(values.dtype),
            "rows": count,
            "at": at,
            "mask": None,
            "crc": crcs,
            **columns.get(name, {}),
        }
        body.append(raw + b"\0" * (-len(raw) % 8))
        at += len(body[-1])
        if mask is not None:
            places[name]["mask"] = at
            body.append(mask + b"\0" * (-len(mask) % 8))
            at += len(body[-1])
    head = json.dumps(
        {
            "rows": n,
            "footer_crc32c": int(footer_crc),
            "order_salt": order_salt,
            "block": BLOCK,
            "bad_durations": len(bad),
            "duration_sum": math.nextafter(total, math.inf) if total else 0.0,  # of the others
            "fences": [int(x) for x in hashes[order][::BLOCK]],  # each block's first hash
            "sections": places,
        },
        separators=(",", ":"),
    ).encode()
    head += b" " * (-(_PRE.size + len(head)) % 8)
    return _PRE.pack(MAGIC, len(head), google_crc32c.value(head)) + head + b"".join(body)


def _dtype_name(dtype: np.dtype) -> str:
    return "keys" if dtype == KEY else dtype.str


def _dtype(name: str) -> np.dtype:
    if name == "keys":
        return KEY
    dtype = np.dtype(name)
    if dtype.kind not in "iufb" or dtype.itemsize > 8:
        raise ValueError(f"section type {name!r}")
    return dtype


def _numbers(col: pa.Array) -> np.ndarray:
    """A number, bool or timestamp column as fixed-width values (nulls as 0)."""
    if pa.types.is_boolean(col.type):
        return pc.fill_null(col, False).to_numpy(zero_copy_only=False).astype(np.uint8)
    if pa.types.is_timestamp(col.type):
        col = col.cast(pa.int64())
    return pc.fill_null(col, 0).to_numpy(zero_copy_only=False)


def _codes(col: pa.Array) -> tuple[np.ndarray, list[Any]]:
    """Per-row codes into the column's distinct values, sorted (files then share the same
    values, and readers map them once); -1: null."""
    codes, values = rowpack.value_codes(pa.chunked_array([col]))
    if not values:
        return codes, values
    keys = [tuple(v) if isinstance(v, list) else v for v in values]
    order = sorted(range(len(values)), key=lambda i: keys[i])
    rank = np.empty(len(values) + 1, np.int32)
    rank[order] = np.arange(len(values), dtype=np.int32)
    rank[-1] = -1
    return rank[codes], [values[i] for i in order]


def _crc(raw: bytes, mask: bytes | None, lo: int, hi: int, width: int) -> int:
    """CRC-32C of rows [lo, hi) of a section's values (`width` bytes each) and presence bytes."""
    crc = google_crc32c.value(raw[lo * width : hi * width])
    return int(google_crc32c.extend(crc, mask[lo:hi]) if mask is not None else crc)


class HeadFile:
    """One head, read by `pread` (a memory map of it would count whole page-cache folios, ~2 MB
    each, in the reader's RSS); raises ValueError unless it is a head of `rows` rows.

    Its file stays open only while `held` (a catalog of thousands of days would otherwise hold
    as many descriptors); reads outside it open it for the read.
    """

    def __init__(self, path: Path, rows: int):
        self.path, self.n = path, rows
        self._fd = os.open(path, os.O_RDONLY)
        try:
            pre = os.pread(self._fd, _PRE.size, 0)
            magic, size, crc = _PRE.unpack(pre) if len(pre) == _PRE.size else (b"", 0, 0)
            if magic != MAGIC:
                raise ValueError("not a head")
            raw = os.pread(self._fd, size, _PRE.size)
            if len(raw) != size or google_crc32c.value(raw) != crc:
                raise ValueError("its header is not as written (checksum)")
            head = json.loads(raw)
            if head.get("rows") != rows or int(head["block"]) != BLOCK:
                raise ValueError("holds other rows than its name says")
            self.footer_crc, self.order_salt = int(head["footer_crc32c"]), str(head["order_salt"])
            self.bad_durations = int(head["bad_durations"])
            self.duration_sum = float(head["duration_sum"])
            if not 0 <= self.bad_durations <= rows:
                raise ValueError("more rows with a bad duration than rows")
            if not math.isfinite(self.duration_sum) or self.duration_sum < 0:
                raise ValueError("its sum of durations is not a bound")
            self._fences = np.array([int(x) for x in head["fences"]], np.uint64)
            self._sections: dict[str, dict[str, Any]] = head["sections"]
            self._base = _PRE.size + size
            blocks = -(-rows // BLOCK)
            length = os.fstat(self._fd).st_size
            self._size = length
            if len(self._fences) != blocks or not bool((self._fences[1:] >= self._fences[:-1]).all()):
                raise ValueError("its fences are not its blocks'")
            for name, s in self._sections.items():
                places = [s["at"], s["rows"], *s["crc"]] + ([s["mask"]] if s["mask"] is not None else [])
                if not all(type(x) is int for x in places):
                    raise ValueError(f"section {name}: its places are not integers")
                count = self.bad_durations if name.endswith(BAD) else rows
                width = _dtype(s["dtype"]).itemsize
                ends = [s["at"] + count * width] + ([s["mask"] + count] if s["mask"] is not None else [])
                if s["rows"] != count or len(s["crc"]) != -(-count // BLOCK):
                    raise ValueError(f"section {name} holds other rows")
                if self._base + max(ends) > length or min(s["at"], *ends) < 0:
                    raise ValueError(f"section {name} cut short")
            for name in (KEYS, KEYS + BAD) if self.bad_durations else (KEYS,):
                if self._sections.get(name, {}).get("dtype") != "keys":
                    raise ValueError(f"no {name} section")
            for s in self._sections.values():
                if "dict_of" in s:  # a BAD section's values: its column's
                    s["dict"] = self._sections[s["dict_of"]]["dict"]
        except (ValueError, KeyError, TypeError, OverflowError, struct.error) as exc:
            self.close()
            raise ValueError(f"{path}: not a readable head: {exc}") from exc
        self.close()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Its file open for the reads inside (the same file: its size as when it was checked)."""
        if self._fd >= 0:
            yield
            return
        self._fd = os.open(self.path, os.O_RDONLY)
        try:
            if os.fstat(self._fd).st_size != self._size:
                raise ValueError(f"{self.path}: changed since it was opened")
            yield
        finally:
            self.close()

    def values(self, column: str) -> tuple[list[Any], bool] | None:
        """A coded column's values in this file and whether it has nulls (None: not a coded column)."""
        s = self._sections.get(column, {})
        return (list(s["dict"]), bool(s["nulls"])) if "dict" in s else None

    def end(self, limit: int) -> int:
        """How many rows have a hash <= `limit`: searched in the one block the fences (each block's
        first hash, in the checked header) put it in, that block read and checked."""
        if not self.n:
            return 0
        b = max(0, int(np.searchsorted(self._fences, np.uint64(limit), side="right")) - 1)
        lo = b * BLOCK
        hashes = self.read(KEYS, lo, min(lo + BLOCK, self.n)).values["hash"]
        if int(hashes[0]) != int(self._fences[b]) or not bool((hashes[1:] >= hashes[:-1]).all()):
            raise ValueError(f"{self.path}: its hashes are not in order")
        return lo + int(np.searchsorted(hashes, np.uint64(limit), side="right"))

    def read(self, name: str, lo: int, hi: int) -> Slice:
        """Rows [lo, hi) of a section, checked block by block (its CRC-32C)."""
        s = self._sections[name]
        dtype = _dtype(s["dtype"])
        width, count = dtype.itemsize, int(s["rows"])
        if not 0 <= lo <= hi <= count:
            raise ValueError(f"{self.path}: rows [{lo}, {hi}) outside section {name}'s {count}")
        if hi <= lo:
            return Slice(np.zeros(0, dtype), None if s["mask"] is None else np.zeros(0, bool), s.get("dict"))
        if self._fd < 0:
            with self.held():
                return self.read(name, lo, hi)
        first, last = lo // BLOCK, -(-hi // BLOCK)
        r0, r1 = first * BLOCK, min(last * BLOCK, count)
        raw = os.pread(self._fd, (r1 - r0) * width, self._base + s["at"] + r0 * width)
        mask = os.pread(self._fd, r1 - r0, self._base + s["mask"] + r0) if s["mask"] is not None else None
        if len(raw) != (r1 - r0) * width or (mask is not None and len(mask) != r1 - r0):
            raise ValueError(f"{self.path}: section {name} cut short")
        for b in range(first, last):
            a, z = b * BLOCK - r0, min((b + 1) * BLOCK, count) - r0
            if _crc(raw, mask, a, z, width) != int(s["crc"][b]):
                raise ValueError(f"{self.path}: its {name} rows are not as written (checksum)")
        values = np.frombuffer(raw, dtype)[lo - r0 : hi - r0]
        present = np.frombuffer(mask, np.uint8)[lo - r0 : hi - r0] != 0 if mask is not None else None
        dictionary = s.get("dict")
        if dictionary is not None and len(values) and (int(values.min()) < -1 or int(values.max()) >= len(dictionary)):
            raise ValueError(f"{self.path}: a {name} code is not in its values")
        if name.startswith(KEYS) and len(values) and int(values["row"].max()) >= self.n:
            raise ValueError(f"{self.path}: a row outside its {self.n} rows")
        return Slice(values, present, dictionary)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
