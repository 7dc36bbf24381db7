"""Layout advisor benchmark: is the advised layout as fast to load as the best of a grid?

For the wam and vla read patterns: advise a layout from sample episodes (calibration on
this machine, cost model, top alternatives measured), then measure the loader cost (CPU
seconds per sample, reading windows with EpisodeReader.read_window as the pattern
prescribes) of the advised layout and of a grid of hand-written layouts on the same
samples. advised_vs_best = advised / best of the grid; wam_layout_on_vla_slowdown = the
VLA loader cost on the WAM-advised layout / on the VLA-advised layout. The same grid is also
read through the delivery PatternDataset as a cross-check ("dataset" entries).

    python -m bench.advisor --quick   # 2 episodes of 8 s at 320x240 (--smoke: 1 of 5 s at 128x96)
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from bench.common import BENCH_DIR, emit, parse, size_of
from robodata.container import EpisodeMeta, EpisodeReader, EpisodeWriter, StreamSpec
from robodata.container.calibration import Calibration
from robodata.container.meta import Layout, VideoSettings, default_layout
from robodata.container.plan import LayoutPlan
from robodata.dataset.pattern import preset
from robodata.ingest.synth.scene import SceneRenderer
from robodata.layout.advisor import advise, predict_layout
from robodata.layout.config import AdvisorConfig
from robodata.layout.measure import measure
from robodata.layout.rewrite import rewrite
from robodata.layout.workload import sample_anchors

CAMS = ("cam_left", "cam_right", "wrist")
ARRAYS = ("joint_pos", "joint_cur", "cmd")
FPS, STATE_HZ = 30.0, 100.0
# (gop, bframes, camera chunk span s): what one might hand-tune, from all-intra to long GOPs
GRID = [(1, 0, 1.0), (3, 0, 1.0), (6, 0, 1.0), (15, 2, 2.0), (30, 0, 2.0), (30, 2, 2.0), (60, 2, 2.0), (60, 0, 4.0)]
KEYS = (
    "wam.advised_vs_best",
    "wam.model_pick_vs_best",
    "wam.model_rank_corr",
    "wam.dataset.advised_vs_best",
    "vla.advised_vs_best",
    "vla.model_pick_vs_best",
    "vla.model_rank_corr",
    "vla.dataset.advised_vs_best",
    "wam_layout_on_vla_slowdown",
    "episodes",
    "total_s",
    "peak_rss_mb",
)


@dataclass(frozen=True)
class Size:
    height: int
    width: int
    seconds: float  # > 4: a wam sample spans 4 s
    episodes: int
    samples: int
    rounds: int
    dataset_rounds: int  # the PatternDataset cross-check


SIZES = {
    "smoke": Size(96, 128, 5.0, 1, 8, 1, 1),
    "quick": Size(240, 320, 8.0, 2, 24, 3, 1),
    "full": Size(480, 640, 20.0, 3, 64, 5, 3),
}


def write_source(path, seed: int, seconds: float, h: int, w: int) -> None:
    streams = {c: StreamSpec(c, "video", FPS, (h, w, 3)) for c in CAMS}
    for s in ARRAYS:
        streams[s] = StreamSpec(s, "array", STATE_HZ, (7,))
    meta = EpisodeMeta(path.stem, "robot-b", "site-b", "bench", 0, streams)
    rend = {c: SceneRenderer(h, w, seed=seed, view=i) for i, c in enumerate(CAMS)}
    rng = np.random.default_rng(seed)
    tj = (np.arange(int(seconds * STATE_HZ)) * 1e9 / STATE_HZ).astype(np.int64)
    joints = (0.6 * np.sin(tj[:, None] / 1e9 * rng.uniform(0.5, 2, 7) + rng.uniform(0, 6, 7))).astype(np.float32)
    n = int(seconds * FPS)
    tmp = path.with_name(path.name + ".partial")
    with EpisodeWriter(tmp, meta, default_layout(CAMS, ARRAYS, events=())) as wr:
        for i in range(n):
            k = min(len(tj) - 1, int(i / FPS * STATE_HZ))
            for c in CAMS:
                wr.write_frame(c, rend[c].render(i / FPS, joints[k], i > n // 2), int(i * 1e9 / FPS))
        for s in ARRAYS:
            wr.write_array(s, tj, joints)
    tmp.replace(path)


def spearman(a: list[float], b: list[float]) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def grid_layout(gop: int, bframes: int, span: float, crf: int) -> Layout:
    return default_layout(
        CAMS, ARRAYS, events=(), video=VideoSettings(gop=gop, crf=crf, bframes=bframes), camera_span_s=span
    )


def materialize(layout: Layout, sources: list[str], root) -> list[EpisodeReader]:
    out = []
    for src in sources:
        dst = root / layout.version / src.rsplit("/", 1)[-1]
        if not dst.exists():
            r = EpisodeReader.open(src)
            rewrite(r, layout, str(dst), check=False)
            r.close()
        out.append(EpisodeReader.open(dst))
    return out


def main() -> None:
    args = parse(__doc__ or "")
    size = SIZES[size_of(args)]
    t_start = time.perf_counter()
    h, w, seconds, n_eps = size.height, size.width, size.seconds, size.episodes
    samples, rounds = size.samples, size.rounds
    root = BENCH_DIR / "advisor" / f"{w}x{h}-{seconds:g}s"
    (root / "src").mkdir(parents=True, exist_ok=True)
    sources = []
    for i in range(n_eps):
        p = root / "src" / f"ep{i}.rdep"
        if not p.exists():
            write_source(p, 100 + i, seconds, h, w)
        sources.append(str(p))
    cfg = AdvisorConfig(
        samples=samples, rounds=2, crfs=(23, 28), verify_top=3, measure_episodes=1, camera_spans_s=(0.5, 1.0, 2.0, 4.0)
    )
    patterns = {name: preset(name, CAMS, FPS) for name in ("wam", "vla")}
    plans: dict[str, LayoutPlan] = {}
    t_advise: dict[str, float] = {}
    for name, pat in patterns.items():
        t = time.perf_counter()
        plans[name] = advise(pat, sources, cfg, workdir=str(root))
        t_advise[name] = round(time.perf_counter() - t, 1)

    result: dict = {}
    readers_src = [EpisodeReader.open(s) for s in sources]
    metas = [r.meta for r in readers_src]
    for name, pat in patterns.items():
        plan = plans[name]
        video = plan.layout.group_of(CAMS[0]).video
        assert video is not None, "the cameras' group of an advised layout has video settings"
        crf = video.crf  # the grid at the advised quality
        layouts: dict[str, Layout] = {f"gop{g}/b{b}/span{s:g}s": grid_layout(g, b, s, crf) for g, b, s in GRID}
        by_version = {lay.version: k for k, lay in layouts.items()}
        advised_key = by_version.get(plan.version, "advised")
        layouts.setdefault(advised_key, plan.layout)
        model_lay = plan.alternatives[0]  # the first alternative: the cost model's pick
        model_key = by_version.get(model_lay["layout_version"], "model_pick")
        if model_lay["layout_version"] == plan.version:
            model_key = advised_key
        elif model_key == "model_pick":
            layouts[model_key] = Layout.from_dict(model_lay["layout"])
        other = "vla" if name == "wam" else "wam"
        other_key = by_version.get(plans[other].version, f"{other}_advised")
        if other_key not in layouts and plans[other].version != plan.version:
            layouts[other_key] = plans[other].layout
        readers = {k: materialize(lay, sources, root) for k, lay in layouts.items()}
        smp = sample_anchors(metas, pat, samples, seed=7)
        got = measure(readers, pat, smp, rounds)
        grid_keys = [f"gop{g}/b{b}/span{s:g}s" for g, b, s in GRID]
        cal = Calibration.from_dict(plan.calibration)
        pred = {k: predict_layout(layouts[k], pat, cal, metas, smp).cpu_s for k in grid_keys}
        best = min(grid_keys, key=lambda k: got[k].cpu_s)
        result[name] = {
            "advised_vs_best": round(got[advised_key].cpu_s / got[best].cpu_s, 3),
            "advised": plan.chosen,
            "advised_ms": round(got[advised_key].cpu_s * 1e3, 3),
            "advised_predicted_ms": next(
                (a["predicted_ms"] for a in plan.alternatives if a["label"] == plan.chosen), None
            ),
            "model_pick": plan.alternatives[0]["label"],
            "model_pick_vs_best": round(got[model_key].cpu_s / got[best].cpu_s, 3),
            "best_grid": best,
            "best_grid_ms": round(got[best].cpu_s * 1e3, 3),
            "grid_ms": {k: round(got[k].cpu_s * 1e3, 3) for k in grid_keys},
            "grid_predicted_ms": {k: round(pred[k] * 1e3, 3) for k in grid_keys},
            "model_rank_corr": round(spearman([pred[k] for k in grid_keys], [got[k].cpu_s for k in grid_keys]), 3),
            "frames_decoded_per_sample": {k: round(got[k].frames_decoded, 1) for k in grid_keys + [advised_key]},
            "page_size": plan.page_size,
            "advise_s": t_advise[name],
            "alternatives": [
                {k: a.get(k) for k in ("label", "predicted_ms", "measured_ms", "storage_x")} for a in plan.alternatives
            ],
        }
        # cross-check through the delivery PatternDataset (its batch GOP decoder skips unwanted
        # non-reference frames per packet): fewer rounds, informational
        dgot = measure(readers, pat, smp[: max(8, samples // 2)], size.dataset_rounds, loader="dataset")
        dbest = min(grid_keys, key=lambda k: dgot[k].cpu_s)
        result[name]["dataset"] = {
            "advised_vs_best": round(dgot[advised_key].cpu_s / dgot[dbest].cpu_s, 3),
            "best_grid": dbest,
            "advised_ms": round(dgot[advised_key].cpu_s * 1e3, 3),
            "grid_ms": {k: round(dgot[k].cpu_s * 1e3, 3) for k in grid_keys},
        }
        if name == "vla":
            wam_key = other_key if plans["wam"].version != plan.version else advised_key
            result["wam_layout_on_vla_slowdown"] = round(got[wam_key].cpu_s / got[advised_key].cpu_s, 2)
        for rs in readers.values():
            for r in rs:
                r.close()
    result["episodes"] = {"count": n_eps, "seconds": seconds, "resolution": f"{w}x{h}", "fps": FPS}
    result["total_s"] = round(time.perf_counter() - t_start, 1)
    emit(result)


if __name__ == "__main__":
    main()
