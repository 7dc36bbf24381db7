"""bench.lerobot_peer step 4: the interleaved rounds, one process per measurement, LeRobot and
robodata taking turns, and their summary (medians; samples/s and CPU per sample ratios per cell)."""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

from bench.lerobot_peer_check import run_json

# Prefetch per pattern, the same on both sides (LeRobot's DataLoader holds workers x prefetch batches:
# bench.lerobot_peer.BATCH).
PREFETCH = {"vla": 2, "wam": 1}
WORKERS = (0, 2)
# Frame modes, like for like: LeRobot return_uint8=True (uint8 (T, 3, H, W)) vs our "uint8_chw";
# LeRobot's default float32 (T, 3, H, W) in [0, 1] vs our "float32".
MODES = {"uint8": "uint8_chw", "float32": "float32"}
HEADLINE = "global"  # the order of the headline figures; "block" is reported beside
# (side, order) measured each round: LeRobot and our one copy in both orders, each pattern's own
# best layout in the headline order (one_layout_vs_best)
RUN = (("lerobot", "global"), ("lerobot", "block"), ("one", "global"), ("one", "block"), ("best", "global"))


def _side_cmd(
    side: str, peer_py: Path, side_py: str, lr_root: Path, manifests: dict, spec: Path, name: str, w: int, mode: str
):
    common = ["--spec", str(spec), "--workers", str(w), "--prefetch", str(PREFETCH[name])]
    if side == "lerobot":
        uint8 = ["--uint8"] if mode == "uint8" else []
        return [str(peer_py), side_py, "bench", "--root", str(lr_root), *common, *uint8]
    cmd = [sys.executable, "-m", "bench.lerobot_peer_ours", "bench", "--manifest", str(manifests[side][name])]
    return [*cmd, *common, "--frames", MODES[mode]]


def _save(got: dict, path: Path) -> None:
    path.write_text(json.dumps({json.dumps(list(k)): v for k, v in got.items()}))


def measure(
    peer_py: Path,
    side_py: str,
    lr_root: Path,
    manifests: dict,
    specs,
    rounds: int,
    keep: Path,
    log: Callable[[str], None],
) -> dict:
    """Interleaved: every round runs each (pattern, workers, mode) on every (side, order) of RUN,
    one process each, the one that goes first rotating. Every figure is kept in `keep` as it comes
    (a run cut short after a whole round can still be summarized)."""
    got: dict[tuple[str, str, str, int, str], list[dict]] = {}
    for r in range(rounds):
        for name in ("vla", "wam"):
            for w in WORKERS:
                for mi, mode in enumerate(MODES):
                    k = (r + w // 2 + mi) % len(RUN)
                    for side, order in RUN[k:] + RUN[:k]:
                        cmd = _side_cmd(side, peer_py, side_py, lr_root, manifests, specs[name][order], name, w, mode)
                        res = run_json(cmd, log)
                        got.setdefault((side, order, name, w, mode), []).append(res)
                        _save(got, keep)
                        log(
                            f"round {r} {name} w{w} {mode} {side} {order}: {res['samples_per_s']:.2f} samples/s, "
                            f"{res['cpu_ms_per_sample']:.1f} ms CPU/sample"
                        )
    return got


def _div(a: float | None, b: float | None, digits: int = 2) -> float | None:
    return round(a / b, digits) if a is not None and b else None


def _ratios(med: dict, cpu: dict, name: str, ours: tuple[str, str], theirs: tuple[str, str]) -> dict:
    """vs_lerobot_* (samples/s, ours / theirs) and cpu_vs_lerobot_* (CPU per sample, theirs / ours);
    None where a cell was not measured (a run cut short)."""
    out = {}
    for w in WORKERS:
        for mode in MODES:
            a, b = med.get((*ours, name, w, mode)), med.get((*theirs, name, w, mode))
            ca, cb = cpu.get((*ours, name, w, mode)), cpu.get((*theirs, name, w, mode))
            out[f"vs_lerobot_w{w}_{mode}"] = _div(a, b)
            out[f"cpu_vs_lerobot_w{w}_{mode}"] = _div(cb, ca)
    return out


def summarize(got: dict) -> dict:
    med = {k: statistics.median(x["samples_per_s"] for x in v) for k, v in got.items()}
    cpu = {k: statistics.median(x["cpu_ms_per_sample"] for x in v) for k, v in got.items()}
    out: dict = {"order": HEADLINE, "vla": {}, "wam": {}, "block": {}}
    for name in ("vla", "wam"):
        d = out[name]
        d.update(_ratios(med, cpu, name, ("one", HEADLINE), ("lerobot", HEADLINE)))
        out["block"][name] = _ratios(med, cpu, name, ("one", "block"), ("lerobot", "block"))
        per_cell = {}
        for w in WORKERS:
            for mode in MODES:
                cell = f"w{w}_{mode}"
                keys = {f"{s}_{o}": (s, o, name, w, mode) for s, o in RUN if (s, o, name, w, mode) in got}
                d[f"samples_per_s_{cell}"] = {t: round(med[k], 2) for t, k in keys.items()}
                d[f"cpu_ms_per_sample_{cell}"] = {t: round(cpu[k], 2) for t, k in keys.items()}
                d[f"per_round_{cell}"] = {t: [round(x["samples_per_s"], 2) for x in got[k]] for t, k in keys.items()}
                d[f"first_batch_s_{cell}"] = {
                    t: round(statistics.median(x["first_batch_s"] for x in got[k]), 3) for t, k in keys.items()
                }
                per_cell[cell] = _div(
                    med.get(("one", HEADLINE, name, w, mode)), med.get(("best", HEADLINE, name, w, mode)), 3
                )
        d["one_layout_vs_best_per_cell"] = per_cell
        vals = [v for v in per_cell.values() if v]
        d["one_layout_vs_best"] = round(float(statistics.geometric_mean(vals)), 3) if vals else None
        d["tensors"] = {
            f"{s}_{mode}": got[(s, HEADLINE, name, 0, mode)][0]["shapes"]
            for s in ("lerobot", "one")
            for mode in MODES
            if (s, HEADLINE, name, 0, mode) in got
        }
        first = got.get(("lerobot", HEADLINE, name, 0, "float32"))
        d["lerobot_video_backend"] = first[0]["backend"] if first else None
    return out
