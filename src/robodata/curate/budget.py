"""Mixing weights and hour budgets, decided on keys only (durations, groups, budget hashes).

A capped group keeps its episodes in budget order, `stable_hash64(episode_id, salt + "/budget")`
(robodata.catalog.order), ties by episode_id, while its hours stay within its cap. Two rules, by
the spec's `version` (robodata.curate.spec):

* **Version 1** (`exact_keep`), the arithmetic manifests were written with before, kept bit for
  bit: the candidates in (group, hash, episode_id) order, one running float64 sum over all groups,
  an episode kept iff that sum minus the sum at its group's start is <= the cap; `total_hours` is
  split over the groups present among *all* candidates. Both facts need every candidate, so
  version 1 is evaluated on all of them (robodata.curate.select's plain scan).
* **Version 2** (`prefix_keep`): each capped group keeps the longest prefix of its own order whose
  own running sum stays within its cap; `total_hours` is split by the weights the spec names
  (`caps_of`). A group's decision then depends on its prefix only: read up to a hash threshold, it
  is decided as soon as its running sum leaves the cap there (robodata.curate.ordered).

Nulls count as 0 hours. A NaN duration makes a running sum NaN: under version 1 it drops every
later candidate in (group, hash) order, other groups included (a quirk kept for the hashes'
sake); under version 2 it ends its group's prefix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from robodata.catalog.order import budget_salt, stable_hash64
from robodata.curate.spec import CurationSpec


@dataclass(frozen=True)
class Plan:
    """What the budget keeps of the candidate rows and their sampling weights."""

    keep: np.ndarray  # int64 positions of kept candidate rows, in episode_id order
    weight: np.ndarray  # float64 sampling weight of each kept row (same order)
    groups: dict[str, dict[str, float]]  # group -> {episodes, hours, share}


def salt(spec: CurationSpec) -> str:
    """The salt of the spec's budget order."""
    return budget_salt(spec.split.salt)


def capped(spec: CurationSpec) -> bool:
    """Whether the spec caps any hours (else every candidate is kept)."""
    return spec.budget.total_hours is not None or bool(spec.budget.per_group_hours)


def plan(
    spec: CurationSpec, ids: pl.Series, durations: pl.Series, group: pl.Series | None, hashes: np.ndarray | None = None
) -> Plan:
    """Budget and weights for candidate rows (any order; episode_id unique among them).

    Args:
        spec: the validated spec (version, mix, budget, split salt).
        ids: episode_id of each candidate.
        durations: duration_s of each candidate (nulls count as 0).
        group: the `mix.by` column of each candidate (None without a mix).
        hashes: each candidate's budget hash (uint64), when known (else computed from `ids`).

    Returns:
        The Plan: kept positions in episode_id order, their weights, per-group stats.
    """
    n = len(ids)
    dur = durations.fill_null(0.0).cast(pl.Float64).to_numpy()
    names, codes = (["all"], np.zeros(n, dtype=np.int32)) if group is None else group_codes(group)
    _, caps = caps_of(spec, names)
    if not np.isfinite(caps).any():  # nothing capped among these groups: every candidate
        keep = np.ones(n, dtype=bool)
    else:
        h = hashes if hashes is not None else stable_hash64(ids, salt(spec))
        rule = exact_keep if spec.version == 1 else prefix_keep
        keep = rule(codes, dur, caps, h, ids)[0]
    at = np.flatnonzero(keep)
    return weigh(spec, names, codes, dur, at[id_order(ids, at)])


def caps_of(spec: CurationSpec, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(each group's share of the mix, its cap in seconds; inf: uncapped) for the groups `names`:
    version 1 normalizes the shares over these groups (those present among all candidates),
    version 2 over the weights the spec names."""
    weights = np.array([spec.mix.weight(g) if spec.mix else 1.0 for g in names], dtype=np.float64)
    total_w = weights.sum() if spec.version == 1 or spec.mix is None else sum(spec.mix.weights.values())
    shares = weights / total_w if total_w > 0 else weights
    caps = np.full(len(names), np.inf)
    if spec.budget.total_hours is not None:
        caps = np.minimum(caps, spec.budget.total_hours * 3600.0 * shares)
    for i, g in enumerate(names):
        if g in spec.budget.per_group_hours:
            caps[i] = min(caps[i], spec.budget.per_group_hours[g] * 3600.0)
    return shares, caps


def weigh(spec: CurationSpec, names: list[str], codes: np.ndarray, dur: np.ndarray, kept: np.ndarray) -> Plan:
    """The Plan of the kept candidates `kept` (positions, in episode_id order): each group's share
    of the mix spread over its episodes by duration. Version 1's shares are `caps_of`'s; version 2's
    are normalized over the groups kept, so the weights sum to 1."""
    kcodes, kdur = codes[kept], dur[kept]
    group_s = np.bincount(kcodes, weights=kdur, minlength=len(names))  # in episode_id order, as before
    counts = np.bincount(kcodes, minlength=len(names))
    shares = caps_of(spec, names)[0]
    if spec.version != 1:
        present = np.where(counts > 0, [spec.mix.weight(g) if spec.mix else 1.0 for g in names], 0.0)
        shares = present / present.sum() if present.sum() > 0 else present
    with np.errstate(divide="ignore", invalid="ignore"):
        weight = np.where(group_s[kcodes] > 0, shares[kcodes] * kdur / group_s[kcodes], 0.0)
    groups = {
        str(g): {"episodes": int(counts[i]), "hours": float(group_s[i] / 3600.0), "share": float(shares[i])}
        for i, g in enumerate(names)
        if counts[i] > 0
    }
    return Plan(kept.astype(np.int64), weight, groups)


def group_codes(group: pl.Series) -> tuple[list[str], np.ndarray]:
    """(sorted distinct groups, nulls as "", and each row's index into them)."""
    values = group.cast(pl.String).fill_null("")
    names = values.unique().sort().to_list()
    codes = (values.rank("dense") - 1).cast(pl.Int32).to_numpy() if len(values) else np.zeros(0, np.int32)
    return names, codes


def _order(codes: np.ndarray, h: np.ndarray, ids: pl.Series) -> np.ndarray:
    """Positions in (group, hash, episode_id) order (ids decide only between equal hashes)."""
    order = np.lexsort((h, codes))
    sc, sh = codes[order], h[order]
    if len(order) > 1 and bool(((sc[1:] == sc[:-1]) & (sh[1:] == sh[:-1])).any()):
        frame = pl.DataFrame({"g": codes, "h": h, "id": ids.cast(pl.String)})
        order = frame.with_row_index("at").sort(["g", "h", "id", "at"])["at"].to_numpy().astype(np.int64)
    return order


def exact_keep(
    codes: np.ndarray, dur: np.ndarray, caps: np.ndarray, h: np.ndarray, ids: pl.Series
) -> tuple[np.ndarray, np.ndarray]:
    """Version 1's rule (module docstring): (kept mask, every group decided)."""
    order = _order(codes, h, ids)
    sorted_codes = codes[order]
    cum = np.cumsum(dur[order])
    starts = np.searchsorted(sorted_codes, np.arange(len(caps)))
    base = np.concatenate([[0.0], cum])[starts]
    with np.errstate(invalid="ignore"):  # inf - inf (an infinite duration): NaN, not kept, as before
        within = cum - base[sorted_codes]
    keep = np.ones(len(codes), dtype=bool)
    keep[order] = within <= caps[sorted_codes]
    return keep, np.ones(len(caps), dtype=bool)


def prefix_keep(
    codes: np.ndarray, dur: np.ndarray, caps: np.ndarray, h: np.ndarray, ids: pl.Series
) -> tuple[np.ndarray, np.ndarray]:
    """Version 2's rule (module docstring) over these candidates: (kept mask, for each group whether
    its cut lies among them). A capped group that is not decided keeps them all: given a prefix of
    its order (robodata.curate.ordered), its cut lies further."""
    order = _order(codes, h, ids)
    sorted_codes = codes[order]
    edges = np.searchsorted(sorted_codes, np.arange(len(caps) + 1))
    keep = np.zeros(len(codes), dtype=bool)
    decided = np.zeros(len(caps), dtype=bool)
    for g in range(len(caps)):
        at = order[edges[g] : edges[g + 1]]
        if not np.isfinite(caps[g]):  # uncapped: every candidate
            keep[at] = True
            continue
        with np.errstate(invalid="ignore"):
            over = np.flatnonzero(~(np.cumsum(dur[at]) <= caps[g]))  # NaN: over
        decided[g] = len(over) > 0
        keep[at[: over[0] if len(over) else len(at)]] = True
    return keep, decided


def id_order(ids: pl.Series, positions: np.ndarray) -> np.ndarray:
    """Indices into `positions` ordering them by episode_id (ties keep their order)."""
    if len(positions) == 0:
        return positions
    frame = pl.DataFrame({"id": ids.gather(positions)}).with_row_index("at")
    return frame.sort(["id", "at"])["at"].to_numpy().astype(np.int64)  # ties by position: a stable sort
