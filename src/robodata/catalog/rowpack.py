"""The row-major encoding of a sidecar (robodata.catalog.sidecar): records, strings, dictionaries.

`encode` turns the manifest columns of one data file into a file image; `RowFile` reads one
(memory-mapped, validated) and `gather` assembles rows picked from several files into one Arrow
table of the manifest types, in a requested order. Values round-trip exactly, nulls included
(numbers and the two strings by a validity mask, dictionary columns by code -1).

**Sampling order** (format 4): records and strings lie in the order of `stable_hash64(episode_id,
order_salt)`, the budget order of the specs whose salt the catalog was optimized for
(robodata.catalog.maintenance: `OptimizeConfig.split_salt`). A budgeted spec keeps a prefix of
that order in each group, so its kept rows lie near the start of every sidecar: at 5M rows, one
page in twenty is touched, not every page. A `slots` section maps the data file's row numbers to
records, and a `hashes` section holds each row's hash in row order, which curation reads instead
of hashing the ids when its salt is the file's (`RowFile.hash_ids`).

The header holds the CRC-32C of the episode_id sections (offsets, bytes), of the slots and hashes
sections, and of the data file's Parquet footer: curation reads its candidates' hashes (or ids)
from here instead of decoding ids from Parquet (robodata.curate.keyscan), and only after
`RowFile.verify` (and `check_ids` for ids) found them as written, for the file whose footer it
read. Every record ends with a checksum of the row (its other record bytes, its episode_id and uri
bytes), checked for each row picked, and the header holds the CRC-32C of the dictionaries, checked
on opening: a byte altered anywhere a row is read from is refused, never returned.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import google_crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

MAGIC = b"RDSIDE04"  # 03: rows in row order, no slots or hashes; 02: no checksums
NUMBERS = ("duration_s", "size_bytes", "footer_offset", "footer_length", "num_frames", "num_state_steps")
CODED = ("site", "task", "cameras", "stream_rates_json", "layout_version")
STRINGS = ("episode_id", "uri")
_VALID = {c: 1 << i for i, c in enumerate((*STRINGS, *NUMBERS))}
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
        valid |= np.where(col.is_valid().to_numpy(zero_copy_only=False), _VALID[c], 0).astype(np.uint16)
    dicts: dict[str, list[Any]] = {}
    for c in CODED:
        codes, dicts[c] = _codes(table.column(c))
        rec[c] = codes
    strings: list[np.ndarray] = []
    for c in STRINGS:  # Arrow's layout: n + 1 offsets, then the bytes
        col = table.column(c).combine_chunks().cast(pa.large_string())
        valid |= np.where(col.is_valid().to_numpy(zero_copy_only=False), _VALID[c], 0).astype(np.uint16)
        offsets = np.frombuffer(col.buffers()[1], np.int64, n + 1, col.offset * 8) if n else np.zeros(1, np.int64)
        data = col.buffers()[2]
        raw = np.frombuffer(data, np.uint8)[offsets[0] : offsets[-1]] if data is not None else np.zeros(0, np.uint8)
        strings += [offsets - offsets[0], raw]
    rec["valid"] = valid
    rec["check"] = _checks(rec, strings, "a new sidecar")
    sections = [rec.tobytes(), *(a.tobytes() for a in strings), slots.tobytes(), hashes.tobytes()]
    sizes = [len(b) + (-len(b) % 8) for b in sections]
    padded = [b + b"\0" * (-len(b) % 8) for b in sections]  # as written
    ids_crc = google_crc32c.extend(google_crc32c.value(padded[1]), padded[2])
    order_crc = google_crc32c.extend(google_crc32c.value(padded[5]), padded[6])
    head = json.dumps(
        {
            "rows": n,
            "dicts": dicts,
            "dicts_crc32c": _dicts_crc(dicts),
            "sections": sizes,
            "ids_crc32c": ids_crc,
            "footer_crc32c": int(footer_crc),
            "order_salt": order_salt,
            "order_crc32c": order_crc,
        },
        separators=(",", ":"),
    ).encode()
    head += b" " * (-(_HEAD.size + len(head)) % 8)
    body = b"".join(padded)
    return _HEAD.pack(MAGIC, len(head)) + head + body


def _codes(col: pa.ChunkedArray) -> tuple[np.ndarray, list[Any]]:
    """Per-row codes into the column's distinct values (-1: null)."""
    arr = col.combine_chunks()
    if pa.types.is_list(arr.type):
        seen: dict[Any, int] = {}
        values: list[Any] = []
        codes = np.empty(len(arr), np.int32)
        for i, v in enumerate(arr.to_pylist()):
            if v is None:
                codes[i] = -1
                continue
            codes[i] = seen.setdefault(_key(v), len(values))
            if codes[i] == len(values):
                values.append(v)
        return codes, values
    enc = pc.dictionary_encode(arr)
    return pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False).astype(np.int32), enc.dictionary.to_pylist()


def _key(value: Any) -> Any:
    """A dictionary value as a dict key (`cameras` values are lists)."""
    return tuple(value) if isinstance(value, list) else value


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
        self._slots, self._hashes = np.zeros(0, np.uint32), np.zeros(0, np.uint64)
        self.strings: dict[str, tuple[np.ndarray, int, int]] = {}
        with open(path, "rb") as fh:
            self._map = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            magic, head_len = _HEAD.unpack_from(self._map, 0) if len(self._map) >= _HEAD.size else (b"", 0)
            if magic != MAGIC:
                raise ValueError("not a row sidecar")
            head = json.loads(self._map[_HEAD.size : _HEAD.size + head_len])
            sizes = [int(x) for x in head["sections"]]
            if head.get("rows") != rows or len(sizes) != 7 or min(sizes) < 0:
                raise ValueError("holds other rows than its name says")
            at = np.cumsum([_HEAD.size + head_len, *sizes])
            short = sizes[0] < rows * RECORD.itemsize or min(sizes[1], sizes[3]) < (rows + 1) * 8
            if at[-1] > len(self._map) or short or sizes[5] < rows * 4 or sizes[6] < rows * 8:
                raise ValueError("cut short")
            self.dicts: dict[str, list[Any]] = head["dicts"]
            if _dicts_crc(self.dicts) != head["dicts_crc32c"]:
                raise ValueError("its dictionaries are not as written (checksum)")
            self._ids_crc, self._footer_crc = int(head["ids_crc32c"]), int(head["footer_crc32c"])
            self.order_salt, self._order_crc = str(head["order_salt"]), int(head["order_crc32c"])
            self._order_span = (int(at[5]), int(at[7]))
            self._verified = self._ids_checked = False
            width = RECORD.itemsize // 8
            self._rows = np.frombuffer(self._map, np.uint64, rows * width, int(at[0])).reshape(rows, width)
            for k, c in enumerate(STRINGS):  # (offsets, where the bytes start, how many)
                offsets = np.frombuffer(self._map, np.int64, rows + 1, int(at[1 + 2 * k]))
                self.strings[c] = (offsets, int(at[2 + 2 * k]), sizes[2 + 2 * k])
            self._slots = np.frombuffer(self._map, np.uint32, rows, int(at[5]))
            self._hashes = np.frombuffer(self._map, np.uint64, rows, int(at[6]))
        except (ValueError, KeyError, TypeError, struct.error) as exc:
            self.close()
            raise ValueError(f"{path}: not a readable row sidecar: {exc}") from exc

    def verify(self, footer_crc: int) -> None:
        """Raise ValueError unless this is the sidecar of the data file whose footer has CRC-32C
        `footer_crc` and its slots and hashes sections hold what was written (their CRC-32C)."""
        if footer_crc != self._footer_crc:
            raise ValueError(f"{self.path}: written for another data file (its footer checksum differs)")
        if not self._verified:
            lo, hi = self._order_span
            if google_crc32c.value(np.frombuffer(self._map, np.uint8, hi - lo, lo)) != self._order_crc:
                raise ValueError(f"{self.path}: its slots or hashes are not as written (checksum)")
            self._verified = True

    def check_ids(self, footer_crc: int) -> None:
        """`verify`, and raise ValueError unless its episode_id sections hold what was written."""
        self.verify(footer_crc)
        if self._ids_checked:
            return
        offsets, raw = self._ids()
        if google_crc32c.extend(google_crc32c.value(offsets), raw) != self._ids_crc:
            raise ValueError(f"{self.path}: its episode ids are not as written (checksum)")
        self._ids_checked = True

    def hash_ids(self, positions: np.ndarray, salt: str, footer_crc: int) -> np.ndarray:
        """stable_hash64(episode_id, salt) of the rows at `positions`: as stored when `salt` is the
        file's `order_salt` (`verify` first), else from the ids (`check_ids` first)."""
        from robodata.curate.stablehash import hash_offsets  # Numba, loaded on first use

        if salt == self.order_salt:
            self._inside(positions)
            self.verify(footer_crc)
            return self._hashes[positions]  # a copy: nothing refers to the map
        self.check_ids(footer_crc)
        return hash_offsets(*self._ids(), self._slot(positions), salt, str(self.path))

    def _inside(self, positions: np.ndarray) -> None:
        if len(positions) and (int(positions.min()) < 0 or int(positions.max()) >= self.n):
            raise ValueError(f"{self.path}: a position outside its {self.n} rows")

    def _slot(self, positions: np.ndarray) -> np.ndarray:
        """The records of the rows at `positions` (row numbers of the data file)."""
        self._inside(positions)
        slots = self._slots[positions].astype(np.int64)
        if len(slots) and int(slots.max()) >= self.n:
            raise ValueError(f"{self.path}: a slot outside its {self.n} rows")
        return slots

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
        self._slots, self._hashes = np.zeros(0, np.uint32), np.zeros(0, np.uint64)
        self.strings = {}
        with contextlib.suppress(BufferError):  # a view is still alive (an exception's traceback):
            self._map.close()  # unmapped when it goes


def _checks(records: np.ndarray, strings: list[np.ndarray], where: str) -> np.ndarray:
    """Each row's checksum (robodata.curate.kernels.row_checks); `strings`: episode_id offsets and
    bytes, then uri's."""
    from robodata.curate import kernels  # Numba, loaded on first use

    out = np.empty(len(records), np.uint64)
    rows = np.ascontiguousarray(records).view(np.uint8).reshape(len(records), RECORD.itemsize)
    if kernels.row_checks(rows, *strings, out) >= 0:
        raise ValueError(f"{where}: string offsets outside their bytes")
    return out


def _dicts_crc(dicts: dict[str, list[Any]]) -> int:
    return int(google_crc32c.value(json.dumps(dicts, separators=(",", ":"), sort_keys=True).encode()))


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


def gather(picked: list[Picked], schema: pa.Schema, order: np.ndarray | None = None) -> pa.Table:
    """The picked rows, files in turn, as `schema` (the manifest columns); `order`: output row j
    is picked row order[j]."""
    recs: list[np.ndarray] = []
    strings: dict[str, list[pa.Array]] = {c: [] for c in STRINGS}
    values: dict[str, list[Any]] = {c: [] for c in CODED}  # one dictionary per column for all files
    index: dict[str, dict[Any, int]] = {c: {} for c in CODED}  # its values' positions
    luts: dict[str, list[np.ndarray]] = {c: [] for c in CODED}  # per file: its codes -> global codes
    known: dict[tuple, np.ndarray] = {}  # files mostly share their dictionaries: one lookup each
    for f in picked:
        recs.append(f.records)
        for c in STRINGS:
            strings[c].append(f.strings[c])
        for c in CODED:
            key = (c, *map(_key, f.dicts[c]))
            lut = known.get(key)
            if lut is None:
                lut = known[key] = np.empty(len(f.dicts[c]), np.int32)
                for k, v in enumerate(f.dicts[c]):
                    lut[k] = index[c].setdefault(_key(v), len(values[c]))
                    if lut[k] == len(values[c]):
                        values[c].append(v)
            luts[c].append(lut)
    rec = np.concatenate(recs) if recs else np.zeros(0, RECORD)
    of_file = np.repeat(np.arange(len(recs)), [len(r) for r in recs])
    for c in CODED:  # each row's code -> one dictionary for all files; -1 stays null
        sizes = np.array([len(lut) for lut in luts[c]], np.int64)
        flat = np.concatenate([*luts[c], np.array([-1], np.int32)])
        local = rec[c].astype(np.int64)
        bad = (local < -1) | (local >= sizes[of_file])
        if bad.any():
            raise ValueError(f"{picked[of_file[bad.argmax()]].path}: a record's {c} code is not in its dictionary")
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        rec[c] = flat[np.where(local < 0, len(flat) - 1, starts[of_file] + local)]
    at = pa.array(order, pa.int64()) if order is not None else None
    rec = rec[order] if order is not None else rec
    valid = rec["valid"]
    cols: dict[str, pa.Array] = {}
    for c in STRINGS:
        arr = pa.chunked_array(strings[c], pa.large_string()).combine_chunks()
        arr = arr.take(at) if at is not None else arr
        arr.validate(full=True)  # UTF-8 of bytes read from a file
        present = (valid & _VALID[c]) != 0
        arr = arr if present.all() else pc.if_else(pa.array(present), arr, None)
        cols[c] = arr.cast(schema.field(c).type)
    for c in NUMBERS:
        cols[c] = pa.array(rec[c], mask=(valid & _VALID[c]) == 0).cast(schema.field(c).type)
    for c in CODED:
        codes = rec[c]
        cols[c] = pc.take(pa.array(values[c], schema.field(c).type), pa.array(codes, mask=codes < 0))
    return pa.table([cols[c] for c in schema.names], schema=schema)
