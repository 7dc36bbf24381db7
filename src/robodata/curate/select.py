"""Evaluate a CurationSpec over the catalog: one of two routes, the same rows either way.

* **Budget order** (robodata.curate.ordered): a version-2 spec with hour caps whose salt is the
  catalog's reads only the rows under a widening threshold of the stored `budget_hash` (Parquet
  statistics skip the other row groups), its manifest columns in the same scan.
* **Plain scan** (anything else): one lazy Polars scan of the Delta table with the spec's
  predicate pushed into it (`day` predicates prune partitions; the others use Parquet's
  statistics) yields the keys of the rows that pass (episode_id, duration_s, the mix group, and
  `budget_hash` where it is the spec's budget order, else the hash is computed from the ids); the
  budget decides on them (robodata.curate.budget), and a second scan fetches the kept rows'
  manifest columns by episode_id. A spec without hour caps keeps every candidate, so its one scan
  reads the manifest columns instead.

`Selection.evaluated_by` says which route decided and, for the plain scan, why not the other. The
split is then taken over the kept rows only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl
from deltalake.exceptions import DeltaError

from robodata.catalog import order
from robodata.catalog.rows import CatalogError
from robodata.catalog.schema import CATALOG_SCHEMA, MANIFEST_SCHEMA
from robodata.catalog.table import Catalog
from robodata.curate import budget, camera_aliases, ordered
from robodata.curate.predicate import spec_predicate
from robodata.curate.spec import CurationSpec

FIELDS = [c for c in MANIFEST_SCHEMA.names if c not in ("split", "weight")]
CATALOG_TYPES = pl.Schema(pl.from_arrow(CATALOG_SCHEMA.empty_table()).schema)  # type: ignore[union-attr]


@dataclass(frozen=True)
class Selection:
    """The evaluated spec: manifest rows and their provenance."""

    rows: pl.DataFrame  # MANIFEST_SCHEMA columns, sorted by episode_id
    catalog_version: int
    spec_hash: str
    groups: dict[str, dict[str, float]]  # group -> {episodes, hours, share}
    evaluated_by: str = ""  # "budget order", or "plain scan: <why not the budget order>"


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
        The Selection (rows sorted by episode_id, the resolved catalog version, the spec hash, and
        the route that decided: see the module docstring).

    Raises:
        ConfigError: the exclusion file is invalid or unreachable.
        CatalogError: the catalog or the version cannot be read, or evaluating over it failed.
    """
    version = catalog_version if catalog_version is not None else spec.catalog_version
    dt = catalog.table(version)
    try:
        why = ordered.why_not(spec, dt)
        lf = _with_missing_columns(spec, pl.scan_delta(dt))
        if why is None:
            try:
                rows, plan = ordered.select_rows(spec, dt, lf, spec_predicate(spec, base_dir), FIELDS)
            except ordered.Unhashed as exc:
                why = str(exc)
        if why is None:
            how = "budget order"
        else:
            rows, plan = _plain(spec, lf, base_dir, stored=ordered.hashed(spec, dt) is None)
            how = f"plain scan: {why}"
    except (DeltaError, pl.exceptions.PolarsError) as exc:
        raise CatalogError(f"evaluating curation spec {spec.name!r} over catalog {catalog.uri} failed: {exc}") from exc
    return Selection(_finish(spec, rows, plan), dt.version(), spec.spec_hash(base_dir), plan.groups, how)


def evaluate(
    spec: CurationSpec, lf: pl.LazyFrame, *, base_dir: Path | None = None
) -> tuple[pl.DataFrame, dict[str, dict[str, float]]]:
    """Manifest rows and per-group stats for the catalog rows `lf` (the plain scan).

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
    try:
        rows, plan = _plain(spec, _with_missing_columns(spec, lf), base_dir, stored=False)
    except pl.exceptions.PolarsError as exc:
        raise CatalogError(f"evaluating curation spec {spec.name!r} over the catalog failed: {exc}") from exc
    return _finish(spec, rows, plan), plan.groups


def _plain(
    spec: CurationSpec, lf: pl.LazyFrame, base_dir: Path | None, stored: bool
) -> tuple[pl.DataFrame, budget.Plan]:
    """The plain scan (module docstring); `stored`: `budget_hash` is the spec's budget order."""
    by = spec.mix.by if spec.mix else None
    filtered = lf.filter(spec_predicate(spec, base_dir))
    group = [pl.col(by).alias("__group")] if by else []
    if not budget.capped(spec):  # every candidate is kept: the one scan reads the manifest columns
        first = filtered.select(*FIELDS, *group).collect(engine="streaming").rechunk()
        plan = budget.plan(spec, first["episode_id"], first["duration_s"], first["__group"] if by else None)
        return first.select(FIELDS).gather(plan.keep), plan  # a gather over many chunks is ~10x slower: rechunked
    keys = filtered.select("episode_id", "duration_s", *group, *([order.COLUMN] if stored else []))
    first = keys.collect(engine="streaming")
    stored = stored and not first[order.COLUMN].null_count()  # a row written outside Catalog: its id's hash
    hashes = order.unsigned(first[order.COLUMN].to_numpy()) if stored else None
    plan = budget.plan(spec, first["episode_id"], first["duration_s"], first["__group"] if by else None, hashes)
    bound = []  # the kept rows lie under the largest kept hash: the other row groups are skipped
    if stored and len(plan.keep):
        bound = [pl.col(order.COLUMN) <= int(first[order.COLUMN].gather(plan.keep).max())]  # type: ignore[arg-type]
    return _fetch(spec, lf, filtered, first["episode_id"].gather(plan.keep), bound), plan


def _fetch(
    spec: CurationSpec, source: pl.LazyFrame, lf: pl.LazyFrame, ids: pl.Series, bound: list[pl.Expr]
) -> pl.DataFrame:
    """The manifest columns of the rows with these (sorted, unique) ids. The ids passed the spec's
    predicate, so only its `day` filters (partition pruning) and `bound` are repeated: the others
    would make Polars decode their columns for every row again. Should ids repeat (input other than
    a catalog), the full predicate decides, as in the first scan."""
    member = pl.col("episode_id").is_in(ids.implode())
    days = [f.expr() for f in spec.filters if f.column == "day"]
    for scan in (source.filter(member, *days, *bound), lf.filter(member)):
        rows = scan.select(FIELDS).collect(engine="streaming").sort("episode_id", maintain_order=True)
        if rows["episode_id"].equals(ids):
            return rows
    raise CatalogError(f"curation spec {spec.name!r}: the catalog changed between its two scans")


def _finish(spec: CurationSpec, rows: pl.DataFrame, plan: budget.Plan) -> pl.DataFrame:
    """The manifest rows: the kept rows (by episode_id) with their weights and split."""
    df = rows.with_columns(weight=pl.Series(plan.weight, dtype=pl.Float64)).rechunk()
    unit = order.unit_interval(order.stable_hash64(df["episode_id"], spec.split.salt + "/split"))
    is_val = pl.Series(unit < spec.split.val_fraction, dtype=pl.Boolean)
    df = df.with_columns(split=pl.when(is_val).then(pl.lit("val")).otherwise(pl.lit("train")))
    return df.select(MANIFEST_SCHEMA.names)


def _with_missing_columns(spec: CurationSpec, lf: pl.LazyFrame) -> pl.LazyFrame:
    """An older, not yet migrated catalog: the columns the spec reads that it lacks, as nulls; the
    camera roles resolved by the spec's alias map (robodata.curate.camera_aliases)."""
    group_col = spec.mix.by if spec.mix else None
    needed = set(FIELDS) | {f.column for f in spec.filters} | {"qc_failed", "uri"}
    needed |= {group_col} if group_col else set()
    needed |= {"robot"} if spec.exclude.robots else set()
    needed |= {"ingest_batch"} if spec.exclude.batches else set()
    have = set(lf.collect_schema().names())
    missing = [c for c in CATALOG_SCHEMA.names if c in needed and c not in have]
    lf = lf.with_columns([pl.lit(None, dtype=CATALOG_TYPES[c]).alias(c) for c in missing]) if missing else lf
    return camera_aliases.with_aliases(spec.cameras, lf)
