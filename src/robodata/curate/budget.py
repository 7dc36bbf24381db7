"""Mixing weights and hour budgets, decided on keys only (episode_id, duration, group).

The rule (robodata.curate.spec): a capped group keeps its episodes in
`stable_hash64(episode_id, salt + "/budget")` order while the running duration stays within the
cap. Manifests written before issue 28 define the exact arithmetic, and it is kept bit for bit:
the candidates (sorted by episode_id) are ordered by (group, hash), one running float64 sum runs
over all groups in that order (`np.cumsum`), and an episode is kept iff that sum minus the sum at
its group's start is <= the cap (`exact_keep`). That needs a full sort of every candidate.

`fast_keep` reaches the same decisions in linear time when it can prove them: with finite,
non-negative durations the running sum is monotone, so a group keeps a prefix of its hash order,
and the old value at the i-th episode of a group differs from the group's own prefix sum by at
most (i + 1) rounding errors of the total (the sum reached before the group cancels in the
subtraction, up to those roundings). So a group whose whole duration is below its cap by more
than that keeps everything without hashing, and a capped group takes its members under a hash
threshold (a little more than the cap's share of the group: from sidecars ordered by the salt,
`Under`, without the others' hashes; else by hashing every member), sorts only those and cuts
where the prefix sum leaves the cap by more than the bound. Anything it cannot prove (a prefix sum
within the bound of the cap, equal hashes, negative or non-finite durations) falls back to
`exact_keep`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from robodata.curate.spec import CurationSpec
from robodata.curate.stablehash import stable_hash64

_U = 2.0**-53  # unit roundoff of float64
_TWO64 = float(2**64)
_DENSE_IDS = 1 << 24  # group_codes: category ids below this map through a table as long as the largest


Hashes = Callable[[np.ndarray | None], np.ndarray]  # candidate positions (None: all) -> their stable_hash64
# (per-group hash thresholds, each candidate's group) -> (positions, ascending, of the candidates whose
# hash is <= their group's threshold, and their hashes), or None where it cannot tell (then: Hashes)
Under = Callable[[np.ndarray, np.ndarray], "tuple[np.ndarray, np.ndarray] | None"]


class NeedsIds(Exception):
    """Equal hashes among a group's candidates: the rule orders them by episode_id, not given."""


@dataclass(frozen=True)
class Plan:
    """What the budget keeps of the candidate rows and their sampling weights."""

    keep: np.ndarray  # int64 positions of kept candidate rows, in episode_id order
    weight: np.ndarray  # float64 sampling weight of each kept row (same order)
    groups: dict[str, dict[str, float]]  # group -> {episodes, hours, share}


@dataclass(frozen=True)
class Decision:
    """The kept candidates (`keep`, ascending positions) and what `weigh` needs of them."""

    keep: np.ndarray
    names: list[str]  # the groups
    codes: np.ndarray  # each candidate's group
    dur: np.ndarray  # each candidate's duration (nulls as 0)
    shares: np.ndarray  # each group's share of the mix


def id_hashes(ids: pl.Series, salt: str) -> Hashes:
    """`Hashes` computed from the candidates' episode ids."""
    return lambda at: stable_hash64(ids if at is None else ids.gather(at), salt)


def plan(spec: CurationSpec, ids: pl.Series, durations: pl.Series, group: pl.Series | None) -> Plan:
    """Budget and weights for candidate rows (any order; episode_id unique among them).

    Args:
        spec: the validated spec (mix, budget, split salt).
        ids: episode_id of each candidate.
        durations: duration_s of each candidate (nulls count as 0).
        group: the `mix.by` column of each candidate (None without a mix).

    Returns:
        The Plan: kept positions in episode_id order, their weights, per-group stats.
    """
    decided = decide(spec, durations, group, id_hashes(ids, salt(spec)), ids)
    return weigh(decided, decided.keep[id_order(ids, decided.keep)])


def salt(spec: CurationSpec) -> str:
    """The salt of the budget's hash order."""
    return salt_of(spec.split.salt)


def salt_of(split_salt: str) -> str:
    """The budget order's salt for a spec's `split.salt`."""
    return split_salt + "/budget"


def decide(
    spec: CurationSpec,
    durations: pl.Series,
    group: pl.Series | None,
    hashes: Hashes,
    ids: pl.Series | None,
    under: Under | None = None,
) -> Decision:
    """Which candidates the budget keeps, given their durations, groups and hashes (`ids`: their
    episode ids, which only equal hashes need; raises NeedsIds when None and they do). `under`:
    the candidates under hash thresholds, without hashing them all (a catalog's ordered sidecars)."""
    n = len(durations)
    dur = durations.fill_null(0.0).cast(pl.Float64).to_numpy()
    names, codes = (["all"], np.zeros(n, dtype=np.int32)) if group is None else group_codes(group)
    shares, caps = caps_of(spec, names)
    if not np.isfinite(caps).any():
        mask = np.ones(n, dtype=bool)
    else:
        fast = fast_keep(codes, dur, caps, hashes, under)
        mask = fast if fast is not None else exact_keep(codes, dur, caps, hashes, ids)
    return Decision(np.flatnonzero(mask).astype(np.int64), names, codes, dur, shares)


def caps_of(spec: CurationSpec, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(each group's share of the mix, its cap in seconds; inf: uncapped) for the groups `names`
    present among the candidates (the shares are normalized over them)."""
    shares = np.array([spec.mix.weight(g) if spec.mix else 1.0 for g in names], dtype=np.float64)
    total_w = shares.sum()
    shares = shares / total_w if total_w > 0 else shares
    caps = np.full(len(names), np.inf)
    if spec.budget.total_hours is not None:
        caps = np.minimum(caps, spec.budget.total_hours * 3600.0 * shares)
    for i, g in enumerate(names):
        if g in spec.budget.per_group_hours:
            caps[i] = min(caps[i], spec.budget.per_group_hours[g] * 3600.0)
    return shares, caps


def error_slope(total: float, n: int) -> float:
    """The rounding bound per position of `fast_keep`'s proof, for `n` candidates whose
    durations (finite, >= 0) sum to `total` (upper bounds of both give a valid, wider bound)."""
    return total * (1.0 + 4.0 * (n + 2) * _U) * 4.0 * _U


def weigh(decided: Decision, kept: np.ndarray) -> Plan:
    """The Plan of the kept candidates `kept` (`decided.keep` in episode_id order)."""
    names, shares = decided.names, decided.shares
    kcodes, kdur = decided.codes[kept], decided.dur[kept]
    group_s = np.bincount(kcodes, weights=kdur, minlength=len(names))  # in episode_id order, as before
    counts = np.bincount(kcodes, minlength=len(names))
    with np.errstate(divide="ignore", invalid="ignore"):
        weight = np.where(group_s[kcodes] > 0, shares[kcodes] * kdur / group_s[kcodes], 0.0)
    groups = {
        str(g): {"episodes": int(counts[i]), "hours": float(group_s[i] / 3600.0), "share": float(shares[i])}
        for i, g in enumerate(names)
        if counts[i] > 0
    }
    return Plan(kept.astype(np.int64), weight, groups)


def group_codes(group: pl.Series) -> tuple[list[str], np.ndarray]:
    """(sorted distinct groups, nulls as "", and each row's index into them); Categorical input is cheapest."""
    from robodata.curate import kernels  # Numba, loaded on first use

    cat = (group.fill_null("") if group.null_count() else group).cast(pl.Categorical)
    phys = cat.to_physical().to_numpy()
    if not len(phys):
        return [], np.zeros(0, dtype=np.int32)
    top = int(phys.max())
    if top < _DENSE_IDS:  # one pass: a row of each category (ids are the process's, usually few)
        first = np.full(top + 1, -1, dtype=np.int64)
        kernels.first_rows(phys, first)
        present = np.flatnonzero(first >= 0)
        values = cat.gather(first[present]).cast(pl.String).to_list()
    else:
        uniq = cat.unique()
        present, values = uniq.to_physical().to_numpy().astype(np.int64), uniq.cast(pl.String).to_list()
    names = sorted(values)
    rank = {name: i for i, name in enumerate(names)}
    codes = np.empty(len(phys), dtype=np.int32)  # 4 bytes a candidate
    if top < _DENSE_IDS:
        lut = np.zeros(top + 1, dtype=np.int32)
        lut[present] = [rank[v] for v in values]
        kernels.map_codes(phys, lut, codes)
    else:  # ids far apart (a process that made many categories): no table as large as the largest
        by_id = np.argsort(present)
        ranks = np.array([rank[v] for v in values], dtype=np.int32)[by_id]
        codes[:] = ranks[np.searchsorted(present[by_id], phys)]
    return names, codes


def exact_keep(
    codes: np.ndarray, dur: np.ndarray, caps: np.ndarray, hashes: Hashes, ids: pl.Series | None = None
) -> np.ndarray:
    """The budget as manifests before issue 28 computed it (full sort; defines the result): candidates
    in episode_id order, sorted by (group, hash) stably. Only equal (group, hash) pairs depend on
    the episode_id order; without `ids`, they raise NeedsIds."""
    n = len(codes)
    h = hashes(None)
    order = np.lexsort((h, codes))
    sc, sh = codes[order], h[order]
    ties = n > 1 and bool(((sc[1:] == sc[:-1]) & (sh[1:] == sh[:-1])).any())
    if ties:
        if ids is None:
            raise NeedsIds("equal hashes among the candidates")
        by_id = id_order(ids, np.arange(n))
        order = by_id[np.lexsort((h[by_id], codes[by_id]))]  # by group, then hash, then episode_id
    sorted_codes, sorted_dur = codes[order], dur[order]
    cum = np.cumsum(sorted_dur)
    starts = np.searchsorted(sorted_codes, np.arange(len(caps)))
    base = np.concatenate([[0.0], cum])[starts]
    with np.errstate(invalid="ignore"):  # inf - inf (an infinite duration): NaN, not kept, as before
        within = cum - base[sorted_codes]
    keep = np.ones(n, dtype=bool)
    keep[order] = within <= caps[sorted_codes]
    return keep


def fast_keep(
    codes: np.ndarray, dur: np.ndarray, caps: np.ndarray, hashes: Hashes, under: Under | None = None
) -> np.ndarray | None:
    """`exact_keep`'s result in linear time, or None when it cannot be proven (see the module
    docstring). `under`: the members under a threshold without hashing every member."""
    n = len(codes)
    keep = np.ones(n, dtype=bool)
    if n == 0:
        return keep
    from robodata.curate import kernels  # Numba, loaded on first use

    totals, sizes = np.zeros(len(caps)), np.zeros(len(caps), dtype=np.int64)
    if not kernels.group_sums(codes, dur, len(caps), totals, sizes):  # one pass; False: a duration < 0 or NaN/inf
        return None
    bound = error_slope(float(totals.sum()), n)
    need = [g for g in range(len(caps)) if np.isfinite(caps[g]) and totals[g] + (sizes[g] + 2) * bound > caps[g]]
    if not need:
        return keep
    needed = np.zeros(len(caps), dtype=bool)
    needed[need] = True
    if len(need) == len(caps):  # every group capped (the usual budget): every candidate is a member
        members, mcodes, keep = None, codes, np.zeros(n, dtype=bool)
    else:
        in_need = needed[codes]
        members = np.flatnonzero(in_need)
        mcodes, keep = codes[members], ~in_need  # each capped group keeps the prefix found below
    hashed: np.ndarray | None = None
    frac = {g: min(1.0, 1.25 * caps[g] / totals[g] + 64.0 / sizes[g]) if totals[g] > 0 else 1.0 for g in need}
    top = np.iinfo(np.uint64).max
    while frac:  # one pass over the members per round; a group whose cap lies past its threshold goes again
        last = np.zeros(len(caps), dtype=np.uint64)  # the largest hash under each group's threshold
        for g, f in frac.items():
            last[g] = np.uint64(min(f * _TWO64, _TWO64 - 4096)) - np.uint64(1) if f < 1.0 else top
        found = under(last, codes) if under is not None else None
        if found is None:  # every member hashed, once
            under = None
            hashed = hashes(members) if hashed is None else hashed
            sub = _under(hashed, last, mcodes)
            found = (sub if members is None else members[sub], hashed[sub])
        rows, h = found  # candidates (ascending) under their group's threshold, their hashes
        grouped = np.argsort(codes[rows], kind="stable")
        rows, h = rows[grouped], h[grouped]
        edges = np.searchsorted(codes[rows], np.arange(len(caps) + 1))
        for g in list(frac):
            at = slice(int(edges[g]), int(edges[g + 1]))  # this group's, in candidate order
            cut = prefix_cut(h[at], dur[rows[at]], float(caps[g]), bound, frac[g] < 1.0)
            if cut is False:
                return None
            if cut is None:
                frac[g] = min(1.0, frac[g] * 2.0)  # the cap was not reached below this threshold: look further
                continue
            keep[rows[at][cut]] = True
            del frac[g]
    return keep


def _under(hashes: np.ndarray, last: np.ndarray, codes: np.ndarray, block: int = 1 << 20) -> np.ndarray:
    """Positions whose hash is <= its group's `last`, in blocks (no temporary the size of the input)."""
    parts = [
        np.flatnonzero(hashes[a : a + block] <= last[codes[a : a + block]]) + a for a in range(0, len(hashes), block)
    ]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def prefix_cut(h: np.ndarray, d: np.ndarray, cap: float, bound: float, partial: bool) -> np.ndarray | None | bool:
    """Positions (into `h`) of the members the cap keeps; None when the cap is not reached and the
    members are below a threshold (`partial`: look further); False when undecidable here."""
    order = np.argsort(h, kind="stable")
    hs = h[order]
    if len(hs) > 1 and bool((hs[1:] == hs[:-1]).any()):
        return False  # equal hashes: the old order falls back on episode_id order
    run = np.cumsum(d[order])
    err = (np.arange(len(run)) + 2.0) * bound
    over = np.flatnonzero(run > cap + err)
    if not len(over) and partial:
        return None
    end = int(over[0]) if len(over) else len(run)
    if not (run[:end] <= cap - err[:end]).all():
        return False  # a running sum within rounding of the cap
    return order[:end]


def id_order(ids: pl.Series, positions: np.ndarray) -> np.ndarray:
    """Indices into `positions` ordering them by episode_id (ties keep their order)."""
    if len(positions) == 0:
        return positions
    frame = pl.DataFrame({"id": ids.gather(positions)}).with_row_index("at")
    return frame.sort(["id", "at"])["at"].to_numpy().astype(np.int64)  # ties by position: a stable sort
