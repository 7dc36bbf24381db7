"""A curation spec's predicate over catalog rows, as Polars expressions (robodata.curate.select
evaluates it by key scan, robodata.curate.prefix on the heads' prefixes)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from robodata.curate.filters import Filter, column_kind
from robodata.curate.keyscan import Excluded
from robodata.curate.spec import CurationSpec


def qc_predicate(allowed: list[str], loadable: bool = False, no_failed: bool = False) -> pl.Expr | None:
    """Rows a spec may select: a container, and no failed check outside `allowed` (["*"]: any).

    `loadable` / `no_failed`: known to hold for every row (robodata.curate.keyscan), so that term
    is left out; None when nothing is left to check.
    """
    terms = [] if loadable else [pl.col("uri").fill_null("") != ""]
    if "*" not in allowed and not no_failed:
        if not allowed:  # the default: no failed check at all (a length, not a per-element evaluation)
            terms.append(pl.col("qc_failed").list.len().fill_null(0) == 0)
        else:
            outside = pl.col("qc_failed").list.eval(~pl.element().is_in(list(allowed))).list.sum().fill_null(0)
            terms.append(outside == 0)
    return terms[0] & terms[1] if len(terms) == 2 else terms[0] if terms else None


def excluded_terms(spec: CurationSpec) -> Excluded:
    """The predicate's "string column not in values" terms, in `_predicate`'s order (exclusions
    are rare values: a data file's statistics often prove such a term for all its rows)."""
    terms: Excluded = []
    if spec.exclude.robots:
        terms.append(("robot", list(spec.exclude.robots)))
    if spec.exclude.batches:
        terms.append(("ingest_batch", list(spec.exclude.batches)))
    for f in spec.filters:
        if _excludes(f):
            terms.append((f.column, [str(v) for v in (f.value if isinstance(f.value, list) else [f.value])]))
    return terms


def _excludes(f: Filter) -> bool:
    """A `string column not in values` filter (one of `excluded_terms`)."""
    values = f.value if isinstance(f.value, list) else [f.value]
    return f.op in ("not_in", "!=") and column_kind(f.column) == "string" and all(isinstance(v, str) for v in values)


def spec_predicate(
    spec: CurationSpec,
    base_dir: Path | None,
    loadable: bool = False,
    no_failed: bool = False,
    proven: frozenset[int] = frozenset(),
) -> pl.Expr | None:
    """The spec's predicate; `loadable` / `no_failed`: see `qc_predicate`; `proven`: indices into
    `excluded_terms` known to hold for every row (left out)."""
    qc = qc_predicate(spec.allow_failed_checks, loadable, no_failed)
    k = 0  # the next excluded term's index, counted as `excluded_terms` does
    exprs: list[pl.Expr] = []
    ex = spec.exclude
    for values, column in ((ex.robots, "robot"), (ex.batches, "ingest_batch")):
        if values:
            if k not in proven:
                exprs.append(~pl.col(column).is_in(list(values)))
            k += 1
    for f in spec.filters:
        excluded = _excludes(f)
        if not (excluded and k in proven):
            exprs.append(f.expr())
        k += excluded
    if qc is not None:
        exprs.append(qc)
    if ids := spec.excluded_ids(base_dir):
        exprs.append(~pl.col("episode_id").is_in(ids))
    exprs += _weight_terms(spec)
    if not exprs:
        return None
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


def mix_terms(spec: CurationSpec) -> list[pl.Expr]:
    """The predicate's terms that read the mix column alone (its filters, the weights of 0)."""
    if spec.mix is None:
        return []
    return [f.expr() for f in spec.filters if f.column == spec.mix.by] + _weight_terms(spec)
