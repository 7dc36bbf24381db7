"""A budgeted spec decided on the prefix of each data file's head, not on a scan of every row.

The budget keeps, in each capped group, the candidates whose running duration in
`stable_hash64(episode_id, salt)` order stays within the cap (robodata.curate.budget). A head
(robodata.catalog.headpack) holds a data file's filter columns in that order, so the candidates
under a hash threshold are the rows of each head's prefix up to it that pass the predicate. At
5M rows the bench's full-table spec reads ~5 % of the rows this way, at 50M ~0.5 %: about the
same number of rows at every catalog size, where the key scan decodes the filter columns of all.

`decide` widens the threshold until every capped group's cut is proven as `budget.fast_keep`
proves it, with the files' facts in place of the candidates' totals (an upper bound of the sum of
the durations and of their count give a wider, still valid, rounding bound). It gives up (raises
Unproven, saying why: curation takes the key scan) where it cannot prove the result the key scan
would give:

* a spec without caps (every candidate is kept), one that excludes episode ids, or one whose
  predicate reads a column heads do not hold;
* a data file without a head, or a head of another order, rows or data file;
* a row whose duration is negative or not finite that passes the predicate;
* a group that may have candidates but that the prefixes do not show (the caps are shares of the
  groups present among *all* candidates), or an uncapped group;
* equal hashes, or a running sum within rounding of a cap.

Reads are checked (headpack: each block's CRC-32C); a failure raises ValueError or OSError, and
curation takes the key scan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import polars as pl
import pyarrow as pa

from robodata.catalog import headpack, rowpack
from robodata.catalog.headpack import BAD, KEYS, HeadFile
from robodata.catalog.schema import CATALOG_SCHEMA
from robodata.curate import budget
from robodata.curate.keyscan import CatalogSource, DataFile
from robodata.curate.spec import CurationSpec

HASH, ROW = "__hash", "__row"
_TOP = 2**64 - 1
_SAMPLE_FILES = 4  # files read first to place each group's threshold (`_start`)
_DTYPES = pl.Schema(pl.from_arrow(CATALOG_SCHEMA.empty_table()).schema)  # type: ignore[union-attr]


@dataclass(frozen=True)
class Prefix:
    """What `decide` found: the candidates it read and what the budget keeps of them."""

    first: pl.DataFrame  # episode_id (null: the sidecars hold them), duration_s, the row address
    decided: budget.Decision  # positions into `first`


class Unproven(Exception):
    """Why the prefixes cannot decide a spec (curation then takes the key scan)."""


def needs(spec: CurationSpec, source: CatalogSource) -> CurationSpec:
    """The spec whose predicate the prefixes evaluate (its filters on partition columns left out:
    the files they reject are not in `source`); raises Unproven where `decide` cannot serve it."""
    if spec.budget.total_hours is None and not spec.budget.per_group_hours:
        raise Unproven("no hour caps: every candidate is kept")
    if spec.exclude.episode_ids or spec.exclude.episode_ids_file:
        raise Unproven("it excludes episode ids, which heads do not hold")
    if not source.files:
        raise Unproven("no data files")
    if any(f.column in source.partitions for f in spec.filters) and not source.pruned:
        raise Unproven("its filters on partition columns did not prune the files")
    if bare := [f.path for f in source.files if f.sidecar is None or f.sidecar.head is None]:
        raise Unproven(f"{len(bare)} data files without a head (e.g. {bare[0]}): catalog optimize writes them")
    return replace(spec, filters=[f for f in spec.filters if f.column not in source.partitions])


def decide(spec: CurationSpec, source: CatalogSource, predicate: pl.Expr | None, mix_terms: list[pl.Expr]) -> Prefix:
    """The candidates under the budget's thresholds and what it keeps of them; raises Unproven
    (see the module docstring), or ValueError / OSError where a head fails a check or a read.
    `predicate`: the spec's (from `needs`), without its container term; `mix_terms`: its terms
    that read the mix column alone. Numbers `source.files` as a key scan would (their row
    addresses)."""
    group_col = spec.mix.by if spec.mix else None
    read = set(predicate.meta.root_names()) if predicate is not None else set()
    if lacking := sorted((read | ({group_col} if group_col else set())) - set(headpack.COLUMNS)):
        raise Unproven(f"heads do not hold {', '.join(lacking)}")
    source.number(source.files)
    heads: list[tuple[DataFile, HeadFile]] = []
    try:
        for f in source.files:
            assert f.sidecar is not None and f.sidecar.head is not None  # needs() checked
            h = HeadFile(f.sidecar.head, f.rows)
            heads.append((f, h))
            if h.order_salt != budget.salt(spec):
                raise Unproven(f"heads in the order of salt {h.order_salt!r}, not the spec's")
            if h.footer_crc != source.footer_crc(f):
                raise Unproven(f"{f.sidecar.head} was written for another data file")
        return _decide(spec, heads, predicate, mix_terms, sorted(read | {"duration_s"}))
    finally:
        for _, h in heads:
            h.close()


def _decide(
    spec: CurationSpec,
    heads: list[tuple[DataFile, HeadFile]],
    predicate: pl.Expr | None,
    mix_terms: list[pl.Expr],
    columns: list[str],
) -> Prefix:
    """`decide` over its opened heads; `columns`: those the predicate reads, and duration_s."""
    group_col = spec.mix.by if spec.mix else None
    names = _groups(group_col, [h for _, h in heads], mix_terms)
    shares, caps = budget.caps_of(spec, names)
    if not np.isfinite(caps).all():
        raise Unproven("a group without a cap keeps every candidate")
    rows = sum(f.rows for f, _ in heads)
    total = math.nextafter(math.fsum(h.duration_sum for _, h in heads), math.inf)
    bound = budget.error_slope(total, rows)
    if _unsure(heads, columns, predicate, group_col, names):
        raise Unproven("it admits a row whose duration is negative or not finite")
    frac = _start(heads, caps, total, columns, predicate, group_col, names)
    done: np.ndarray | None = None  # the thresholds read up to (None: nothing read yet)
    parts: list[pl.DataFrame] = []
    while True:
        limit = _limits(frac)
        parts.append(_read(heads, done, limit, columns, predicate, group_col, names))
        done = limit
        cands = pl.concat(parts, how="vertical") if len(parts) > 1 else parts[0]
        parts = [cands]
        codes = cands["__g"].to_numpy()
        h, dur = cands[HASH].to_numpy(), cands["duration_s"].fill_null(0.0).to_numpy()
        keep, pending = _cuts(codes, h, dur, caps, bound, limit < np.uint64(_TOP))
        if keep is None:
            raise Unproven("equal hashes, or a running sum within rounding of a cap")
        if not pending:
            break
        if any(limit[g] == _TOP for g in pending):  # the shares differ from the prefixes'
            raise Unproven("a group its mix admits has no candidate")
        for g in pending:  # its cap lies past its threshold: widened to where its pace reaches it
            s = float(dur[codes == g].sum())
            frac[g] = min(1.0, max(frac[g] * 1.5, frac[g] * caps[g] / s * 1.25 if s > 0 else frac[g] * 4))
    first = pl.DataFrame(
        {
            "episode_id": pl.repeat(None, len(cands), dtype=pl.String, eager=True),
            "duration_s": cands["duration_s"],
            "__row": cands[ROW],
        }
    )
    return Prefix(first, budget.Decision(keep, names, codes, dur, shares))


def _start(
    heads: list[tuple[DataFile, HeadFile]],
    caps: np.ndarray,
    total: float,
    columns: list[str],
    predicate: pl.Expr | None,
    group_col: str | None,
    names: list[str],
) -> np.ndarray:
    """Each group's first threshold, as a fraction of the hash range: where a sample of
    `_SAMPLE_FILES` files spread over the catalog puts its cap, with a margin (only the cost
    depends on it: a group short of its cap is widened). Without a sample (few files), twice
    the cap's share of all durations."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        base = np.minimum(1.0, 2.0 * caps / total) if total > 0 else np.ones(len(caps))
    if len(heads) <= 2 * _SAMPLE_FILES:
        return base
    sample = heads[:: len(heads) // _SAMPLE_FILES][:_SAMPLE_FILES]
    share = sum(f.rows for f, _ in sample) / max(1, sum(f.rows for f, _ in heads))
    f = np.minimum(1.0, 8.0 * base)
    for _ in range(3):
        limit = _limits(f)
        got = _read(sample, None, limit, columns, predicate, group_col, names)
        seen = np.bincount(
            got["__g"].to_numpy(), weights=got["duration_s"].fill_null(0.0).to_numpy(), minlength=len(caps)
        )
        if (seen > 0).all() or (f >= 1.0).all():
            break
        f = np.where(seen > 0, f, np.minimum(1.0, 4.0 * f))
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        want = np.where(seen > 0, 1.3 * caps * f * share / seen, base)
    return np.minimum(1.0, np.maximum(base, want))


def _limits(frac: np.ndarray) -> np.ndarray:
    """Each group's hash threshold for a fraction of the hash range (1: all of it)."""
    return np.array([_TOP if f >= 1.0 else int(f * 2.0**64) for f in frac], dtype=np.uint64)


def _groups(group_col: str | None, heads: list[HeadFile], mix_terms: list[pl.Expr]) -> list[str]:
    """The groups that may have candidates (sorted, nulls as ""): the mix column's values in the
    files that its own terms of the predicate admit."""
    if group_col is None:
        return ["all"]
    values: set[str | None] = set()
    for h in heads:
        held = h.values(group_col)
        if held is None:
            raise Unproven(f"{h.path}: {group_col} is not a coded column")
        values |= set(held[0]) | ({None} if held[1] else set())
    frame = pl.DataFrame({group_col: sorted(values, key=lambda v: (v is None, v or ""))}, schema={group_col: pl.String})
    for term in mix_terms:
        frame = frame.filter(term)
    return sorted({v or "" for v in frame[group_col].to_list()})


def _cuts(
    codes: np.ndarray, h: np.ndarray, dur: np.ndarray, caps: np.ndarray, bound: float, partial: np.ndarray
) -> tuple[np.ndarray | None, list[int]]:
    """(positions kept so far, ascending; None: undecidable) and the groups whose cap lies past
    their threshold (`partial`: below the top), or that have no candidate under it."""
    order = np.argsort(codes, kind="stable")
    edges = np.searchsorted(codes[order], np.arange(len(caps) + 1))
    kept, pending = [], []
    for g in range(len(caps)):
        at = order[edges[g] : edges[g + 1]]
        cut = budget.prefix_cut(h[at], dur[at], float(caps[g]), bound, bool(partial[g]))
        if cut is False:
            return None, []
        if cut is None or not len(at):
            pending.append(g)
            continue
        kept.append(at[cut])
    return np.sort(np.concatenate(kept)) if kept else np.zeros(0, np.int64), pending


def _read(
    heads: list[tuple[DataFile, HeadFile]],
    done: np.ndarray | None,
    limit: np.ndarray,
    columns: list[str],
    predicate: pl.Expr | None,
    group_col: str | None,
    names: list[str],
) -> pl.DataFrame:
    """The rows of each head whose hash lies in (`done`, `limit`] of their group and that pass the
    predicate: their hash, address, duration and group (`__g`, an index into `names`)."""
    spans: list[tuple] = []
    luts: dict[tuple, np.ndarray] = {}
    top = int(limit.max())
    for f, h in heads:
        with h.held():  # one file open at a time
            lo = h.end(int(done.min())) if done is not None else 0
            hi = max(lo, h.end(top))
            spans.append(_span(f, h, lo, hi, columns, group_col, names, luts, done, limit))
    return _passing(spans, columns, predicate)


def _unsure(
    heads: list[tuple[DataFile, HeadFile]],
    columns: list[str],
    predicate: pl.Expr | None,
    group_col: str | None,
    names: list[str],
) -> bool:
    """Whether a row whose duration is negative or not finite passes the predicate (the budget's
    proof then does not hold, and the key scan decides)."""
    spans: list[tuple] = []
    luts: dict[tuple, np.ndarray] = {}
    for f, h in heads:
        if h.bad_durations:  # those rows, on their own in the head (headpack.BAD)
            with h.held():
                spans.append(_span(f, h, 0, h.bad_durations, columns, group_col, names, luts, None, None, BAD))
    return bool(spans) and _passing(spans, columns, predicate).height > 0


def _span(
    f: DataFile,
    h: HeadFile,
    lo: int,
    hi: int,
    columns: list[str],
    group_col: str | None,
    names: list[str],
    luts: dict,
    done: np.ndarray | None,
    limit: np.ndarray | None,
    part: str = "",
) -> tuple:
    """Rows [lo, hi) of a head that may be candidates: with a container, in a group of `names`,
    their hash in (`done`, `limit`] of it (None: any); `part`: of these sections (headpack.BAD):
    (the file, their keys, their groups, their `columns`)."""
    keys = h.read(KEYS + part, lo, hi).values
    g = _group_of(h, group_col, names, lo, hi, luts, part)
    mine = (g >= 0) & (keys["loadable"] != 0)
    gm = np.where(mine, g, 0)
    if limit is not None:
        mine &= keys["hash"] <= limit[gm]
    if done is not None:
        mine &= keys["hash"] > done[gm]
    at = np.flatnonzero(mine)
    slices = {}
    for c in columns:
        s = h.read(c + part, lo, hi)
        slices[c] = headpack.Slice(s.values[at], s.present[at] if s.present is not None else None, s.dictionary)
    return f, keys[at], g[at], slices


def _passing(spans: list[tuple], columns: list[str], predicate: pl.Expr | None) -> pl.DataFrame:
    """The spans' rows that pass the predicate: hash, address, duration, group."""
    frame = pl.DataFrame(
        {
            HASH: pl.Series(_joined([s[1]["hash"] for s in spans], np.uint64)),
            ROW: pl.Series(_joined([s[1]["row"].astype(np.int64) + s[0].offset for s in spans], np.int64)),
            "__g": pl.Series(_joined([s[2] for s in spans], np.int32)),
            **{c: _column(c, [s[3][c] for s in spans]) for c in columns},
        }
    )
    return (frame.filter(predicate) if predicate is not None else frame).select(HASH, ROW, "duration_s", "__g")


def _group_of(
    h: HeadFile, group_col: str | None, names: list[str], lo: int, hi: int, luts: dict, part: str = ""
) -> np.ndarray:
    """Each row's group (index into `names`); -1 where its value is none of them (the mix terms
    reject it). Nulls count as "" (a null the terms reject is left to the predicate)."""
    if group_col is None:
        return np.zeros(hi - lo, np.int32)
    got = h.read(group_col + part, lo, hi)
    assert got.dictionary is not None  # _groups checked
    key = tuple(got.dictionary)
    lut = luts.get(key)
    if lut is None:
        index = {name: i for i, name in enumerate(names)}
        lut = luts[key] = np.array([index.get(v, -1) for v in key] + [index.get("", -1)], np.int32)
    return lut[got.values.astype(np.int64)]  # code -1: the last entry, nulls


def _joined(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)


def _column(name: str, slices: list[headpack.Slice]) -> pl.Series:
    """A catalog column of the spans' chosen rows, as the Parquet scan reads it (type and nulls)."""
    dtype = _DTYPES[name]
    if slices and slices[0].dictionary is not None:
        return _coded(name, dtype, slices)
    values = np.concatenate([s.values for s in slices]) if slices else np.zeros(0)
    absent = None
    if any(s.present is not None for s in slices):
        absent = ~np.concatenate([s.present if s.present is not None else np.ones(len(s.values), bool) for s in slices])
    series = pl.Series(name, pa.array(values, mask=absent))
    return series.cast(pl.Int64).cast(dtype) if dtype == pl.Datetime("us", "UTC") else series.cast(dtype)


def _coded(name: str, dtype: pl.DataType, slices: list[headpack.Slice]) -> pl.Series:
    """A coded column: each file's codes mapped into one list of values, then gathered."""
    if any(s.dictionary is None for s in slices):
        raise ValueError(f"column {name}: coded in one head, not in another")
    values, luts = rowpack.unify(s.dictionary or [] for s in slices)
    codes = [np.append(lut, -1)[s.values.astype(np.int64)] for lut, s in zip(luts, slices, strict=True)]  # -1: null
    joined = np.concatenate(codes) if codes else np.zeros(0, np.int32)
    at = pl.Series(pa.array(joined, mask=joined < 0))
    return pl.Series(name, values, dtype=dtype).gather(at).alias(name)
