"""Evaluate a CurationSpec over the catalog with a lazy Polars scan.

Cost follows the selected set, not the catalog: the scan reads only the columns the
manifest and the spec need, `day` predicates prune partitions from the Delta log, and
the other predicates are pushed into the Parquet reader (per-file stats in the log,
per-row-group stats in the files). Mixing, budgets and the split then run eagerly on
the (already filtered) selection.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from robodata.catalog.rows import CatalogError
from robodata.catalog.schema import CATALOG_SCHEMA, MANIFEST_SCHEMA
from robodata.catalog.table import Catalog
from robodata.curate.spec import CurationSpec
from robodata.curate.stablehash import stable_hash64, unit_interval


@dataclass(frozen=True)
class Selection:
    """The evaluated spec: manifest rows and their provenance."""

    rows: pl.DataFrame  # MANIFEST_SCHEMA columns, sorted by episode_id
    catalog_version: int
    spec_hash: str
    groups: dict[str, dict[str, float]]  # group -> {episodes, hours, share}


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
        The Selection (rows sorted by episode_id, the resolved catalog version, the spec hash).

    Raises:
        ConfigError: the exclusion file is invalid or unreachable.
        CatalogError: the catalog or the version cannot be read, or evaluating over it failed.
    """
    version = catalog_version if catalog_version is not None else spec.catalog_version
    lf, resolved = catalog.scan(version)
    rows, groups = evaluate(spec, lf, base_dir=base_dir)
    return Selection(rows=rows, catalog_version=resolved, spec_hash=spec.spec_hash(base_dir), groups=groups)


def evaluate(
    spec: CurationSpec, lf: pl.LazyFrame, *, base_dir: Path | None = None
) -> tuple[pl.DataFrame, dict[str, dict[str, float]]]:
    """Manifest rows and per-group stats for the catalog rows `lf`.

    Args:
        spec: the validated spec.
        lf: catalog rows (CATALOG_SCHEMA columns), e.g. `Catalog.scan()`.
        base_dir: root of the spec's `exclude.episode_ids_file`.

    Returns:
        (rows with MANIFEST_SCHEMA columns sorted by episode_id, {group: {episodes, hours, share}}).

    Raises:
        ConfigError: the exclusion file is invalid or unreachable.
        CatalogError: the scan failed (e.g. the catalog lacks a column the spec names).
    """
    group_col = spec.mix.by if spec.mix else None
    needed = set(MANIFEST_SCHEMA.names) - {"split", "weight"}
    needed |= {f.column for f in spec.filters}
    if group_col:
        needed.add(group_col)
    if spec.exclude.robots:
        needed.add("robot")
    if spec.exclude.batches:
        needed.add("ingest_batch")
    needed |= {"qc_failed", "uri"}
    have = set(lf.collect_schema().names())
    lf = lf.select([c for c in CATALOG_SCHEMA.names if c in needed and c in have]).with_columns(
        [_null_column(c) for c in CATALOG_SCHEMA.names if c in needed and c not in have]
    )  # an older, not yet migrated catalog: its rows hold nulls for the newer columns
    predicate = _predicate(spec, base_dir)
    if predicate is not None:
        lf = lf.filter(predicate)
    lf = lf.select(
        [c for c in MANIFEST_SCHEMA.names if c not in ("split", "weight")]
        + ([group_col] if group_col and group_col not in MANIFEST_SCHEMA.names else [])
    )
    try:
        df = lf.collect().sort("episode_id", maintain_order=True).rechunk()
    except pl.exceptions.PolarsError as exc:
        raise CatalogError(f"evaluating curation spec {spec.name!r} over the catalog failed: {exc}") from exc
    df, groups = _mix_and_budget(spec, df, group_col)
    split = unit_interval(stable_hash64(df["episode_id"].to_arrow(), spec.split.salt + "/split"))
    is_val = pl.Series(split < spec.split.val_fraction, dtype=pl.Boolean)
    df = df.with_columns(split=pl.when(is_val).then(pl.lit("val")).otherwise(pl.lit("train")))
    return df.select(MANIFEST_SCHEMA.names), groups


def _null_column(name: str) -> pl.Expr:
    dtype = pl.from_arrow(CATALOG_SCHEMA.empty_table()).schema[name]  # type: ignore[union-attr]
    return pl.lit(None, dtype=dtype).alias(name)


def qc_predicate(allowed: list[str]) -> pl.Expr:
    """Rows a spec may select: a container, and no failed check outside `allowed` (["*"]: any)."""
    loadable = pl.col("uri").fill_null("") != ""
    if "*" in allowed:
        return loadable
    outside = pl.col("qc_failed").list.eval(~pl.element().is_in(list(allowed))).list.sum().fill_null(0)
    return loadable & (outside == 0)


def _predicate(spec: CurationSpec, base_dir: Path | None) -> pl.Expr | None:
    exprs = [*(f.expr() for f in spec.filters), qc_predicate(spec.allow_failed_checks)]
    ex = spec.exclude
    if ids := spec.excluded_ids(base_dir):
        exprs.append(~pl.col("episode_id").is_in(ids))
    if ex.robots:
        exprs.append(~pl.col("robot").is_in(list(ex.robots)))
    if ex.batches:
        exprs.append(~pl.col("ingest_batch").is_in(list(ex.batches)))
    if spec.mix is not None:
        dropped = [g for g, w in spec.mix.weights.items() if w == 0]
        if spec.mix.default_weight == 0:
            exprs.append(pl.col(spec.mix.by).is_in([g for g, w in spec.mix.weights.items() if w > 0]))
        elif dropped:
            exprs.append(~pl.col(spec.mix.by).is_in(dropped))
    if not exprs:
        return None
    out = exprs[0]
    for e in exprs[1:]:
        out = out & e
    return out


def _mix_and_budget(spec: CurationSpec, df: pl.DataFrame, group_col: str | None):
    """Apply hour budgets and compute sampling weights; deterministic for a given input."""
    n = df.height
    dur = df["duration_s"].fill_null(0.0).to_numpy().astype(np.float64)
    if group_col is None:
        names, codes = ["all"], np.zeros(n, dtype=np.int64)
    else:
        keys = df[group_col].fill_null("")
        names = keys.unique().sort().to_list()
        codes = (keys.rank("dense").cast(pl.Int64) - 1).to_numpy()
    shares = np.array([spec.mix.weight(g) if spec.mix else 1.0 for g in names], dtype=np.float64)
    total_w = shares.sum()
    shares = shares / total_w if total_w > 0 else shares
    caps = np.full(len(names), np.inf)
    if spec.budget.total_hours is not None:
        caps = np.minimum(caps, spec.budget.total_hours * 3600.0 * shares)
    for i, g in enumerate(names):
        if g in spec.budget.per_group_hours:
            caps[i] = min(caps[i], spec.budget.per_group_hours[g] * 3600.0)
    keep = np.ones(n, dtype=bool)
    if np.isfinite(caps).any():
        order_hash = stable_hash64(df["episode_id"].to_arrow(), spec.split.salt + "/budget")
        order = np.lexsort((order_hash, codes))  # by group, then stable pseudo-random
        sorted_codes, sorted_dur = codes[order], dur[order]
        cum = np.cumsum(sorted_dur)
        starts = np.searchsorted(sorted_codes, np.arange(len(names)))
        base = np.concatenate([[0.0], cum])[starts]
        within = cum - base[sorted_codes]
        keep[order] = within <= caps[sorted_codes]
    group_s = np.bincount(codes[keep], weights=dur[keep], minlength=len(names))
    counts = np.bincount(codes[keep], minlength=len(names))
    with np.errstate(divide="ignore", invalid="ignore"):
        weight = np.where(group_s[codes] > 0, shares[codes] * dur / group_s[codes], 0.0)
    out = df.with_columns(weight=pl.Series(weight, dtype=pl.Float64)).filter(pl.Series(keep))
    groups = {
        str(g): {"episodes": int(counts[i]), "hours": float(group_s[i] / 3600.0), "share": float(shares[i])}
        for i, g in enumerate(names)
        if counts[i] > 0
    }
    return out, groups
