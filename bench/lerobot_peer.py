"""LeRobot as a real peer: the real LeRobotDataset (lerobot 0.4.4, in a venv of its own) against
PatternDataset on the same episodes, the same samples and the same tensors out.

    python -m bench.lerobot_peer --quick     # --smoke: tiny sizes, same keys (needs the peer venv too)

1. The peer venv (bench/lerobot_peer_venv.py; created once, several minutes, ~8 GB).
2. LeRobot writes the episodes with its own writer and encoder defaults (AV1, g=2, crf 30):
   a v3.0 dataset and the same episodes as v2.1 (bench/lerobot_peer_side.py write).
3. Our importer (robodata.ingest.importers.lerobot) turns both into containers.
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
from bench.lerobot_peer_roundtrip import roundtrip
from bench.lerobot_peer_venv import ensure_peer_venv
from robodata.container import VideoSettings
from robodata.dataset import PatternSampler, SampleIndex
from robodata.dataset.pattern import ReadPattern, StreamWindow

SIDE = str(Path(__file__).with_name("lerobot_peer_side.py"))
KEYS = (
    "vla.vs_lerobot_w0",
    "vla.vs_lerobot_w2",
    "vla.psnr_db_min",
    "vla.frame_index_mismatches",
    "wam.vs_lerobot_w0",
    "wam.vs_lerobot_w2",
    "bytes_vs_lerobot",
    "export_loads_in_lerobot",
    "export_items_equal",
    "peak_rss_mb",
)
SIZES: dict[str, dict[str, Any]] = {
    "smoke": {"episodes": 2, "seconds": 6.0, "cams": "cam_high,cam_wrist", "h": 96, "w": 128, "vla": 3, "wam": 2},
    "quick": {"episodes": 2, "seconds": 62.0, "cams": "cam_high,cam_left_wrist,cam_right_wrist", "h": 480, "w": 640},
    "full": {"episodes": 4, "seconds": 90.0, "cams": "cam_high,cam_left_wrist,cam_right_wrist", "h": 480, "w": 640},
}
RUNS = {"smoke": (1, 4), "quick": (3, 24), "full": (5, 48)}  # rounds, agreement samples
BATCHES = {"smoke": {"vla": 4, "wam": 4}, "quick": {"vla": 25, "wam": 10}, "full": {"vla": 50, "wam": 16}}
BATCH, FPS, DIM, WORKERS = 8, 30, 14, (0, 2)
BLOCK = {"vla": 8, "wam": 8}
# How our import re-encodes the cameras (see docs/layout.md: the random-frame layout).
VIDEO = VideoSettings(codec="h264", gop=8, crf=23, preset="veryfast", bframes=0)


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
        n = BATCHES[size][name] * BATCH
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
                    {"pattern": asdict(pat), "anchors": a, "indices": ii, "batch": BATCH, "delta_timestamps": deltas}
                )
            )
            paths[tag] = p
        out[name] = paths
    return out


def dir_bytes(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def measure(peer_py: Path, lr_root: Path, manifest: Path, specs, rounds: int) -> dict:
    got: dict[tuple[str, str, int], list[dict]] = {}
    for r in range(rounds):
        for name in ("vla", "wam"):
            for w in WORKERS:
                sides = ["lerobot", "robodata"] if (r + w // 2) % 2 == 0 else ["robodata", "lerobot"]
                for side in sides:
                    spec = str(specs[name]["bench"])
                    if side == "lerobot":
                        cmd = [str(peer_py), SIDE, "bench", "--root", str(lr_root), "--spec", spec, "--workers", str(w)]
                    else:
                        cmd = [sys.executable, "-m", "bench.lerobot_peer_ours", "bench", "--manifest", str(manifest)]
                        cmd += ["--spec", spec, "--workers", str(w)]
                    res = run_json(cmd, log)
                    got.setdefault((side, name, w), []).append(res)
                    log(f"round {r} {name} w{w} {side}: {res['samples_per_s']:.2f} samples/s")
    return got


def summarize(got: dict) -> dict:
    med = {k: statistics.median(x["samples_per_s"] for x in v) for k, v in got.items()}
    out: dict = {}
    for name in ("vla", "wam"):
        d: dict = {}
        for w in WORKERS:
            ours, theirs = med[("robodata", name, w)], med[("lerobot", name, w)]
            d[f"vs_lerobot_w{w}"] = round(ours / theirs, 2) if theirs else None
            d[f"samples_per_s_w{w}"] = {"robodata": round(ours, 2), "lerobot": round(theirs, 2)}
            d[f"first_batch_s_w{w}"] = {
                s: round(statistics.median(x["first_batch_s"] for x in got[(s, name, w)]), 3)
                for s in ("robodata", "lerobot")
            }
        d["tensors"] = {s: got[(s, name, 0)][0]["shapes"] for s in ("robodata", "lerobot")}
        d["lerobot_video_backend"] = got[("lerobot", name, 0)][0]["backend"]
        out[name] = d
    return out


def main() -> None:
    args = parse(__doc__ or "")
    size = size_of(args)
    cfg = SIZES[size]
    rounds, n_agree = RUNS[size]
    work = BENCH_DIR / "lerobot_peer" / size
    t0 = time.perf_counter()
    peer_py = ensure_peer_venv(log)
    cams = tuple(cfg["cams"].split(","))
    lr = work / "lerobot"
    if not (lr / "done.json").exists():
        shutil.rmtree(lr, ignore_errors=True)
        log(f"LeRobot writes {cfg['episodes']} x {cfg['seconds']} s, {len(cams)} cameras {cfg['w']}x{cfg['h']}")
        cmd = [str(peer_py), SIDE, "write", "--out", str(lr), "--episodes", str(cfg["episodes"])]
        cmd += ["--seconds", str(cfg["seconds"]), "--cams", cfg["cams"], "--height", str(cfg["h"])]
        cmd += ["--width", str(cfg["w"]), "--fps", str(FPS), "--dim", str(DIM)]
        (lr / "done.json").parent.mkdir(parents=True, exist_ok=True)
        (lr / "done.json").write_text(json.dumps(run_json(cmd, log)))
    v3, v21 = lr / "v3.0", lr / "v2.1"
    tag = f"{VIDEO.codec}-g{VIDEO.gop}-b{VIDEO.bframes}-crf{VIDEO.crf}-{VIDEO.preset}"
    t_imp = time.perf_counter()
    ours3 = import_dataset(v3, work / f"ours-{tag}" / "v3.0", VIDEO)
    ours21 = import_dataset(v21, work / f"ours-{tag}" / "v2.1", VIDEO)
    import_s = time.perf_counter() - t_imp
    man = manifest_table(ours3)
    manifest = write_manifest_file(man, work / f"ours-{tag}" / "v3.0.manifest.parquet")
    specs = write_specs(work, man, v3, cams, size, n_agree)
    log(f"data ready in {time.perf_counter() - t0:.0f} s; agreement, export, then {rounds} rounds")

    agree = {}
    for name in ("vla", "wam"):
        a_lr, a_us = work / f"{name}_agree_lerobot.npz", work / f"{name}_agree_ours.npz"
        run_json(
            [str(peer_py), SIDE, "items", "--root", str(v3), "--spec", str(specs[name]["agree"]), "--out", str(a_lr)],
            log,
        )
        run_json(
            [sys.executable, "-m", "bench.lerobot_peer_ours", "items", "--manifest", str(manifest)]
            + ["--spec", str(specs[name]["agree"]), "--out", str(a_us)],
            log,
        )
        agree[name] = compare(a_lr, a_us, n_agree, list(cams))
        log(f"{name} agreement {agree[name]}")
    exports = roundtrip(work, peer_py, SIDE, manifest, ours21, specs, cams, n_agree, log)

    got = measure(peer_py, v3, manifest, specs, rounds)
    result = summarize(got)
    for name in ("vla", "wam"):
        result[name].update(agree[name])
    lr_bytes = dir_bytes(v3 / "videos") + dir_bytes(v3 / "data")
    our_bytes = sum(p.stat().st_size for p in ours3)
    rss = {s: max(x["peak_rss_mb"] for k, v in got.items() if k[0] == s for x in v) for s in ("robodata", "lerobot")}
    result.update(
        {
            "size": size,
            "episodes": cfg["episodes"],
            "episode_s": cfg["seconds"],
            "cameras": len(cams),
            "resolution": f"{cfg['w']}x{cfg['h']}",
            "fps": FPS,
            "batch_size": BATCH,
            "block_size": BLOCK,
            "rounds": rounds,
            "our_video": {"codec": VIDEO.codec, "gop": VIDEO.gop, "bframes": VIDEO.bframes, "crf": VIDEO.crf},
            "bytes_on_disk": {
                "lerobot_v3": lr_bytes,
                "lerobot_v21": dir_bytes(v21 / "videos") + dir_bytes(v21 / "data"),
            },
            "import_s": round(import_s, 1),
            "peak_rss_mb_by_side": rss,
            "peak_rss_mb": max(rss["robodata"], peak_rss_mb(include_children=False)),
            "wall_s": round(time.perf_counter() - t0, 1),
            **exports,
        }
    )
    result["bytes_on_disk"]["robodata"] = our_bytes
    result["bytes_vs_lerobot"] = round(our_bytes / lr_bytes, 3)
    emit(result)


if __name__ == "__main__":
    main()
