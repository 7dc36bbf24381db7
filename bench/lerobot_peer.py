"""LeRobot as a real peer: the real LeRobotDataset (lerobot 0.6.1, in a venv of its own) against
PatternDataset on the same episodes, the same samples and the same tensors out.

    python -m bench.lerobot_peer --quick     # --smoke: tiny sizes, same keys (needs the peer venv too)

1. The peer venv (bench/lerobot_peer_venv.py; created once, several minutes, ~8 GB).
2. LeRobot writes the episodes with its own writer and encoder defaults (AV1, g=2, crf 30):
   a v3.0 dataset and the same episodes as v2.1 (bench/lerobot_peer_side.py write).
3. Our importer (robodata.ingest.importers.lerobot) turns both into containers: the ingestion
   default, and per pattern the prescribed layout (bench/lerobot_peer_layouts.py: advise --source
   over LeRobot's episodes, then the import straight into the plan; --relayout: advise -e + relayout
   of the default, agreement and bytes only).
4. Interleaved rounds, one process per measurement, LeRobot and robodata taking turns (medians):
   samples/s for VLA and WAM at 0 and 2 workers, batch 8, over the same index list in the same
   (block-shuffled) order; first-batch latency (dataset construction included); peak RSS.
   LeRobot returns float32 (T, 3, H, W) in [0, 1] per camera; PatternDataset is asked for the
   same (DatasetConfig(frames="float32"), converted in its decode threads, inside the timing).
5. Agreement on the same samples: PSNR of our frames vs LeRobot's, state/action max abs diff,
   the frame index each returned (bench/lerobot_peer_check.py).
6. `robodata export --format lerobot` of the imported v3.0 and v2.1 sets, loaded by LeRobotDataset,
   its items against ours; the v2.1 export imported again by our importer.

Timing figures are noisy on a shared 2-core machine; only the in-run ratios are meant to compare.
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import BENCH_DIR, emit, parse, peak_rss_mb, size_of
from bench.lerobot_peer_check import compare, episode_from_index, run_json
from bench.lerobot_peer_data import import_dataset, manifest_table, write_manifest_file
from bench.lerobot_peer_layouts import DEFAULT_VIDEO, advise_plan, describe, relaid
from bench.lerobot_peer_roundtrip import roundtrip
from bench.lerobot_peer_venv import ensure_peer_venv, peer_version
from robodata.dataset import PatternSampler, SampleIndex
from robodata.dataset.pattern import ReadPattern, StreamWindow

SIDE = str(Path(__file__).with_name("lerobot_peer_side.py"))
KEYS = (
    "lerobot_version",
    "source_bits_per_pixel",
    "vla.vs_lerobot_w0_uint8",
    "vla.vs_lerobot_w0_float32",
    "vla.vs_lerobot_w2_uint8",
    "vla.vs_lerobot_w2_float32",
    "vla.psnr_db_min",
    "vla.frame_index_mismatches",
    "wam.vs_lerobot_w0_uint8",
    "wam.vs_lerobot_w0_float32",
    "wam.vs_lerobot_w2_uint8",
    "wam.vs_lerobot_w2_float32",
    "wam.psnr_db_min",
    "wam.frame_index_mismatches",
    "layout.default",
    "layout.advised",
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
BATCHES = {"smoke": {"vla": 3, "wam": 3}, "quick": {"vla": 12, "wam": 6}, "full": {"vla": 50, "wam": 16}}
# Batch and prefetch per pattern, the same on both sides. A WAM batch of 4 as float32 is 1.8 GB
# (8 would be 3.5 GB, and LeRobot's DataLoader holds workers x prefetch of them).
BATCH, PREFETCH = {"vla": 8, "wam": 4}, {"vla": 2, "wam": 1}
FPS, DIM, WORKERS = 30, 14, (0, 2)
BLOCK = {"vla": 8, "wam": 8}
# Frame modes, like for like: LeRobot return_uint8=True (uint8 (T, 3, H, W)) vs our "uint8_chw";
# LeRobot's default float32 (T, 3, H, W) in [0, 1] vs our "float32".
MODES = {"uint8": "uint8_chw", "float32": "float32"}
OURS = ("default", "advised")  # our layouts: the ingest default, advise --source + ingest --plan
PRESCRIBED = "advised"  # docs/layout.md: new data of a known pattern is ingested in the advised plan


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


def write_specs(work: Path, man, lr_root: Path, cams, size: str, n_agree: int) -> dict[str, dict[str, Path]]:
    """Per pattern: our anchors and LeRobot's global indices for the same samples, in one order."""
    from dataclasses import asdict

    starts = episode_from_index(lr_root)
    row_ep = [int(e.rsplit("-", 1)[-1]) for e in man.column("episode_id").to_pylist()]
    out: dict[str, dict[str, Path]] = {}
    for name, (pat, deltas) in patterns(cams).items():
        idx = SampleIndex(man, pat)
        order = list(PatternSampler(idx, seed=0, shuffle="block", block_size=BLOCK[name]))
        n = BATCHES[size][name] * BATCH[name]
        keys = (order * (1 + n // max(1, len(order))))[:n]
        agree = order[:: max(1, len(order) // n_agree)][:n_agree]
        anchors = [[k.row, k.t] for k in keys]
        indices = [starts[row_ep[k.row]] + round(k.t * FPS) for k in keys]
        paths = {}
        for tag, a, i in (("bench", anchors, indices), ("agree", [[k.row, k.t] for k in agree], None)):
            ii = i if i is not None else [starts[row_ep[k.row]] + round(k.t * FPS) for k in agree]
            p = work / "specs" / f"{name}_{tag}.json"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(
                json.dumps(
                    {
                        "pattern": asdict(pat),
                        "anchors": a,
                        "indices": ii,
                        "batch": BATCH[name],
                        "delta_timestamps": deltas,
                    }
                )
            )
            paths[tag] = p
        out[name] = paths
    return out


def dir_bytes(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def _side_cmd(side: str, peer_py: Path, lr_root: Path, manifests: dict, spec: Path, name: str, w: int, mode: str):
    common = ["--spec", str(spec), "--workers", str(w), "--prefetch", str(PREFETCH[name])]
    if side == "lerobot":
        return [str(peer_py), SIDE, "bench", "--root", str(lr_root), *common] + (["--uint8"] if mode == "uint8" else [])
    cmd = [sys.executable, "-m", "bench.lerobot_peer_ours", "bench", "--manifest", str(manifests[side][name])]
    return [*cmd, *common, "--frames", MODES[mode]]


def measure(peer_py: Path, lr_root: Path, manifests: dict, specs, rounds: int) -> dict:
    """Interleaved: every round runs each (pattern, workers, mode) on all three sides, one
    process each, the side that goes first rotating."""
    got: dict[tuple[str, str, int, str], list[dict]] = {}
    sides = ["lerobot", *OURS]
    for r in range(rounds):
        for name in ("vla", "wam"):
            for w in WORKERS:
                for mi, mode in enumerate(MODES):
                    k = (r + w // 2 + mi) % len(sides)
                    for side in sides[k:] + sides[:k]:
                        cmd = _side_cmd(side, peer_py, lr_root, manifests, specs[name]["bench"], name, w, mode)
                        res = run_json(cmd, log)
                        got.setdefault((side, name, w, mode), []).append(res)
                        log(f"round {r} {name} w{w} {mode} {side}: {res['samples_per_s']:.2f} samples/s")
    return got


def summarize(got: dict) -> dict:
    med = {k: statistics.median(x["samples_per_s"] for x in v) for k, v in got.items()}
    out: dict = {"vla": {}, "wam": {}, "layout": {lay: {} for lay in OURS}}
    for name in ("vla", "wam"):
        d, per = out[name], {lay: dict[str, Any]() for lay in OURS}
        for w in WORKERS:
            for mode in MODES:
                theirs = med[("lerobot", name, w, mode)]
                sps = {"lerobot": round(theirs, 2)}
                for lay in OURS:
                    ours = med[(lay, name, w, mode)]
                    per[lay][f"vs_lerobot_w{w}_{mode}"] = round(ours / theirs, 2) if theirs else None
                    sps[lay] = round(ours, 2)
                d[f"vs_lerobot_w{w}_{mode}"] = per[PRESCRIBED][f"vs_lerobot_w{w}_{mode}"]
                d[f"samples_per_s_w{w}_{mode}"] = sps
                d[f"per_round_w{w}_{mode}"] = {
                    s: [round(x["samples_per_s"], 2) for x in got[(s, name, w, mode)]] for s in ("lerobot", *OURS)
                }
                d[f"first_batch_s_w{w}_{mode}"] = {
                    s: round(statistics.median(x["first_batch_s"] for x in got[(s, name, w, mode)]), 3)
                    for s in ("lerobot", *OURS)
                }
        d["tensors"] = {
            f"{s}_{mode}": got[(s, name, 0, mode)][0]["shapes"] for s in ("lerobot", PRESCRIBED) for mode in MODES
        }
        d["lerobot_video_backend"] = got[("lerobot", name, 0, "float32")][0]["backend"]
        for lay in OURS:
            out["layout"][lay][name] = per[lay]
    return out


def build_layouts(work: Path, v3: Path, cams, log_, relayout: bool) -> tuple[list[Path], dict, dict, dict]:
    """Our default import of LeRobot's v3.0 set; per pattern, the prescribed layout (advise --source
    over LeRobot's episodes, then our importer straight into the plan: one encode); with `relayout`,
    also advise -e over the default containers + relayout (a second encode), for agreement and bytes."""
    default = import_dataset(v3, work / "ours-default" / "v3.0", DEFAULT_VIDEO)
    advised, plans, relaid_ = {}, {}, {}
    for name, (pat, _) in patterns(cams).items():
        plan = advise_plan(pat, [v3], work / f"plan-{name}-source.json", log_, source=True)
        advised[name] = import_dataset(v3, work / f"ours-advised-{name}", DEFAULT_VIDEO, plan=plan)
        plans[name] = plan
        log_(f"advised layout for {name} (ingest --plan): {describe(advised[name])}")
        if relayout:
            rplan = advise_plan(pat, default, work / f"plan-{name}-containers.json", log_)
            relaid_[name] = (rplan, relaid(rplan, default, work / f"ours-relaid-{name}"))
            log_(f"relaid layout for {name}: {describe(relaid_[name][1])}")
    return default, advised, plans, relaid_


def _options(ap) -> None:
    ap.add_argument("--rounds", type=int, default=0, help="interleaved rounds (0: the size's default)")
    ap.add_argument(
        "--relayout", action="store_true", help="also advise -e over the default + relayout: agreement and bytes"
    )


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
        log(f"LeRobot writes {cfg['episodes']} x {cfg['seconds']} s, {len(cams)} cameras {cfg['w']}x{cfg['h']}")
        cmd = [str(peer_py), SIDE, "write", "--out", str(lr), "--episodes", str(cfg["episodes"])]
        cmd += ["--seconds", str(cfg["seconds"]), "--cams", cfg["cams"], "--height", str(cfg["h"])]
        cmd += ["--width", str(cfg["w"]), "--fps", str(FPS), "--dim", str(DIM)]
        (lr / "done.json").parent.mkdir(parents=True, exist_ok=True)
        (lr / "done.json").write_text(json.dumps(run_json(cmd, log)))
    v3, v21 = lr / "v3.0", lr / "v2.1"
    t_imp = time.perf_counter()
    default, advised, plans, relaid_ = build_layouts(work, v3, cams, log, args.relayout)
    ours21 = import_dataset(v21, work / "ours-default" / "v2.1", DEFAULT_VIDEO)
    import_s = time.perf_counter() - t_imp
    man = manifest_table(default)
    manifest = write_manifest_file(man, work / "ours-default" / "v3.0.manifest.parquet")
    manifests = {"default": {n: manifest for n in ("vla", "wam")}}
    manifests["advised"] = {
        n: write_manifest_file(manifest_table(p), work / f"ours-advised-{n}.manifest.parquet")
        for n, p in advised.items()
    }
    manifests["relaid"] = {
        n: write_manifest_file(manifest_table(p), work / f"ours-relaid-{n}.manifest.parquet")
        for n, (_, p) in relaid_.items()
    }
    specs = write_specs(work, man, v3, cams, size, n_agree)
    log(f"data ready in {time.perf_counter() - t0:.0f} s; agreement, export, then {rounds} rounds")

    agree: dict = {}
    for name in ("vla", "wam"):
        a_lr = work / f"{name}_agree_lerobot.npz"
        a_lr.exists() or run_json(  # the items of a set already written are the same (a rerun reuses them)
            [str(peer_py), SIDE, "items", "--root", str(v3), "--spec", str(specs[name]["agree"]), "--out", str(a_lr)],
            log,
        )
        for lay in (*OURS, "relaid") if relaid_ else OURS:
            a_us = work / (f"{name}_agree_ours.npz" if lay == "default" else f"{name}_agree_ours_{lay}.npz")
            a_us.exists() or run_json(
                [sys.executable, "-m", "bench.lerobot_peer_ours", "items", "--manifest", str(manifests[lay][name])]
                + ["--spec", str(specs[name]["agree"]), "--out", str(a_us)],
                log,
            )
            agree[(name, lay)] = compare(a_lr, a_us, n_agree, list(cams))
            log(f"{name} {lay} agreement {agree[(name, lay)]}")
    done = work / "roundtrip.json"
    if not done.exists():
        done.write_text(json.dumps(roundtrip(work, peer_py, SIDE, manifest, ours21, specs, cams, n_agree, log)))
    exports = json.loads(done.read_text())

    got = measure(peer_py, v3, manifests, specs, rounds)
    result = summarize(got)
    lr_video = dir_bytes(v3 / "videos")
    lr_bytes = lr_video + dir_bytes(v3 / "data")
    frames = cfg["episodes"] * round(cfg["seconds"] * FPS) * len(cams)
    for name in ("vla", "wam"):
        result[name].update(agree[(name, PRESCRIBED)])
        result["layout"]["default"][name]["agreement"] = agree[(name, "default")]
    dflt = describe(default)
    result["layout"]["default"].update(dflt, bytes_vs_lerobot=round(dflt["bytes"] / lr_bytes, 3))
    for name, paths in advised.items():
        d = describe(paths)
        result["layout"]["advised"][name].update(
            d,
            plan=plans[name].chosen,
            quality_reference=plans[name].quality_reference.get("measured_against", ""),
            bytes_vs_lerobot=round(d["bytes"] / lr_bytes, 3),
        )
    rss = {s: max(x["peak_rss_mb"] for k, v in got.items() if k[0] == s for x in v) for s in ("lerobot", *OURS)}
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
            "rounds": rounds,
            "frame_modes": {
                "uint8": "uint8 (B, T, 3, H, W) both sides",
                "float32": "float32 (B, T, 3, H, W) in [0, 1]",
            },
            "bytes_on_disk": {
                "lerobot_v3": lr_bytes,
                "lerobot_v21": dir_bytes(v21 / "videos") + dir_bytes(v21 / "data"),
            },
            "import_s": round(import_s, 1),
            "peak_rss_mb_by_side": rss,
            "peak_rss_mb": max(rss["default"], rss["advised"], peak_rss_mb(include_children=False)),
            "wall_s": round(time.perf_counter() - t0, 1),
            **exports,
        }
    )
    if relaid_:  # advise -e over the default containers + relayout: a second encode from the source
        result["layout"]["relaid"] = {}
        for name, (rplan, paths) in relaid_.items():
            d = describe(paths)
            result["layout"]["relaid"][name] = dict(
                d,
                plan=rplan.chosen,
                bytes_vs_lerobot=round(d["bytes"] / lr_bytes, 3),
                agreement=agree[(name, "relaid")],
            )
    # the prescribed layout of each pattern (advise --source + ingest --plan) against LeRobot's v3.0 files
    result["bytes_vs_lerobot"] = max(result["layout"]["advised"][n]["bytes_vs_lerobot"] for n in ("vla", "wam"))
    emit(result)


if __name__ == "__main__":
    main()
