"""LeRobot as a real peer: the real LeRobotDataset (lerobot 0.6.1, in a venv of its own) against
PatternDataset on the same episodes, the same samples and the same tensors out.

    python -m bench.lerobot_peer --quick     # --smoke: tiny sizes, same keys (needs the peer venv too)

1. The peer venv (bench/lerobot_peer_venv.py; created once, several minutes, ~8 GB).
2. LeRobot writes the episodes with its own writer and encoder defaults (AV1, g=2, crf 30):
   a v3.0 dataset and the same episodes as v2.1 (bench/lerobot_peer_side.py write); and a small
   15 fps dataset, for `advise_cli_ok` (bench/lerobot_peer_layouts.py: `robodata advise vla|wam
   --source` at the data's own rates, 30 and 15 Hz).
3. Our importer (robodata.ingest.importers.lerobot) turns both into containers: the ingestion
   default (export and round trip), and the prescribed layout: ONE copy for both patterns
   (`robodata advise vla wam --source <LeRobot's set>`, then the import straight into that plan);
   for `one_layout_vs_best`, each pattern's own advised layout too (`robodata advise vla --source`,
   `robodata advise wam --source`: the copy a team would write per pattern without the mix).
4. Interleaved rounds, one process per measurement, LeRobot and robodata taking turns (medians):
   samples/s and CPU per sample (the process and its DataLoader workers) for VLA and WAM at 0 and
   2 workers, uint8 and float32, over the same index list in the same order. The headline order
   is a global shuffle (PatternSampler(shuffle="global"), what DataLoader(shuffle=True) users do),
   on both sides; block order (blocks of 8 neighbours) is measured beside it, on both sides.
   Order statistics of both orders against a uniform permutation (bench/lerobot_peer_order.py); the
   rounds and their summary: bench/lerobot_peer_rounds.py.
5. Agreement on the same samples: PSNR of our frames vs LeRobot's decode of its source (min, 1st
   percentile, median), state/action max abs diff, the frame index each returned
   (bench/lerobot_peer_check.py).
6. `robodata export --format lerobot` of the imported v3.0 and v2.1 sets, loaded by LeRobotDataset,
   its items against ours; the v2.1 export imported again by our importer.

Timing figures are noisy on a shared 2-core machine; only the in-run ratios are meant to compare.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import BENCH_DIR, emit, parse, peak_rss_mb, size_of
from bench.lerobot_peer_check import agreement, episode_from_index, run_json
from bench.lerobot_peer_data import import_dataset, manifest_table, write_manifest_file
from bench.lerobot_peer_layouts import DEFAULT_VIDEO, advise_cli_ok, advise_plan, calibration_quality, describe, relaid
from bench.lerobot_peer_order import ORDERS, order_keys, order_statistics
from bench.lerobot_peer_rounds import HEADLINE, PREFETCH, measure, summarize
from bench.lerobot_peer_roundtrip import roundtrip
from bench.lerobot_peer_venv import ensure_peer_venv, peer_version
from robodata.dataset import SampleIndex
from robodata.dataset.pattern import ReadPattern, StreamWindow

SIDE = str(Path(__file__).with_name("lerobot_peer_side.py"))
KEYS = (
    "lerobot_version",
    "source_bits_per_pixel",
    "order",
    "vla.vs_lerobot_w0_uint8",
    "vla.vs_lerobot_w0_float32",
    "vla.vs_lerobot_w2_uint8",
    "vla.vs_lerobot_w2_float32",
    "vla.cpu_vs_lerobot_w0_uint8",
    "vla.cpu_vs_lerobot_w0_float32",
    "vla.cpu_vs_lerobot_w2_uint8",
    "vla.cpu_vs_lerobot_w2_float32",
    "wam.vs_lerobot_w0_uint8",
    "wam.vs_lerobot_w0_float32",
    "wam.vs_lerobot_w2_uint8",
    "wam.vs_lerobot_w2_float32",
    "wam.cpu_vs_lerobot_w0_uint8",
    "wam.cpu_vs_lerobot_w0_float32",
    "wam.cpu_vs_lerobot_w2_uint8",
    "wam.cpu_vs_lerobot_w2_float32",
    "vla.one_layout_vs_best",
    "vla.psnr_db_min",
    "vla.frame_index_mismatches",
    "wam.one_layout_vs_best",
    "wam.psnr_db_min",
    "wam.frame_index_mismatches",
    "block",
    "order_statistics",
    "copies_written",
    "psnr_db_p1",
    "psnr_db_median",
    "advise_cli_ok",
    "layout.one",
    "layout.best",
    "bytes_vs_lerobot",
    "export_loads_in_lerobot",
    "export_items_equal",
    "peak_rss_mb",
)
SIZES: dict[str, dict[str, Any]] = {
    "smoke": {"episodes": 2, "seconds": 6.0, "cams": "cam_high,cam_wrist", "h": 96, "w": 128, "vla": 3, "wam": 2},
    "quick": {"episodes": 2, "seconds": 20.0, "cams": "cam_high,cam_left_wrist,cam_right_wrist", "h": 480, "w": 640},
    "full": {"episodes": 4, "seconds": 90.0, "cams": "cam_high,cam_left_wrist,cam_right_wrist", "h": 480, "w": 640},
}
RUNS = {"smoke": (1, 4), "quick": (3, 16), "full": (5, 48)}  # rounds, agreement samples
# quick VLA 30: with 2 workers each times 14 batches after its warm-up (12 timed 4, half on batch
# slots touched for the first time: a start-up transient, not a training run's steady state)
BATCHES = {"smoke": {"vla": 3, "wam": 3}, "quick": {"vla": 30, "wam": 6}, "full": {"vla": 50, "wam": 16}}
# Batch per pattern, the same on both sides (prefetch: bench.lerobot_peer_rounds.PREFETCH). A WAM
# batch of 4 as float32 is 1.8 GB (8 would be 3.5 GB, and LeRobot's DataLoader holds workers x
# prefetch of them). The measured cells and sides of each round: bench.lerobot_peer_rounds.
BATCH = {"vla": 8, "wam": 4}
FPS, DIM = 30, 14
SLOW_FPS = 15  # the second source rate advise_cli_ok is checked on
BLOCK = {"vla": 8, "wam": 8}


def log(msg: str) -> None:
    print(f"[bench.lerobot_peer {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def patterns(cams: tuple[str, ...]) -> dict[str, tuple[ReadPattern, dict[str, list[float]]]]:
    """VLA and WAM as our ReadPatterns and as LeRobot delta_timestamps (state at the camera rate)."""
    keys = [f"observation.images.{c}" for c in cams]
    vla = ReadPattern(
        "vla",
        (
            StreamWindow("cameras", cams, "video", length=2, offset=-1),
            StreamWindow("state", ("joint_pos",), "array", length=1),
            StreamWindow("action", ("cmd",), "array", length=50),
        ),
        anchor_stride_s=1.0 / FPS,
    )
    vla_lr = {**{k: [-1 / FPS, 0.0] for k in keys}, "observation.state": [0.0], "action": [i / FPS for i in range(50)]}
    sub, n = 3, 40  # 4 s at 10 fps
    wam = ReadPattern(
        "wam",
        (
            StreamWindow("cameras", cams, "video", length=n, every=sub),
            StreamWindow("state", ("joint_pos",), "array", length=n, every=sub),
            StreamWindow("action", ("cmd",), "array", length=n, every=sub),
        ),
        anchor_stride_s=1.0,
    )
    steps = [i * sub / FPS for i in range(n)]
    wam_lr = {**{k: steps for k in keys}, "observation.state": steps, "action": steps}
    return {"vla": (vla, vla_lr), "wam": (wam, wam_lr)}


def write_specs(work: Path, man, lr_root: Path, cams, size: str, n_agree: int) -> tuple[dict, dict]:
    """Per pattern and order: our anchors and LeRobot's global indices for the same samples, in one
    order (agreement samples from the headline order); and each order's statistics."""
    from dataclasses import asdict

    starts = episode_from_index(lr_root)
    row_ep = [int(e.rsplit("-", 1)[-1]) for e in man.column("episode_id").to_pylist()]
    out: dict[str, dict[str, Path]] = {}
    stats: dict[str, dict] = {}
    for name, (pat, deltas) in patterns(cams).items():
        idx = SampleIndex(man, pat)
        stats[name] = order_statistics(idx, BATCH[name], BLOCK[name])
        n = BATCHES[size][name] * BATCH[name]
        paths = {}
        for order in ORDERS:
            keys_all = order_keys(idx, order, BLOCK[name])
            keys = (keys_all * (1 + n // max(1, len(keys_all))))[:n]
            todo = [(order, keys)]
            if order == HEADLINE:
                todo.append(("agree", keys_all[:: max(1, len(keys_all) // n_agree)][:n_agree]))
            for tag, ks in todo:
                p = work / "specs" / f"{name}_{tag}.json"
                p.parent.mkdir(parents=True, exist_ok=True)
                spec = {
                    "pattern": asdict(pat),
                    "anchors": [[k.row, k.t] for k in ks],
                    "indices": [starts[row_ep[k.row]] + round(k.t * FPS) for k in ks],
                    "batch": BATCH[name],
                    "delta_timestamps": deltas,
                }
                p.write_text(json.dumps(spec))
                paths[tag] = p
        out[name] = paths
    return out, stats


def dir_bytes(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def build_layouts(work: Path, v3: Path, cams, log_, relayout: bool) -> tuple[list[Path], dict, dict, dict]:
    """Our default import of LeRobot's v3.0 set; the prescribed layout: one copy for both patterns
    (`robodata advise vla wam --source`, then our importer straight into the plan: one encode); each
    pattern's own advised layout (`robodata advise vla --source`, ... wam); with `relayout`, also
    advise -e over the default containers + relayout (a second encode), for agreement and bytes."""
    default = import_dataset(v3, work / "ours-default" / "v3.0", DEFAULT_VIDEO)
    paths, plans, relaid_ = {}, {}, {}
    for tag, presets in (("one", ["vla", "wam"]), ("vla", ["vla"]), ("wam", ["wam"])):
        plan = advise_plan(list(presets), [v3], work / f"plan-{tag}-source.json", log_, source=True)
        paths[tag] = import_dataset(v3, work / f"ours-advised-{tag}", DEFAULT_VIDEO, plan=plan)
        plans[tag] = plan
        log_(f"advised layout {tag} (ingest --plan): {describe(paths[tag])}")
    if relayout:
        for name, (pat, _) in patterns(cams).items():
            rplan = advise_plan([pat], default, work / f"plan-{name}-containers.json", log_)
            relaid_[name] = (rplan, relaid(rplan, default, work / f"ours-relaid-{name}"))
            log_(f"relaid layout for {name}: {describe(relaid_[name][1])}")
    return default, paths, plans, relaid_


def _options(ap) -> None:
    ap.add_argument("--rounds", type=int, default=0, help="interleaved rounds (0: the size's default)")
    ap.add_argument(
        "--relayout", action="store_true", help="also advise -e over the default + relayout: agreement and bytes"
    )
    ap.add_argument("--summarize", action="store_true", help="summarize the last run's rounds (rounds.json) again")


def _lerobot_write(peer_py: Path, out: Path, cfg: dict, fps: int) -> None:
    if (out / "done.json").exists():
        return
    log(f"LeRobot writes {cfg['episodes']} x {cfg['seconds']} s, {cfg['cams']} {cfg['w']}x{cfg['h']} at {fps} fps")
    cmd = [str(peer_py), SIDE, "write", "--out", str(out), "--episodes", str(cfg["episodes"])]
    cmd += ["--seconds", str(cfg["seconds"]), "--cams", cfg["cams"], "--height", str(cfg["h"])]
    cmd += ["--width", str(cfg["w"]), "--fps", str(fps), "--dim", str(DIM)]
    out.mkdir(parents=True, exist_ok=True)
    (out / "done.json").write_text(json.dumps(run_json(cmd, log)))


def main() -> None:
    args = parse(__doc__ or "", extra=_options)
    size = size_of(args)
    cfg = SIZES[size]
    rounds, n_agree = RUNS[size]
    rounds = args.rounds or rounds
    work = BENCH_DIR / "lerobot_peer" / size
    t0 = time.perf_counter()
    peer_py = ensure_peer_venv(log)
    cams = tuple(cfg["cams"].split(","))
    lr = work / "lerobot"
    if not (lr / "done.json").exists():
        shutil.rmtree(work, ignore_errors=True)  # everything below is derived from LeRobot's set
    _lerobot_write(peer_py, lr, cfg, FPS)
    slow = {**SIZES["smoke"], "episodes": 2, "seconds": 8.0}  # small: only the advisor reads it
    _lerobot_write(peer_py, work / f"lerobot-{SLOW_FPS}fps", slow, SLOW_FPS)
    v3, v21 = lr / "v3.0", lr / "v2.1"
    t_imp = time.perf_counter()
    default, advised, plans, relaid_ = build_layouts(work, v3, cams, log, args.relayout)
    ours21 = import_dataset(v21, work / "ours-default" / "v2.1", DEFAULT_VIDEO)
    import_s = time.perf_counter() - t_imp
    cli_ok = {
        f"{FPS}hz": advise_cli_ok(v3, FPS, work, log, suffix="-source"),  # the layouts' own advise runs
        f"{SLOW_FPS}hz": advise_cli_ok(work / f"lerobot-{SLOW_FPS}fps" / "v3.0", SLOW_FPS, work / "advise-cli-15", log),
    }
    man = manifest_table(default)
    manifest = write_manifest_file(man, work / "ours-default" / "v3.0.manifest.parquet")
    one = write_manifest_file(manifest_table(advised["one"]), work / "ours-advised-one.manifest.parquet")
    manifests: dict[str, dict[str, Path]] = {"default": {n: manifest for n in ("vla", "wam")}}
    manifests["one"] = {n: one for n in ("vla", "wam")}  # both patterns read the one copy
    manifests["best"] = {
        n: write_manifest_file(manifest_table(advised[n]), work / f"ours-advised-{n}.manifest.parquet")
        for n in ("vla", "wam")
    }
    manifests["relaid"] = {
        n: write_manifest_file(manifest_table(p), work / f"ours-relaid-{n}.manifest.parquet")
        for n, (_, p) in relaid_.items()
    }
    specs, order_stats = write_specs(work, man, v3, cams, size, n_agree)
    log(f"data ready in {time.perf_counter() - t0:.0f} s; agreement, export, then {rounds} rounds")

    lays = ("one", "best", "default", "relaid") if relaid_ else ("one", "best", "default")
    agree = agreement(work, peer_py, SIDE, v3, specs, manifests, lays, cams, n_agree, log)
    done = work / "roundtrip.json"
    if not done.exists():
        done.write_text(json.dumps(roundtrip(work, peer_py, SIDE, manifest, ours21, specs, cams, n_agree, log)))
    exports = json.loads(done.read_text())

    kept = work / "rounds.json"  # the rounds' raw figures: --summarize re-reads them instead of measuring
    if args.summarize and kept.exists():
        got = {tuple(json.loads(k)): v for k, v in json.loads(kept.read_text()).items()}
    else:
        got = measure(peer_py, SIDE, v3, manifests, specs, rounds, kept, log)
    result = summarize(got)
    lr_video = dir_bytes(v3 / "videos")
    lr_bytes = lr_video + dir_bytes(v3 / "data")
    frames = cfg["episodes"] * round(cfg["seconds"] * FPS) * len(cams)
    psnrs: list[float] = []
    for name in ("vla", "wam"):
        a = agree[(name, "one")]
        psnrs += a.pop("psnrs")
        result[name].update(a)
    result["layout"] = {"one": {}, "best": {}, "default": {}}
    for name in ("vla", "wam"):
        for lay in ("best", "default"):
            a = dict(agree[(name, lay)])
            a.pop("psnrs")
            result["layout"][lay].setdefault(name, {})["agreement"] = a
    dflt = describe(default)
    result["layout"]["default"].update(dflt, bytes_vs_lerobot=round(dflt["bytes"] / lr_bytes, 3))
    for tag, paths in advised.items():
        d = describe(paths)
        entry = dict(
            d,
            plan=plans[tag].chosen,
            patterns=plans[tag].patterns,
            quality_reference=plans[tag].quality_reference.get("measured_against", ""),
            bytes_vs_lerobot=round(d["bytes"] / lr_bytes, 3),
        )
        if tag == "one":
            result["layout"]["one"].update(entry)
        else:
            result["layout"]["best"].setdefault(tag, {}).update(entry)
    rss = {s: max(x["peak_rss_mb"] for k, v in got.items() if k[0] == s for x in v) for s in ("lerobot", "one", "best")}
    cells = {k[2:] for k in got}  # (pattern, workers, mode) cells with figures (8 unless cut short)
    result.update(
        {
            "lerobot_version": peer_version(peer_py),
            "source_bits_per_pixel": round(lr_video * 8 / (frames * cfg["w"] * cfg["h"]), 3),
            "size": size,
            "episodes": cfg["episodes"],
            "episode_s": cfg["seconds"],
            "cameras": len(cams),
            "resolution": f"{cfg['w']}x{cfg['h']}",
            "fps": FPS,
            "batch_size": BATCH,
            "prefetch_factor": PREFETCH,
            "block_size": BLOCK,
            "rounds": min(len(v) for v in got.values()),  # whole rounds measured
            "cells_measured": len(cells),
            "order_statistics": order_stats,
            # the container sets both patterns' headline figures read: ingest --plan of one plan
            "copies_written": len({str(manifests["one"][n]) for n in ("vla", "wam")}),
            "psnr_db_p1": round(float(np.percentile(psnrs, 1)), 2),
            "psnr_db_median": round(float(np.median(psnrs)), 2),
            "psnr_frames": len(psnrs),
            "psnr_db_calibration": calibration_quality(plans["one"]),
            "advise_cli_ok": all(v["ok"] for v in cli_ok.values()),
            "advise_cli": cli_ok,
            "frame_modes": {
                "uint8": "uint8 (B, T, 3, H, W) both sides",
                "float32": "float32 (B, T, 3, H, W) in [0, 1]",
            },
            "bytes_on_disk": {
                "lerobot_v3": lr_bytes,
                "lerobot_v21": dir_bytes(v21 / "videos") + dir_bytes(v21 / "data"),
                "ours_one": result["layout"]["one"]["bytes"],
                "ours_per_pattern_sum": sum(result["layout"]["best"][n]["bytes"] for n in ("vla", "wam")),
            },
            "import_s": round(import_s, 1),
            "peak_rss_mb_by_side": rss,
            "peak_rss_mb": max(rss["one"], rss["best"], peak_rss_mb(include_children=False)),
            "wall_s": round(time.perf_counter() - t0, 1),
            **exports,
        }
    )
    if relaid_:  # advise -e over the default containers + relayout: a second encode from the source
        result["layout"]["relaid"] = {}
        for name, (rplan, paths) in relaid_.items():
            d = describe(paths)
            a = dict(agree[(name, "relaid")])
            a.pop("psnrs")
            result["layout"]["relaid"][name] = dict(
                d, plan=rplan.chosen, bytes_vs_lerobot=round(d["bytes"] / lr_bytes, 3), agreement=a
            )
    # the prescribed layout (advise vla wam --source + ingest --plan: one copy) against LeRobot's v3.0 files
    result["bytes_vs_lerobot"] = result["layout"]["one"]["bytes_vs_lerobot"]
    emit(result)


if __name__ == "__main__":
    main()
