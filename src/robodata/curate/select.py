"""Evaluate a CurationSpec over the catalog: decide on keys, then fetch only the selected rows.

Cost follows the selection, not the catalog, and memory follows the keys of the rows that pass
the filters, never all their manifest columns:

1. **Keys**: a streaming Polars scan with the spec's predicate pushed into it (`day` predicates
   prune partitions; the others use Parquet's per-row-group statistics, see
   robodata.catalog.maintenance) yields only episode_id, duration_s, the mix group and the row's
   address of the rows that pass. Over a catalog's data files (robodata.curate.keyscan) files
   are scanned in groups by what is proven for all their rows (every row has a container, no
   row has a failed check), with those terms left out of their predicate.
2. **Budget and weights** on those keys (robodata.curate.budget): linear time, the same decisions
   bit for bit as the eager evaluation that wrote manifests before.
3. **Fetch**: the kept rows' manifest columns, taken by address from the data files' sidecars
   (robodata.catalog.sidecar, written by `catalog optimize`), the ids checked; for files without
   one, and for a LazyFrame given to `evaluate`, a second scan with `episode_id in <kept ids>`.
   A spec without hour caps keeps every candidate, so it reads the manifest columns in the
   first scan instead.

A budgeted spec over a catalog whose data files all have heads (robodata.catalog.headpack, in
the order of the spec's salt) skips steps 1 and 2: robodata.curate.prefix decides it on the
prefixes of the heads, where it can prove the same result, and step 3 fetches what it keeps.

The split is then taken over the kept rows only.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
from deltalake.exceptions import DeltaError

from robodata.catalog.rows import CatalogError
from robodata.catalog.schema import CATALOG_SCHEMA, MANIFEST_SCHEMA
from robodata.catalog.table import Catalog
from robodata.curate import budget, prefix
from robodata.curate.keyscan import CATALOG_TYPES, ROW, CatalogSource, PredicateFor
from robodata.curate.predicate import excluded_terms, mix_terms
from robodata.curate.predicate import spec_predicate as _predicate
from robodata.curate.spec import CurationSpec
from robodata.curate.stablehash import stable_hash64, unit_interval


@dataclass(frozen=True)
class Selection:
    """The evaluated spec: manifest rows and their provenance."""

    rows: pl.DataFrame  # MANIFEST_SCHEMA columns, sorted by episode_id
    catalog_version: int
    spec_hash: str
    groups: dict[str, dict[str, float]]  # group -> {episodes, hours, share}
    evaluated_by: str = ""  # "prefixes", or the scan that decided and why (see `select`)


def select(
    spec: CurationSpec, catalog: Catalog, *, base_dir: Path | None = None, catalog_version: int | None = None
) -> Selection:
    """Evaluate `spec` over the catalog at `catalog_version` (or the spec's pin, or latest).

    Args:
        spec: the validated spec.
        catalog: the catalog to read.
        base_dir: root of the spec's `exclude.episode_ids_file` (the spec file's folder).
        catalog_version: overrides the spec's `catalog_version` pin when given.

    Returns:
        The Selection (rows sorted by episode_id, the resolved catalog version, the spec hash, how
        it was evaluated: "prefixes" (robodata.curate.prefix), "key scan: <why not the
        prefixes>", "key scan" (no caps) or "scan" (a table without row addresses)).

    Raises:
        ConfigError: the exclusion file is invalid or unreachable.
        CatalogError: the catalog or the version cannot be read, or evaluating over it failed.
    """
    version = catalog_version if catalog_version is not None else spec.catalog_version
    dt = catalog.table(version)
    try:
        source = CatalogSource(dt, catalog.config.storage_options, spec.filters)
    except DeltaError as exc:
        raise CatalogError(f"cannot read the data files of catalog {catalog.uri}: {exc}") from exc
    if source.usable:
        rows, groups, how = _evaluate(spec, base_dir, _Addressed(spec, source))
    else:
        rows, groups, how = _evaluate(spec, base_dir, _Plain(spec, source.plain()))
    version = dt.version()
    return Selection(
        rows=rows, catalog_version=version, spec_hash=spec.spec_hash(base_dir), groups=groups, evaluated_by=how
    )


def evaluate(
    spec: CurationSpec, lf: pl.LazyFrame, *, base_dir: Path | None = None
) -> tuple[pl.DataFrame, dict[str, dict[str, float]]]:
    """Manifest rows and per-group stats for the catalog rows `lf`.

    Args:
        spec: the validated spec.
        lf: catalog rows (CATALOG_SCHEMA columns; episode_id unique), e.g. `Catalog.scan()`.
        base_dir: root of the spec's `exclude.episode_ids_file`.

    Returns:
        (rows with MANIFEST_SCHEMA columns sorted by episode_id, {group: {episodes, hours, share}}).

    Raises:
        ConfigError: the exclusion file is invalid or unreachable.
        CatalogError: the scan failed (e.g. the catalog lacks a column the spec names).
    """
    rows, groups, _ = _evaluate(spec, base_dir, _Plain(spec, lf))
    return rows, groups


def _evaluate(spec: CurationSpec, base_dir: Path | None, source: _Plain | _Addressed) -> tuple[pl.DataFrame, dict, str]:
    """(rows, groups, how they were decided: see `select`)."""
    group_col = spec.mix.by if spec.mix else None
    fields = [c for c in MANIFEST_SCHEMA.names if c not in ("split", "weight")]

    def predicate_for(loadable: bool, no_failed: bool, proven: frozenset[int] = frozenset()) -> pl.Expr | None:
        return _predicate(spec, base_dir, loadable, no_failed, proven)

    capped = spec.budget.total_hours is not None or bool(spec.budget.per_group_hours)
    how = "key scan" if isinstance(source, _Addressed) else "scan"
    prefixed = None
    if capped and isinstance(source, _Addressed):
        prefixed, how = _prefixed(spec, base_dir, source, fields)
    if prefixed is not None:
        rows, planned = prefixed
    elif capped:
        try:
            rows, planned = _capped(spec, source, predicate_for, fields, ids_aside=True)
        except _Retry:  # a sidecar failed a check, or equal hashes need the ids: read them from Parquet
            rows, planned = _capped(spec, source, predicate_for, fields, ids_aside=False)
    else:  # every candidate is kept: the one scan reads the manifest columns
        group = [pl.col(group_col).alias("__group")] if group_col else []
        first = _collect(spec, source.keys(predicate_for, False).select(*fields, *group)).rechunk()
        planned = budget.plan(spec, first["episode_id"], first["duration_s"], first["__group"] if group_col else None)
        rows = first.select(fields).gather(planned.keep)  # a gather over many chunks is ~10x slower: rechunked
    df = rows.with_columns(weight=pl.Series(planned.weight, dtype=pl.Float64)).rechunk()
    split = unit_interval(stable_hash64(df["episode_id"], spec.split.salt + "/split"))
    is_val = pl.Series(split < spec.split.val_fraction, dtype=pl.Boolean)
    df = df.with_columns(split=pl.when(is_val).then(pl.lit("val")).otherwise(pl.lit("train")))
    return df.select(MANIFEST_SCHEMA.names), planned.groups, how


def _prefixed(
    spec: CurationSpec, base_dir: Path | None, source: _Addressed, fields: list[str]
) -> tuple[tuple[pl.DataFrame, budget.Plan] | None, str]:
    """The kept rows and the plan, decided on the prefixes of the data files' heads
    (robodata.curate.prefix), and "prefixes"; or None and why not (then the key scan decides:
    what cannot be proven there, or a read that failed a check)."""
    try:
        narrowed = prefix.needs(spec, source.source)
        no_failed = all(f.no_failed for f in source.source.files)
        predicate = _predicate(narrowed, base_dir, loadable=True, no_failed=no_failed)
        found = prefix.decide(narrowed, source.source, predicate, mix_terms(narrowed))
        rows, kept = source.fetch(found.first, found.decided.keep, fields, CATALOG_TYPES)
    except prefix.Unproven as exc:
        return None, f"key scan: {exc}"
    except _Retry:
        return None, "key scan: the sidecars' rows are not the heads'"
    except (ValueError, OSError, pl.exceptions.PolarsError) as exc:
        return None, f"key scan: a head or sidecar failed a check or a read: {exc}"
    return (rows, budget.weigh(found.decided, kept)), "prefixes"


class _Retry(Exception):
    """The evaluation with ids set aside cannot go on; it is redone with the ids read from Parquet."""


def _capped(
    spec: CurationSpec, source: _Plain | _Addressed, predicate_for: PredicateFor, fields: list[str], ids_aside: bool
) -> tuple[pl.DataFrame, budget.Plan]:
    """Keys only (the group as Categorical: 4 bytes a row), the budget on them, then the kept rows."""
    group_col = spec.mix.by if spec.mix else None
    lf = source.keys(predicate_for, ids_aside)
    group = [pl.col(group_col).fill_null("").cast(pl.Categorical).alias("__group")] if group_col else []
    first = _collect(spec, lf.select("episode_id", "duration_s", *group, *source.address))
    ids = first["episode_id"]
    stop = threading.Event()
    hasher = source.hashes(first, budget.salt(spec), stop)
    pool = ThreadPoolExecutor(1)
    try:
        under = source.under(first, budget.salt(spec))
        # Without `under`: every candidate's hash, started now: the usual budget caps every group,
        # so decide needs them all, and it computes the group codes and sums meanwhile (a subset is
        # then taken from them). A budget that needs none stops it (between two sidecars).
        every = pool.submit(hasher, None) if under is None else None
        decided = budget.decide(
            spec,
            first["duration_s"],
            first["__group"] if group_col else None,
            hasher if every is None else lambda at: every.result() if at is None else every.result()[at],
            ids if not ids.has_nulls() else None,
            under,
        )
    except (budget.NeedsIds, ValueError, OSError) as exc:
        if not ids.has_nulls():
            raise CatalogError(f"curation spec {spec.name!r}: cannot read the catalog's data files: {exc}") from exc
        raise _Retry() from exc
    finally:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
    rows, kept = source.fetch(first, decided.keep, fields, lf.collect_schema())
    return rows, budget.weigh(decided, kept)


class _Plain:
    """A LazyFrame of catalog rows: keys with the whole predicate, fetch by a second scan on the kept ids."""

    address: tuple[str, ...] = ()

    def __init__(self, spec: CurationSpec, lf: pl.LazyFrame):
        self.spec, self.source = spec, _with_missing_columns(spec, lf)
        self.filtered = self.source

    def keys(self, predicate_for: PredicateFor, ids_aside: bool) -> pl.LazyFrame:
        predicate = predicate_for(False, False, frozenset())
        self.filtered = self.source.filter(predicate) if predicate is not None else self.source
        return self.filtered

    def hashes(self, first: pl.DataFrame, salt: str, stop: threading.Event) -> budget.Hashes:
        return budget.id_hashes(first["episode_id"], salt)

    def under(self, first: pl.DataFrame, salt: str) -> budget.Under | None:
        return None

    def fetch(
        self, first: pl.DataFrame, keep: np.ndarray, fields: list[str], schema: pl.Schema
    ) -> tuple[pl.DataFrame, np.ndarray]:
        """The kept rows sorted by episode_id, and `keep` in that order."""
        kept = keep[budget.id_order(first["episode_id"], keep)]
        return _fetch(self.spec, self.source, self.filtered, first["episode_id"].gather(kept), fields), kept


class _Addressed:
    """A catalog's data files (robodata.curate.keyscan): per-file predicates, ids set aside where a
    sidecar holds them, fetch by row address."""

    address: tuple[str, ...] = (ROW,)

    def __init__(self, spec: CurationSpec, source: CatalogSource):
        self.spec, self.source = spec, source
        self.predicate_for: PredicateFor | None = None
        self._rows: tuple[pl.DataFrame, np.ndarray] | None = None  # the key scan's addresses, once

    def keys(self, predicate_for: PredicateFor, ids_aside: bool) -> pl.LazyFrame:
        self.predicate_for = predicate_for
        prepare = lambda lf: _with_missing_columns(self.spec, lf)  # noqa: E731
        return self.source.keys(predicate_for, prepare, ids_aside, excluded_terms(self.spec))

    def hashes(self, first: pl.DataFrame, salt: str, stop: threading.Event) -> budget.Hashes:
        ids = first["episode_id"]
        if not ids.has_nulls():
            return budget.id_hashes(ids, salt)

        def hashes(at: np.ndarray | None) -> np.ndarray:
            address = self._address(first)
            return self.source.hashes(
                address if at is None else address[at], ids if at is None else ids.gather(at), salt, stop
            )

        return hashes

    def _address(self, first: pl.DataFrame) -> np.ndarray:
        if self._rows is None or self._rows[0] is not first:
            self._rows = (first, first[ROW].to_numpy())  # UInt32 or UInt64: no cast (20M rows)
        return self._rows[1]

    def under(self, first: pl.DataFrame, salt: str) -> budget.Under | None:
        """The sidecars' prefixes under the budget's thresholds (CatalogSource.under), where they are
        in this salt's order and hold every candidate's id."""
        address = self._address(first)
        if not self.source.ordered_for(address, first["episode_id"], salt):
            return None
        return lambda last, codes: self.source.under(address, salt, last, codes)

    def fetch(
        self, first: pl.DataFrame, keep: np.ndarray, fields: list[str], schema: pl.Schema
    ) -> tuple[pl.DataFrame, np.ndarray]:
        """The kept rows sorted by episode_id, and `keep` in that order. Checked against the key scan:
        the ids it read and every row's duration (a sidecar's rows must be its data file's)."""
        ids = first["episode_id"].gather(keep)
        address = first[ROW].gather(keep).cast(pl.Int64).to_numpy()
        try:
            rows = self.source.fetch(address, ids, fields, schema)
        except pl.exceptions.PolarsError as exc:
            raise CatalogError(f"evaluating curation spec {self.spec.name!r} over the catalog failed: {exc}") from exc
        order = rows["episode_id"].arg_sort().to_numpy()
        rows, kept = rows.gather(order), keep[order]
        got = rows["episode_id"]
        unique = got.null_count() == 0 and (len(got) < 2 or bool((got.slice(1) > got.slice(0, len(got) - 1)).all()))
        same = unique and _same_numbers(rows["duration_s"], first["duration_s"].gather(kept))
        if same and rows["episode_id"].equals(first["episode_id"].gather(kept).fill_null(got), check_names=False):
            return rows, kept
        if ids.has_nulls():
            raise _Retry()
        assert self.predicate_for is not None  # keys() ran first
        plain = _Plain(self.spec, self.source.plain())
        plain.keys(self.predicate_for, False)
        return plain.fetch(first, keep, fields, schema)


def _same_numbers(a: pl.Series, b: pl.Series) -> bool:
    """Equal values, nulls and NaNs included (bit for bit but the sign of zero)."""
    return bool(a.equals(b, check_names=False, check_dtypes=False, null_equal=True)) or bool(
        (a.is_null() == b.is_null()).all() and ((a == b) | (a.is_nan() & b.is_nan())).fill_null(True).all()
    )


def _fetch(
    spec: CurationSpec, source: pl.LazyFrame, lf: pl.LazyFrame, ids: pl.Series, fields: list[str]
) -> pl.DataFrame:
    """`fields` of the rows with these (sorted, unique) ids. The ids passed the spec's predicate, so
    only its `day` filters (partition pruning) are repeated: the others would make Polars decode
    their columns for every row again (2x slower). Should ids repeat (input other than a catalog),
    the full predicate decides, as in the first scan."""
    member = pl.col("episode_id").is_in(ids.implode())
    days = [f.expr() for f in spec.filters if f.column == "day"]
    for scan in (source.filter(member, *days), lf.filter(member)):
        rows = _collect(spec, scan.select(fields)).sort("episode_id", maintain_order=True)
        if rows["episode_id"].equals(ids):
            return rows
    raise CatalogError(f"curation spec {spec.name!r}: the catalog changed between its two scans")


def _collect(spec: CurationSpec, lf: pl.LazyFrame) -> pl.DataFrame:
    try:
        return lf.collect(engine="streaming")
    except pl.exceptions.PolarsError as exc:
        raise CatalogError(f"evaluating curation spec {spec.name!r} over the catalog failed: {exc}") from exc


def _with_missing_columns(spec: CurationSpec, lf: pl.LazyFrame) -> pl.LazyFrame:
    """An older, not yet migrated catalog: the columns the spec reads that it lacks, as nulls."""
    group_col = spec.mix.by if spec.mix else None
    needed = set(MANIFEST_SCHEMA.names) - {"split", "weight"}
    needed |= {f.column for f in spec.filters} | {"qc_failed", "uri"}
    needed |= {group_col} if group_col else set()
    needed |= {"robot"} if spec.exclude.robots else set()
    needed |= {"ingest_batch"} if spec.exclude.batches else set()
    have = set(lf.collect_schema().names())
    missing = [c for c in CATALOG_SCHEMA.names if c in needed and c not in have]
    return lf.with_columns([pl.lit(None, dtype=CATALOG_TYPES[c]).alias(c) for c in missing]) if missing else lf
