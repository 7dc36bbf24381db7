"""Several read patterns over one copy: the advisor's objective when a team trains, say, a VLA and a
WAM on the same data.

Each pattern has a weight (its share of the reads). A candidate is scored by the weighted mean of
each pattern's cost relative to that pattern's own best candidate (1.0: every pattern at its best),
so a cheap pattern is not drowned by an expensive one; a candidate that keeps every pattern within
`AdvisorConfig.mix_floor` of its own best (best / cost >= mix_floor) is preferred to one that does not.
A pattern's own best is the cheapest candidate of the whole search for it alone (what advising that
pattern alone picks); the advisor measures the candidates nearest the floor (`nearest_floor`) beside
the score's best and each pattern's own best, and judges the floor again on the measured costs.
With one pattern the ranking is the plain cost ranking.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from robodata.dataset.pattern import ReadPattern, StreamWindow
from robodata.errors import ConfigError


@dataclass(frozen=True)
class Weighted:
    pattern: ReadPattern
    weight: float


def mix_of(patterns: ReadPattern | Sequence[ReadPattern | tuple[ReadPattern, float]]) -> list[Weighted]:
    """Patterns with weights summing to 1, heaviest first (the first of equals kept first).

    Raises:
        ConfigError: no pattern, a weight that is not finite and > 0, or two patterns of one name.
    """
    items = [patterns] if isinstance(patterns, ReadPattern) else list(patterns)
    pairs = [(p, 1.0) if isinstance(p, ReadPattern) else (p[0], float(p[1])) for p in items]
    if not pairs:
        raise ConfigError("advise needs at least one read pattern")
    if any(not (w > 0 and w < float("inf")) for _, w in pairs):
        raise ConfigError(f"pattern weights must be finite and > 0, got {[w for _, w in pairs]}")
    names = [p.name for p, _ in pairs]
    if len(set(names)) != len(names):
        raise ConfigError(f"two read patterns share a name: {names}")
    total = sum(w for _, w in pairs)
    out = [Weighted(p, w / total) for p, w in pairs]
    return sorted(out, key=lambda x: -x.weight)


def camera_groups(mix: list[Weighted]) -> list[tuple[str, dict[str, StreamWindow]]]:
    """One camera group per video window of the heaviest pattern: (group name, {pattern: its window
    over those cameras}). Every pattern must read its cameras in the same sets (one layout has one
    grouping)."""
    lead = mix[0].pattern
    groups = []
    for lw in lead.video:
        per = {lead.name: lw}
        for m in mix[1:]:
            for w in m.pattern.video:
                if set(w.streams) == set(lw.streams):
                    per[m.pattern.name] = w
        groups.append((lw.name, per))
    placed = {s for lw in lead.video for s in lw.streams}
    for m in mix[1:]:
        for w in m.pattern.video:
            if not any(set(w.streams) == set(lw.streams) for lw in lead.video):
                grouped = "grouped differently" if set(w.streams) & placed else "not read by the heaviest pattern"
                raise ConfigError(
                    f"pattern {m.pattern.name!r} reads cameras {list(w.streams)} {grouped} ({lead.name!r}: "
                    f"{[list(x.streams) for x in lead.video]}): one layout needs one camera grouping; advise "
                    "these patterns separately"
                )
    return groups


def union(mix: list[Weighted]) -> ReadPattern:
    """What one layout must hold: the heaviest pattern's windows, then every other stream the others
    read (array streams join the one proprio group in this order)."""
    lead = mix[0].pattern
    windows, seen, names = list(lead.windows), set(lead.streams), {w.name for w in lead.windows}
    for m in mix[1:]:
        for w in m.pattern.windows:
            if w.kind == "video":
                continue  # the same cameras as one of the lead's windows (camera_groups)
            new = tuple(s for s in w.streams if s not in seen)
            if new:
                name = w.name if w.name not in names else f"{m.pattern.name}.{w.name}"
                windows.append(StreamWindow(name, new, w.kind, w.length, w.every, w.offset))
                seen.update(new)
                names.add(name)
    label = "+".join(m.pattern.name for m in mix)
    return ReadPattern(label, tuple(windows), lead.anchor_stride_s, lead.anchor_jitter)


def scores(costs: Sequence[dict[str, float]], mix: list[Weighted], floor: float) -> list[tuple[float, float, bool]]:
    """Per candidate (its {pattern: cost}): (weighted cost relative to each pattern's own best, the
    worst pattern's best / cost, whether every pattern is within `floor` of its best)."""
    best = {m.pattern.name: min(c[m.pattern.name] for c in costs) for m in mix}
    out = []
    for c in costs:
        rel = {n: (c[n] / best[n] if best[n] > 0 else 1.0) for n in best}
        worst = min(1.0 / r for r in rel.values())
        out.append((sum(m.weight * rel[m.pattern.name] for m in mix), worst, worst >= floor))
    return out


def nearest_floor(costs: Sequence[dict[str, float]], mix: list[Weighted]) -> list[int]:
    """Candidate indices by how near they keep every pattern to its own best: the worst pattern's
    best / cost, highest first (the weighted score between equals). The advisor measures the first
    of these beside the score's best, so the floor is judged on measured costs where the model,
    calibrated on a shared machine, puts a candidate just under it."""
    sc = scores(costs, mix, 1.0)
    return sorted(range(len(costs)), key=lambda i: (-round(sc[i][1], 6), sc[i][0]))
