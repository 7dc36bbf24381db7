"""A curation spec's predicate over catalog rows, as one Polars expression (robodata.curate.select
pushes it into its scans of the catalog)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from robodata.curate.spec import CurationSpec


def qc_predicate(allowed: list[str]) -> pl.Expr:
    """Rows a spec may select: a container, and no failed check outside `allowed` (["*"]: any)."""
    loadable = pl.col("uri").fill_null("") != ""
    if "*" in allowed:
        return loadable
    if not allowed:  # the default: no failed check at all (a length, not a per-element evaluation)
        return loadable & (pl.col("qc_failed").list.len().fill_null(0) == 0)
    outside = pl.col("qc_failed").list.eval(~pl.element().is_in(list(allowed))).list.sum().fill_null(0)
    return loadable & (outside == 0)


def spec_predicate(spec: CurationSpec, base_dir: Path | None) -> pl.Expr:
    """The spec's predicate: its filters, exclusions, QC and the mix groups of weight 0."""
    exprs: list[pl.Expr] = []
    ex = spec.exclude
    for values, column in ((ex.robots, "robot"), (ex.batches, "ingest_batch")):
        if values:
            exprs.append(~pl.col(column).is_in(list(values)))
    exprs += [f.expr() for f in spec.filters]
    exprs.append(qc_predicate(spec.allow_failed_checks))
    if ids := spec.excluded_ids(base_dir):
        exprs.append(~pl.col("episode_id").is_in(ids))
    exprs += _weight_terms(spec)
    # one n-ary AND: a chain of n binary ANDs costs Polars' optimizer O(n^2) memory and time
    # (1,000 `in` filters: 7.6 GB over a Delta scan; all_horizontal: linear, same pushdown)
    return exprs[0] if len(exprs) == 1 else pl.all_horizontal(exprs)


def _weight_terms(spec: CurationSpec) -> list[pl.Expr]:
    """The predicate's terms that leave out the mix groups of weight 0."""
    if spec.mix is None:
        return []
    dropped = [g for g, w in spec.mix.weights.items() if w == 0]
    if spec.mix.default_weight == 0:
        return [pl.col(spec.mix.by).is_in([g for g, w in spec.mix.weights.items() if w > 0])]
    return [~pl.col(spec.mix.by).is_in(dropped)] if dropped else []


def possible_groups(spec: CurationSpec) -> set[str] | None:
    """The mix groups the predicate admits, where it names them (a filter `mix.by` == / in values, or
    default_weight 0: the groups weighted > 0); None where any value may be a group."""
    if spec.mix is None:
        return {"all"}
    found: set[str] | None = None
    if spec.mix.default_weight == 0:
        found = {g for g, w in spec.mix.weights.items() if w > 0}
    for f in spec.filters:
        if f.column == spec.mix.by and f.op in ("==", "in"):
            values = {str(v) for v in (f.value if isinstance(f.value, list) else [f.value])}
            found = values if found is None else found & values
    return None if found is None else {g for g in found if spec.mix.weight(g) > 0}
