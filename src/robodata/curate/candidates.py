"""The budget's hashes of candidates whose ids the key scan set aside, from the sidecars.

A mixin of robodata.curate.keyscan.CatalogSource (its `files`, numbered by the key scan, and
their sidecars, robodata.catalog.rowpack):

* `hashes`: stable_hash64(episode_id, salt) of given candidates: stored in the sidecar when it is
  ordered by that salt, else computed from its id bytes (compiled), two files at a time.
* `under`: the candidates whose hash is under their group's threshold, without every candidate's
  hash: a sidecar ordered by the budget's salt holds its rows' hashes in ascending order, so
  those are a prefix of its records (a few hundred of a 50k-row file at 50M rows), matched to
  the file's candidates by row number. robodata.curate.budget.fast_keep asks for them; at 50M
  rows that is ~100k records read instead of 20M hashes.

Every read is checked first (robodata.catalog.rowpack: the sidecar was written for this data file,
by the CRC-32C of its Parquet footer, read now; the blocks of hashes and rows read, or the ids
hashed, by their own CRC-32C); a failure raises, and curation redoes the evaluation with ids read
from Parquet.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from robodata.catalog import rowpack
from robodata.curate.stablehash import stable_hash64

if TYPE_CHECKING:
    from robodata.curate.keyscan import DataFile

_THREADS = 2  # sidecars hashed side by side


class SidecarHashes:
    """Candidates' hashes from the sidecars of `files` (see the module docstring)."""

    files: list[DataFile]
    checked: set[Path]  # sidecars verified (their data file's footer)

    def footer_crc(self, f: DataFile) -> int:
        raise NotImplementedError

    def _file_of(self, rows: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def hashes(self, rows: np.ndarray, ids: pl.Series, salt: str, stop: threading.Event | None = None) -> np.ndarray:
        """stable_hash64(episode_id, salt) of the rows at addresses `rows`: of `ids` where the scan read
        them, from their file's sidecar where it set them aside (null).

        `stop`: once set, the sidecars not read yet are not (the result is then incomplete).

        Raises:
            ValueError: a sidecar not written for its data file, or whose ids are not as written.
            OSError: a sidecar or a data file cannot be read.
        """
        aside = ids.is_null().to_numpy()
        if not aside.any():
            return stable_hash64(ids, salt)
        out = np.empty(len(rows), dtype=np.uint64)
        at: np.ndarray | None = None  # positions of the rows set aside (None: all of them)
        if not aside.all():
            read = np.flatnonzero(~aside)
            out[read] = stable_hash64(ids.gather(read), salt)
            at = np.flatnonzero(aside)
        addresses = rows if at is None else rows[at]
        if len(addresses) > 1 and not bool((addresses[1:] > addresses[:-1]).all()):  # the scan's order: sorted
            by = np.argsort(addresses, kind="stable")
            at, addresses = (by if at is None else at[by]), addresses[by]
        cuts = self._cuts(addresses)
        jobs = [(i, int(cuts[i]), int(cuts[i + 1])) for i in range(len(self.files)) if cuts[i + 1] > cuts[i]]

        def one(job: tuple[int, int, int]) -> Path:
            i, lo, hi = job
            f = self.files[i]
            if stop is not None and stop.is_set():
                return Path()
            if f.sidecar is None:
                raise ValueError(f"{f.uri}: no sidecar, but its ids were set aside")
            rf = rowpack.RowFile(f.sidecar.path, f.sidecar.rows)
            try:
                h = rf.hash_ids(addresses[lo:hi].astype(np.int64) - f.offset, salt, self.footer_crc(f))
            finally:
                rf.close()
            if at is None:
                out[lo:hi] = h
            else:
                out[at[lo:hi]] = h
            return f.sidecar.path

        with ThreadPoolExecutor(_THREADS) as pool:  # files side by side: hashing runs without the GIL
            self.checked.update(pool.map(one, jobs))
        self.checked.discard(Path())
        return out

    def _cuts(self, addresses: np.ndarray) -> np.ndarray:
        """For sorted addresses: file i's are addresses[cuts[i]:cuts[i + 1]]."""
        starts = np.array([f.offset for f in self.files], dtype=addresses.dtype)  # no copy of 20M addresses
        return np.append(np.searchsorted(addresses, starts), len(addresses))

    def ordered_for(self, rows: np.ndarray, ids: pl.Series, salt: str) -> bool:
        """Whether `under` can serve these candidates (addresses `rows`, sorted): every id was set
        aside, and a file's sidecar (the first's, as optimize writes them all) is ordered by `salt`
        (one that cannot be read: no; hashing then meets it and gives up on the sidecars)."""
        if not len(rows) or ids.null_count() != len(ids) or not bool((rows[1:] > rows[:-1]).all()):
            return False
        f = self.files[int(self._file_of(rows[:1])[0])]
        if f.sidecar is None:
            return False
        try:
            rf = rowpack.RowFile(f.sidecar.path, f.sidecar.rows)
        except (ValueError, OSError):
            return False
        try:
            return rf.order_salt == salt
        finally:
            rf.close()

    def under(
        self, rows: np.ndarray, salt: str, last: np.ndarray, codes: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The candidates (addresses `rows`, sorted; their ids set aside) whose hash is <= `last`
        of their group (`codes`): (their positions in `rows`, ascending; their hashes). Read from
        each file's sidecar as the prefix of its records in `salt` order up to the largest
        threshold (robodata.catalog.rowpack: `RowFile.prefix`, checked), not from every candidate;
        None where a file with candidates has no sidecar in that order.

        Raises:
            ValueError: a sidecar not written for its data file, or whose records are not as written.
            OSError: a sidecar or a data file cannot be read.
        """
        cuts = self._cuts(rows)
        limit = int(last.max())
        found: list[tuple[np.ndarray, np.ndarray]] = []
        index = np.full(max((f.rows for f in self.files), default=0), -1, np.int64)  # `_match`'s, reused
        for i, f in enumerate(self.files):
            lo, hi = int(cuts[i]), int(cuts[i + 1])
            if hi == lo:
                continue
            if f.sidecar is None:
                return None
            rf = rowpack.RowFile(f.sidecar.path, f.sidecar.rows)
            try:
                if rf.order_salt != salt:
                    return None
                got, hashes = rf.prefix(limit, self.footer_crc(f))
            finally:
                rf.close()
            self.checked.add(f.sidecar.path)
            mine, read = _match(rows[lo:hi], got, f.offset, index)
            at, h = lo + mine, hashes[read]
            below = h <= last[codes[at]]
            at, h = at[below], h[below]
            by_row = np.argsort(at)
            found.append((at[by_row], h[by_row]))  # ascending: files and rows in address order
        if not found:
            return np.zeros(0, np.int64), np.zeros(0, np.uint64)
        return np.concatenate([a for a, _ in found]), np.concatenate([b for _, b in found])


def _match(mine: np.ndarray, got: np.ndarray, offset: int, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(positions in `mine`, positions in `got`) of the rows in both: `mine`, a file's candidates'
    addresses (sorted, unique); `got`, row numbers in that file (unique). Few: binary searches;
    many: a scatter into `index` (all -1 and left so, as long as the file), cheaper than that many
    unsorted searches."""
    if len(got) * 8 < len(mine):
        needles = (got + offset).astype(mine.dtype)
        k = np.minimum(np.searchsorted(mine, needles), len(mine) - 1)
        hit = np.flatnonzero(mine[k] == needles)
        return k[hit], hit
    rel = mine.astype(np.int64) - offset  # the file's rows
    index[rel] = np.arange(len(mine))
    k = index[got]
    index[rel] = -1
    hit = np.flatnonzero(k >= 0)
    return k[hit], hit
