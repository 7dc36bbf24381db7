"""Budgeted specs over the catalog's budget order: only the row groups under a hash threshold.

The catalog stores each episode's budget hash for the site's salt (`budget_hash`,
robodata.catalog.order) and `catalog optimize` sorts each day by it in small row groups. Under
version 2's rule (robodata.curate.budget.prefix_keep) a capped group keeps a prefix of its hash
order, decided by that prefix alone. So a spec whose `split.salt` is the table's reads, with its
predicate, the rows whose `budget_hash` lies under a threshold: one lazy Polars scan of the Delta
table (`pl.scan_delta`), where Parquet's per-row-group min/max statistics of `budget_hash` leave
out every row group above it, on a local disk as on object storage (ranged reads of those row
groups). The same scan reads the manifest columns of those rows. A group whose running sum does
not leave its cap under the threshold is read further, in the next hash range only, until every
group is decided (at worst the whole range).

Thresholds: each scan of every file costs at least a row group a file, so the first one aims to
decide every group at once: a sample of `SAMPLE_DAYS` days spread over those the spec reads (their
rows under `SAMPLE_ROWS` rows' share of the range) puts each group's cap, and the threshold lies
three standard errors of the sample's hours past the furthest (`FIRST_ROWS` rows' share where there
are few days or the sample shows no group): past the cut it only wastes rows of row groups read
anyway, or one more row group a file. The next ones extrapolate each undecided group's hours so
far (every file's rows under the last threshold) to its cap, with `MARGIN`.

It applies (`why_not`) to version-2 specs with hour caps whose salt the table's hashes follow,
whose mix groups are named (a filter on the mix column with == / in, or `default_weight: 0`: a
group that no threshold shows must be known to be absent) and all capped. Anything else is
evaluated by robodata.curate.select's plain scan, with the same result, and so is a table with a
row without a budget_hash (a writer that bypassed Catalog): the scans read every row group holding
a null, and one such row gives up (`Unhashed`).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
from deltalake import DeltaTable

from robodata.catalog import order
from robodata.curate import budget
from robodata.curate.predicate import possible_groups
from robodata.curate.spec import CurationSpec

FIRST_ROWS = 1 << 18  # rows of the table under the first threshold, where there is no sample
SAMPLE_DAYS = 4  # days whose rows place the first threshold
SAMPLE_ROWS = 1 << 15  # rows of the sample days under its threshold
MARGIN = 1.05  # a threshold's margin over a cut extrapolated from every file's rows
MIN_MARGIN = 1.02  # the least margin over a cut estimated from the sample
_LOW, _HIGH = -(2**63), 2**63 - 1  # the range of budget_hash


class Unhashed(Exception):
    """A row without a budget_hash: the order cannot say which rows lie under a threshold."""


def hashed(spec: CurationSpec, dt: DeltaTable) -> str | None:
    """Why the table's `budget_hash` is not the spec's budget order at this version (None: it is)."""
    salt = order.ordered_salt(dt)
    if salt is None:
        return f"the catalog's budget hashes are not complete for its salt {order.table_salt(dt)!r} (catalog optimize)"
    if salt != spec.split.salt:
        return f"split.salt {spec.split.salt!r} is not the catalog's budget salt {salt!r}"
    return None


def why_not(spec: CurationSpec, dt: DeltaTable) -> str | None:
    """Why this route does not apply to `spec` over `dt` (None: it does); see the module docstring."""
    if not budget.capped(spec):
        return "no hour caps"
    if spec.version == 1:
        return "version 1 (its rule needs every candidate)"
    groups = possible_groups(spec)
    if groups is None:
        by = spec.mix.by if spec.mix else ""
        return f"the groups of mix.by {by!r} are not named (a filter ==/in, or default_weight 0)"
    if not np.isfinite(budget.caps_of(spec, sorted(groups))[1]).all():
        return "a group without an hour cap"
    return hashed(spec, dt)


def select_rows(
    spec: CurationSpec, dt: DeltaTable, lf: pl.LazyFrame, predicate: pl.Expr, fields: list[str]
) -> tuple[pl.DataFrame, budget.Plan]:
    """The kept rows' `fields` (sorted by episode_id) and the plan, from the rows of `lf` (the table's
    scan) that pass `predicate` under widening thresholds of `budget_hash`."""
    names = sorted(possible_groups(spec) or [])
    caps = budget.caps_of(spec, names)[1]
    by = spec.mix.by if spec.mix else None
    group = pl.col(by).cast(pl.String).fill_null("") if by else pl.lit("all")
    lf = lf.filter(predicate)  # terms on the table's own columns only: Polars pushes them into the scan
    frac = _first(spec, dt, lf, group, names, caps)
    rows = pl.DataFrame()
    todo, low = list(range(len(names))), None
    while True:
        high = _HIGH if frac >= 1.0 else int(_LOW + frac * 2.0**64)
        term = pl.col(order.COLUMN) <= high
        term = term if low is None else term & (pl.col(order.COLUMN) > low)
        if by:
            term = term & group.is_in([names[g] for g in todo])
        scan = lf.filter(term | pl.col(order.COLUMN).is_null())  # nulls: never skipped
        part = scan.select(*fields, group.alias("__group"), order.COLUMN).collect(engine="streaming")
        if part[order.COLUMN].null_count():
            raise Unhashed("rows without a budget_hash (written outside Catalog; catalog optimize computes them)")
        rows = pl.concat([rows, part], how="vertical") if rows.width else part
        codes, dur = _codes(rows, names), rows["duration_s"].fill_null(0.0).to_numpy()
        keep, decided = budget.prefix_keep(
            codes, dur, caps, order.unsigned(rows[order.COLUMN].to_numpy()), rows["episode_id"]
        )
        todo = [g for g in todo if not decided[g]]
        if not todo or high == _HIGH:
            break
        low, frac = high, _next(frac, [float(dur[codes == g].sum()) for g in todo], [caps[g] for g in todo])
    kept = rows.filter(pl.Series(keep)).sort("episode_id")
    plan = budget.weigh(
        spec, names, _codes(kept, names), kept["duration_s"].fill_null(0.0).to_numpy(), np.arange(kept.height)
    )
    return kept.select(fields), plan


def _codes(rows: pl.DataFrame, names: list[str]) -> np.ndarray:
    codes = rows["__group"].replace_strict(names, list(range(len(names))), return_dtype=pl.Int32)
    return codes.to_numpy().astype(np.int32, copy=False)  # no group named, no rows: int32 all the same


def _first(
    spec: CurationSpec, dt: DeltaTable, lf: pl.LazyFrame, group: pl.Expr, names: list[str], caps: np.ndarray
) -> float:
    """The first threshold (a fraction of the hash range): where each group's cap lies by a sample of
    `SAMPLE_DAYS` days spread over those the spec reads (the rows under `SAMPLE_ROWS` of theirs), with a
    margin; `FIRST_ROWS` of the table's rows where there are few days or the sample shows no group."""
    actions = pa.table(dt.get_add_actions(flatten=True)).select(["partition.day", "num_records"])
    per_day = pl.DataFrame(actions).rename({"partition.day": "day", "num_records": "rows"}).group_by("day").sum()
    per_day = per_day.filter(*[f.expr() for f in spec.filters if f.column == "day"]).sort("day")
    total = int(per_day["rows"].sum() or 0)
    first = min(1.0, FIRST_ROWS / max(1, total))
    if per_day.height <= SAMPLE_DAYS:
        return first
    sample = per_day.gather(np.linspace(0, per_day.height - 1, SAMPLE_DAYS).round().astype(np.int64))
    frac = min(1.0, SAMPLE_ROWS / max(1, int(sample["rows"].sum())))
    high = _HIGH if frac >= 1.0 else int(_LOW + frac * 2.0**64)
    d = pl.col("duration_s").fill_null(0.0)
    seen = (
        lf.filter(pl.col("day").is_in(sample["day"].implode()), pl.col(order.COLUMN) <= high)
        .group_by(group.alias("__group"))
        .agg(d.sum().alias("s"), d.len().alias("n"), (d.std() / d.mean()).fill_nan(None).alias("cv"))
        .collect(engine="streaming")
    )
    stats = {row["__group"]: row for row in seen.iter_rows(named=True)}
    scale = total / int(sample["rows"].sum()) / frac  # sample hours -> hours under the whole range
    wanted = [
        cap / (stats[g]["s"] * scale) * _margin(stats[g]["n"], stats[g]["cv"])
        for g, cap in zip(names, caps, strict=True)
        if g in stats and stats[g]["s"] > 0
    ]
    return min(1.0, max(wanted)) if wanted else first


def _margin(n: int, cv: float | None) -> float:
    """How far past a sample's estimate of a cut the threshold goes: three standard errors of a sum
    of `n` durations whose coefficient of variation is `cv` (at least MIN_MARGIN)."""
    return max(MIN_MARGIN, min(2.0, 1.0 + 3.0 * ((1.0 + (cv or 1.0) ** 2) / max(n, 1)) ** 0.5))


def _next(frac: float, filled: list[float], caps: list[float]) -> float:
    """The next threshold (a fraction of the hash range): where each undecided group's hours under
    `frac` put its cap, with a margin; twice `frac` where a group shows no hours yet."""
    wanted = [
        frac * MARGIN * cap / got if got > cap * 1e-9 else frac * 2.0 for got, cap in zip(filled, caps, strict=True)
    ]
    return min(1.0, max(frac * MARGIN, *wanted))
