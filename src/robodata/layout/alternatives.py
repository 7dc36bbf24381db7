"""The layout advisor's alternatives: each one's predicted cost (its plan row), its measurement on
sample episodes rewritten into it, and each pattern's cost as a fraction of that pattern's best."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from robodata.container import EpisodeReader, Layout
from robodata.layout.config import AdvisorConfig
from robodata.layout.costmodel import Cost
from robodata.layout.measure import Measured, measure
from robodata.layout.mix import Weighted, scores
from robodata.layout.rewrite import rewrite
from robodata.layout.workload import sample_anchors


@dataclass
class Alternative:
    label: str
    layout: Layout
    predicted: dict[str, Cost]  # per pattern
    storage_x: float
    weights: dict[str, float]  # each pattern's share of the reads
    measured: dict | None = None

    def cost(self) -> Cost:
        """The predicted cost per sample, weighted over the patterns (the pattern's own with one)."""
        out = Cost()
        for name, c in self.predicted.items():
            w = self.weights[name]
            out = out + Cost(c.cpu_s * w, c.bytes * w, c.ranges * w, c.frames_decoded * w, c.storage_bps * w)
        return out

    def row(self) -> dict:
        p = self.cost()
        out = {
            "label": self.label,
            "layout_version": self.layout.version,
            "layout": self.layout.to_dict(),
            "predicted_ms": round(p.cpu_s * 1e3, 3),
            "predicted_frames_decoded": round(p.frames_decoded, 2),
            "predicted_bytes": round(p.bytes),
            "predicted_ranges": round(p.ranges, 2),
            "storage_bps": round(p.storage_bps),
            "storage_x": round(self.storage_x, 3),
        }
        if len(self.predicted) > 1:
            out["patterns"] = {
                n: {"weight": round(self.weights[n], 4), "predicted_ms": round(c.cpu_s * 1e3, 3)}
                for n, c in self.predicted.items()
            }
        if self.measured:
            out.update(self.measured)
        return out


def measure_alternatives(
    alts: list[Alternative], readers, metas, mix: list[Weighted], cfg: AdvisorConfig, workdir, progress, step, log
) -> Alternative | None:
    """Write each alternative for a sample episode, measure every pattern on it, record the result
    in `alt.measured`; the measured best (cfg.choose == "measured") or None."""
    m_eps = list(range(min(cfg.measure_episodes, len(readers))))
    if progress is not None:
        progress.set_total(2 + len(m_eps) * len(alts))
    got: dict[str, dict[str, Measured]] = {}
    with tempfile.TemporaryDirectory(dir=workdir, prefix="advise-") as tmp:
        written: dict[str, list[EpisodeReader]] = {}
        for k, a in enumerate(alts):
            paths = []
            for i in m_eps:
                dst = str(Path(tmp) / f"alt{k}" / f"{metas[i].episode_id}.rdep")
                rewrite(readers[i], a.layout, dst, check=False)
                paths.append(dst)
                step(1)
            written[a.label] = [EpisodeReader.open(p) for p in paths]
        for m in mix:
            m_samples = sample_anchors([metas[i] for i in m_eps], m.pattern, cfg.samples, cfg.seed + 1)
            got[m.pattern.name] = measure(written, m.pattern, m_samples, cfg.rounds, cfg.loader)
        step(1)
        for rs in written.values():
            for r in rs:
                r.close()
    costs = [{pn: got[pn][a.label].cpu_s for pn in got} for a in alts]
    sc = scores(costs, mix, cfg.mix_floor)
    for a, c, (score, worst, _) in zip(alts, costs, sc, strict=True):
        ms = {pn: got[pn][a.label] for pn in got}
        w = {pn: m.weight for m in mix for pn in [m.pattern.name]}
        a.measured = {
            "measured_ms": round(sum(w[pn] * x.cpu_s for pn, x in ms.items()) * 1e3, 3),
            "measured_wall_ms": round(sum(w[pn] * x.wall_s for pn, x in ms.items()) * 1e3, 3),
            "measured_frames_decoded": round(sum(w[pn] * x.frames_decoded for pn, x in ms.items()), 2),
            "measured_bytes": round(sum(w[pn] * x.bytes for pn, x in ms.items())),
            "measured_ranges": round(sum(w[pn] * x.ranges for pn, x in ms.items()), 2),
        }
        if len(mix) > 1:
            a.measured["measured_score"] = round(score, 4)
            a.measured["measured_worst_of_best"] = round(worst, 4)
            best = {pn: min(x[pn] for x in costs) for pn in got}
            a.measured["measured_patterns"] = {
                pn: {"measured_ms": round(c[pn] * 1e3, 3), "of_best": round(best[pn] / c[pn], 4) if c[pn] else 1.0}
                for pn in got
            }
        log(f"measured  {a.measured['measured_ms']:8.3f} ms/sample  {a.label}")
    if cfg.choose != "measured":
        return None
    return alts[min(range(len(alts)), key=lambda i: (not sc[i][2], sc[i][0]))]


def of_best_table(alts: list[Alternative], mix: list[Weighted]) -> dict[str, dict[str, dict]]:
    """Per alternative and pattern: its predicted (and measured) cost as a fraction of the pattern's
    own best among the alternatives (best / cost: 1.0 at its best)."""
    out: dict[str, dict[str, dict]] = {a.label: {} for a in alts}
    for m in mix:
        pn = m.pattern.name
        best_p = min(a.predicted[pn].cpu_s for a in alts)
        done = [a for a in alts if a.measured and "measured_patterns" in a.measured]
        best_m = min((a.measured["measured_patterns"][pn]["measured_ms"] for a in done), default=0.0)  # type: ignore[index]
        for a in alts:
            row = {"of_best_predicted": round(best_p / a.predicted[pn].cpu_s, 4) if a.predicted[pn].cpu_s else 1.0}
            if a in done:
                ms = a.measured["measured_patterns"][pn]["measured_ms"]  # type: ignore[index]
                row["of_best_measured"] = round(best_m / ms, 4) if ms else 1.0
            out[a.label][pn] = row
    return out
