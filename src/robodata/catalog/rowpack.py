"""The row-major encoding of a sidecar (robodata.catalog.sidecar): records, strings, dictionaries.

`encode` turns the manifest columns of one data file into a file image; `RowFile` reads one
(memory-mapped, validated); robodata.catalog.sidecar.take_many assembles the rows picked from
several into one Arrow table. Values round-trip exactly, nulls included (numbers and the two
strings by a validity mask, dictionary columns by code -1).

**Sampling order** (format 5): records and strings lie in the order of `stable_hash64(episode_id,
order_salt)`, the budget order of the specs whose salt the catalog was optimized for
(robodata.catalog.maintenance: `OptimizeConfig.split_salt`). A budgeted spec keeps a prefix of
that order in each group, so its kept rows lie near the start of every sidecar. Three sections
index them: `slots` (row -> record), and per record its hash (ascending) and its row. Curation
reads the prefix of records under its hash thresholds (`RowFile.prefix`: at 50M rows, a few
hundred records of a 50k-row file) instead of every candidate's hash; a spec of another salt
hashes its candidates' ids (`hash_ids`).

Checks: the header holds the CRC-32C of the data file's Parquet footer (`verify`: the sidecar
was written for the file whose footer was read), of the episode_id sections (`check_ids`, before
ids are hashed), of the dictionaries (a section of their own, read on first use), and of every
block of `BLOCK` records' hashes and rows, checked for the blocks read. A slot is used only if
the checked record -> row section maps it back to its row. Every record ends with a checksum of
the row (its other record bytes, its episode_id and uri bytes), checked for each row picked: a
byte altered anywhere a row is read from is refused, never returned.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import google_crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

MAGIC = b"RDSIDE05"  # 04: one checksum over slots and hashes; 03: row order; 02: no checksums
BLOCK = 4096  # records per checksummed block of hashes and row numbers
NUMBERS = ("duration_s", "size_bytes", "footer_offset", "footer_length", "num_frames", "num_state_steps")
CODED = ("site", "task", "cameras", "stream_rates_json", "layout_version")
STRINGS = ("episode_id", "uri")
VALID = {c: 1 << i for i, c in enumerate((*STRINGS, *NUMBERS))}
RECORD = np.dtype(
    [
        ("duration_s", "<f8"),
        ("size_bytes", "<i8"),
        ("footer_offset", "<i8"),
        ("footer_length", "<i8"),
        ("num_frames", "<i4"),
        ("num_state_steps", "<i4"),
        *[(c, "<i4") for c in CODED],
        ("valid", "<u2"),
        ("_pad", "<u2"),
        ("check", "<u8"),  # the row's checksum (kernels.row_checks); last
    ]
)
_HEAD = struct.Struct("<8sQ")
assert RECORD.itemsize % 8 == 0  # records are read as rows of uint64


def encode(table: pa.Table, footer_crc: int = 0, order_salt: str = "") -> bytes:
    """The sidecar image of `table` (the manifest columns of one data file, manifest types);
    `footer_crc`: the CRC-32C of that data file's Parquet footer (`footer_crc32c`); `order_salt`:
    records lie in `stable_hash64(episode_id, order_salt)` order (ties: row order)."""
    from robodata.curate.stablehash import stable_hash64  # Numba, loaded on first use

    n = table.num_rows
    hashes = stable_hash64(table.column("episode_id"), order_salt)  # row order
    order = np.argsort(hashes, kind="stable")
    slots = np.empty(n, np.uint32)  # row -> its record
    slots[order] = np.arange(n, dtype=np.uint32)
    table = table.take(pa.array(order, pa.int64()))
    rec = np.zeros(n, dtype=RECORD)
    valid = np.zeros(n, dtype=np.uint16)
    for c in NUMBERS:
        col = table.column(c).combine_chunks()
        rec[c] = col.fill_null(0).to_numpy(zero_copy_only=False)
        valid |= np.where(col.is_valid().to_numpy(zero_copy_only=False), VALID[c], 0).astype(np.uint16)
    dicts: dict[str, list[Any]] = {}
    for c in CODED:
        codes, dicts[c] = value_codes(table.column(c))
        rec[c] = codes
    strings: list[np.ndarray] = []
    for c in STRINGS:  # Arrow's layout: n + 1 offsets, then the bytes
        col = table.column(c).combine_chunks().cast(pa.large_string())
        valid |= np.where(col.is_valid().to_numpy(zero_copy_only=False), VALID[c], 0).astype(np.uint16)
        offsets = np.frombuffer(col.buffers()[1], np.int64, n + 1, col.offset * 8) if n else np.zeros(1, np.int64)
        data = col.buffers()[2]
        raw = np.frombuffer(data, np.uint8)[offsets[0] : offsets[-1]] if data is not None else np.zeros(0, np.uint8)
        strings += [offsets - offsets[0], raw]
    rec["valid"] = valid
    rec["check"] = _checks(rec, strings, "a new sidecar")
    in_order, row_of = hashes[order], order.astype(np.uint32)  # by record: ascending hashes, their rows
    dicts_raw = json.dumps(dicts, separators=(",", ":"), sort_keys=True).encode()
    sections = [rec.tobytes(), *(a.tobytes() for a in strings), slots.tobytes()]
    sections += [in_order.tobytes(), row_of.tobytes(), dicts_raw]
    sizes = [len(b) + (-len(b) % 8) for b in sections]
    padded = [b + b"\0" * (-len(b) % 8) for b in sections]  # as written
    ids_crc = google_crc32c.extend(google_crc32c.value(padded[1]), padded[2])
    head = json.dumps(
        {
            "rows": n,
            "sections": sizes,
            "dicts_crc32c": int(google_crc32c.value(dicts_raw)),
            "ids_crc32c": ids_crc,
            "footer_crc32c": int(footer_crc),
            "order_salt": order_salt,
            "block": BLOCK,
            "blocks_crc32c": [_block_crc(in_order, row_of, lo, BLOCK) for lo in range(0, n, BLOCK)],
        },
        separators=(",", ":"),
    ).encode()
    head += b" " * (-(_HEAD.size + len(head)) % 8)
    body = b"".join(padded)
    return _HEAD.pack(MAGIC, len(head)) + head + body


def value_codes(col: pa.ChunkedArray) -> tuple[np.ndarray, list[Any]]:
    """Per-row codes into the column's distinct values, in order of first appearance (-1: null)."""
    arr = col.combine_chunks()
    if pa.types.is_list(arr.type):
        seen: dict[Any, int] = {}
        values: list[Any] = []
        codes = np.empty(len(arr), np.int32)
        for i, v in enumerate(arr.to_pylist()):
            if v is None:
                codes[i] = -1
                continue
            codes[i] = seen.setdefault(key(v), len(values))
            if codes[i] == len(values):
                values.append(v)
        return codes, values
    enc = pc.dictionary_encode(arr)
    return pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False).astype(np.int32), enc.dictionary.to_pylist()


def key(value: Any) -> Any:
    """A dictionary value as a dict key (`cameras` values are lists)."""
    return tuple(value) if isinstance(value, list) else value


def unify(dictionaries: Iterable[list[Any]]) -> tuple[list[Any], list[np.ndarray]]:
    """One list of values for several files' dictionaries of a column, and for each file the
    position in it of each of its values (int32; files with the same dictionary share one)."""
    values: list[Any] = []
    index: dict[Any, int] = {}
    known: dict[tuple, np.ndarray] = {}  # files mostly share their dictionaries: one lookup each
    luts: list[np.ndarray] = []
    for d in dictionaries:
        keys = tuple(map(key, d)) if d and isinstance(d[0], list) else tuple(d)  # a column's are alike
        lut = known.get(keys)
        if lut is None:
            lut = known[keys] = np.empty(len(d), np.int32)
            for k, v in enumerate(keys):
                lut[k] = index.setdefault(v, len(values))
                if lut[k] == len(values):
                    values.append(d[k])
        luts.append(lut)
    return values, luts


@dataclass(frozen=True)
class Picked:
    """Rows picked from one sidecar: its dictionaries, their records and their strings."""

    path: Path
    dicts: dict[str, list[Any]]
    records: np.ndarray
    strings: dict[str, pa.Array]  # episode_id, uri: large_string


class RowFile:
    """One sidecar, memory-mapped and checked (raises ValueError if it is not one of `rows` rows)."""

    def __init__(self, path: Path, rows: int):
        self.path, self.n = path, rows
        self._rows = np.zeros((0, RECORD.itemsize // 8), np.uint64)  # records, as rows of uint64
        self._slots = self._row_of = np.zeros(0, np.uint32)
        self._hashes = np.zeros(0, np.uint64)
        self.strings: dict[str, tuple[np.ndarray, int, int]] = {}
        self._dicts: dict[str, list[Any]] | None = None
        with open(path, "rb") as fh:
            self._map = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            magic, head_len = _HEAD.unpack_from(self._map, 0) if len(self._map) >= _HEAD.size else (b"", 0)
            if magic != MAGIC:
                raise ValueError("not a row sidecar")
            head = json.loads(self._map[_HEAD.size : _HEAD.size + head_len])
            sizes = [int(x) for x in head["sections"]]
            if head.get("rows") != rows or len(sizes) != 9 or min(sizes) < 0:
                raise ValueError("holds other rows than its name says")
            at = [int(x) for x in np.cumsum([_HEAD.size + head_len, *sizes])]
            short = sizes[0] < rows * RECORD.itemsize or min(sizes[1], sizes[3]) < (rows + 1) * 8
            if at[-1] > len(self._map) or short or min(sizes[5], sizes[7]) < rows * 4 or sizes[6] < rows * 8:
                raise ValueError("cut short")
            self._block, self._blocks = int(head["block"]), [int(c) for c in head["blocks_crc32c"]]
            if self._block < 1 or len(self._blocks) != -(-rows // self._block):
                raise ValueError("its blocks are not its rows'")
            self._ids_crc, self._footer_crc = int(head["ids_crc32c"]), int(head["footer_crc32c"])
            self._dicts_at, self._dicts_crc = (at[8], sizes[8]), int(head["dicts_crc32c"])
            self.order_salt = str(head["order_salt"])
            self._ids_checked = False
            self._verified = np.zeros(len(self._blocks), dtype=bool)
            width = RECORD.itemsize // 8
            self._rows = np.frombuffer(self._map, np.uint64, rows * width, at[0]).reshape(rows, width)
            for k, c in enumerate(STRINGS):  # (offsets, where the bytes start, how many)
                offsets = np.frombuffer(self._map, np.int64, rows + 1, at[1 + 2 * k])
                self.strings[c] = (offsets, at[2 + 2 * k], sizes[2 + 2 * k])
            self._slots = np.frombuffer(self._map, np.uint32, rows, at[5])  # row -> record (checked by _row_of)
            self._hashes = np.frombuffer(self._map, np.uint64, rows, at[6])  # record order: ascending
            self._row_of = np.frombuffer(self._map, np.uint32, rows, at[7])  # record -> row
        except (ValueError, KeyError, TypeError, struct.error) as exc:
            self.close()
            raise ValueError(f"{path}: not a readable row sidecar: {exc}") from exc

    @property
    def dicts(self) -> dict[str, list[Any]]:
        """The dictionary columns' values (read and checked on first use)."""
        if self._dicts is None:
            at, size = self._dicts_at
            raw = self._map[at : at + size].rstrip(b"\0")
            if google_crc32c.value(raw) != self._dicts_crc:
                raise ValueError(f"{self.path}: its dictionaries are not as written (checksum)")
            self._dicts = json.loads(raw)
        return self._dicts

    def verify(self, footer_crc: int) -> None:
        """Raise ValueError unless this is the sidecar of the data file whose footer has CRC-32C `footer_crc`."""
        if footer_crc != self._footer_crc:
            raise ValueError(f"{self.path}: written for another data file (its footer checksum differs)")

    def check_ids(self, footer_crc: int) -> None:
        """`verify`, and raise ValueError unless its episode_id sections hold what was written."""
        self.verify(footer_crc)
        if self._ids_checked:
            return
        offsets, raw = self._ids()
        if google_crc32c.extend(google_crc32c.value(offsets), raw) != self._ids_crc:
            raise ValueError(f"{self.path}: its episode ids are not as written (checksum)")
        self._ids_checked = True

    def prefix(self, limit: int, footer_crc: int) -> tuple[np.ndarray, np.ndarray]:
        """(row numbers, hashes) of the rows whose stored hash is <= `limit`, in hash order: a prefix
        of the records, read and checked (`verify`; the blocks' CRC-32C, one record past it too)."""
        self.verify(footer_crc)
        end = self._end(limit)
        self._check_blocks(0, min(end + 1, self.n))  # the first record past `limit` bounds it
        if (end < self.n and int(self._hashes[end]) <= limit) or (end and int(self._hashes[end - 1]) > limit):
            raise ValueError(f"{self.path}: its hashes are not in order")
        rows = self._row_of[:end].astype(np.int64)
        if end and int(rows.max()) >= self.n:
            raise ValueError(f"{self.path}: a record's row outside its {self.n} rows")
        return rows, self._hashes[:end].copy()

    def _end(self, limit: int) -> int:
        """How many stored hashes are <= `limit`: the block where hashes spread evenly put it, moved
        by its first hash, then a search in that block (few pages touched past the prefix)."""
        n, size = self.n, self._block
        if not n:
            return 0
        b = min(int(limit / 2.0**64 * n) // size, len(self._blocks) - 1)
        while b > 0 and int(self._hashes[b * size]) > limit:
            b -= 1
        while b + 1 < len(self._blocks) and int(self._hashes[(b + 1) * size]) <= limit:
            b += 1
        lo = b * size
        return lo + int(np.searchsorted(self._hashes[lo : min(lo + size, n)], np.uint64(limit), side="right"))

    def hash_ids(self, positions: np.ndarray, salt: str, footer_crc: int) -> np.ndarray:
        """stable_hash64(episode_id, salt) of the rows at `positions`: as stored when `salt` is the
        file's `order_salt` (`verify` first), else from the ids (`check_ids` first)."""
        from robodata.curate.stablehash import hash_offsets  # Numba, loaded on first use

        slots = self._slot(positions)
        if salt == self.order_salt:
            self.verify(footer_crc)
            return self._hashes[slots]  # a copy: nothing refers to the map
        self.check_ids(footer_crc)
        return hash_offsets(*self._ids(), slots, salt, str(self.path))

    def _slot(self, positions: np.ndarray) -> np.ndarray:
        """The records of the rows at `positions` (row numbers of the data file), proven by the
        checked record -> row section."""
        if len(positions) and (int(positions.min()) < 0 or int(positions.max()) >= self.n):
            raise ValueError(f"{self.path}: a position outside its {self.n} rows")
        slots = self._slots[positions].astype(np.int64)
        if len(slots) and int(slots.max()) >= self.n:
            raise ValueError(f"{self.path}: a slot outside its {self.n} rows")
        for b in np.unique(slots // self._block).tolist():
            self._check_blocks(b * self._block, b * self._block + 1)
        if not np.array_equal(self._row_of[slots], positions):
            raise ValueError(f"{self.path}: its slots are not as written")
        return slots

    def _check_blocks(self, lo: int, hi: int) -> None:
        """The CRC-32C of every block holding records [lo, hi)."""
        for b in range(lo // self._block, -(-hi // self._block)):
            if not self._verified[b]:
                if _block_crc(self._hashes, self._row_of, b * self._block, self._block) != self._blocks[b]:
                    raise ValueError(f"{self.path}: its hashes are not as written (checksum)")
                self._verified[b] = True

    def _ids(self) -> tuple[np.ndarray, np.ndarray]:
        """The episode_id sections as they lie in the map: offsets, bytes (padding included)."""
        offsets, at, size = self.strings["episode_id"]
        return offsets, np.frombuffer(self._map, np.uint8, size, at)

    def pick(self, positions: np.ndarray) -> Picked:
        """The rows at `positions` (row numbers of the data file), copied out of the map."""
        slots = self._slot(positions)
        out = {}
        taken = pa.array(slots, pa.int64())
        for c, (offsets, at, size) in self.strings.items():
            lo, hi = offsets[slots], offsets[slots + 1]
            if len(slots) and (int(lo.min()) < 0 or int(hi.max()) > size or bool((hi < lo).any())):
                raise ValueError(f"{self.path}: {c} offsets point outside its bytes")
            whole = pa.LargeStringArray.from_buffers(  # Arrow's take reads only the picked offsets
                len(offsets) - 1, pa.py_buffer(offsets), pa.py_buffer(memoryview(self._map)[at : at + size])
            )
            out[c] = whole.take(taken)
            del whole
        # whole rows by np.take on a 2-D view: ~10x faster than indexing the structured array
        records = np.take(self._rows, slots, axis=0).view(RECORD).reshape(-1)
        strings: list[np.ndarray] = []
        for c in STRINGS:
            arr = out[c]
            buf = arr.buffers()
            offs = np.frombuffer(buf[1], np.int64, len(arr) + 1, arr.offset * 8)
            strings += [offs, np.frombuffer(buf[2], np.uint8) if buf[2] is not None else np.zeros(0, np.uint8)]
        if not np.array_equal(_checks(records, strings, str(self.path)), records["check"]):
            raise ValueError(f"{self.path}: a picked row is not as written (its checksum)")
        return Picked(self.path, self.dicts, records, out)

    def close(self) -> None:
        self._rows = np.zeros((0, RECORD.itemsize // 8), np.uint64)  # the views go before the map
        self._slots = self._row_of = np.zeros(0, np.uint32)
        self._hashes = np.zeros(0, np.uint64)
        self.strings = {}
        with contextlib.suppress(BufferError):  # a view is still alive (an exception's traceback):
            self._map.close()  # unmapped when it goes


def _block_crc(hashes: np.ndarray, row_of: np.ndarray, lo: int, block: int) -> int:
    """CRC-32C of one block of records' hashes and row numbers (records [lo, lo + block))."""
    hi = min(lo + block, len(hashes))
    return int(google_crc32c.extend(google_crc32c.value(hashes[lo:hi].tobytes()), row_of[lo:hi].tobytes()))


def _checks(records: np.ndarray, strings: list[np.ndarray], where: str) -> np.ndarray:
    """Each row's checksum (robodata.curate.kernels.row_checks); `strings`: episode_id offsets and
    bytes, then uri's."""
    from robodata.curate import kernels  # Numba, loaded on first use

    out = np.empty(len(records), np.uint64)
    rows = np.ascontiguousarray(records).view(np.uint8).reshape(len(records), RECORD.itemsize)
    if kernels.row_checks(rows, *strings, out) >= 0:
        raise ValueError(f"{where}: string offsets outside their bytes")
    return out


def footer_crc32c(path: Path) -> int:
    """CRC-32C of a Parquet file's footer (its metadata: schema, row groups, statistics, offsets)."""
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        if size < 12:
            raise ValueError(f"{path}: not a Parquet file (cut short)")
        fh.seek(size - 8)
        length, magic = struct.unpack("<I4s", fh.read(8))
        if magic != b"PAR1" or length > size - 12:
            raise ValueError(f"{path}: not a Parquet file (its footer)")
        fh.seek(size - 8 - length)
        return int(google_crc32c.value(fh.read(length)))
