"""Read-path levers of our side, measured on bench.lerobot_peer's data (run it after
`python -m bench.lerobot_peer --quick`, which leaves the data, specs and manifests under .bench/):

    python -m bench.lerobot_peer_levers [--size quick] [--rounds 2]

Each pattern at 0 workers on its advised layout, one process per measurement, rounds
interleaved, medians; every variant changes one thing against the baseline (float32 CHW out,
one decode thread per camera, block shuffle of 8):
- decode_threads=1: the cameras of an episode decoded one after the other (no camera-parallel decode);
- frames uint8_chw / uint8: no float conversion (CHW strided copy / HWC plain copy out of the decoder);
- shuffle=global: every sample at a random position instead of blocks of 8 neighbours, so a
  batch's samples rarely share a GOP and the batch-level decode (one GOP decode for every
  sample of the batch that needs it, decoders reused GOP after GOP) has little to share;
- batch_slots=0: every batch in fresh memory (no reused batch buffers, robodata.dataset.ring).
Also reported: distinct episodes and distinct GOP-sized spans per batch under each shuffle
(the randomness block shuffle gives up). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import pyarrow.parquet as pq

from bench.common import BENCH_DIR, emit, peak_rss_mb
from bench.lerobot_peer_check import run_json
from robodata.dataset import PatternSampler, ReadPattern, SampleIndex

PART_OF = "lerobot_peer"  # a process of bench.lerobot_peer, not a bench (bench/suite.py)

VARIANTS = {
    "baseline": [],
    "decode_threads_1": ["--decode-threads", "1"],
    "frames_uint8_chw": ["--frames", "uint8_chw"],
    "frames_uint8_hwc": ["--frames", "uint8"],
    "shuffle_global": [],
    "batch_slots_0": ["--batch-slots", "0"],
}


def log(msg: str) -> None:
    print(f"[bench.lerobot_peer_levers] {msg}", file=sys.stderr, flush=True)


def global_spec(spec_path: Path, manifest: Path) -> tuple[Path, dict]:
    """The bench spec with the same number of anchors in a globally shuffled order."""
    spec = json.loads(spec_path.read_text())
    pat = ReadPattern.from_dict(spec["pattern"])
    order = list(PatternSampler(SampleIndex(pq.read_table(manifest), pat), seed=0, shuffle="global"))
    n = len(spec["anchors"])
    keys = (order * (1 + n // max(1, len(order))))[:n]
    spec["anchors"] = [[k.row, k.t] for k in keys]
    out = spec_path.with_name(spec_path.stem + "_global.json")
    out.write_text(json.dumps(spec))
    return out, spec


def batch_spread(spec: dict, gop_s: float) -> dict:
    """Mean distinct episodes and distinct GOP-long spans per batch."""
    b, a = spec["batch"], spec["anchors"]
    eps, spans = [], []
    for i in range(0, len(a) - b + 1, b):
        chunk = a[i : i + b]
        eps.append(len({r for r, _ in chunk}))
        spans.append(len({(r, int(t // gop_s)) for r, t in chunk}))
    return {"episodes_per_batch": round(statistics.mean(eps), 2), "gops_per_batch": round(statistics.mean(spans), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", default="quick")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    work = BENCH_DIR / "lerobot_peer" / a.size
    out: dict = {}
    got: dict[tuple[str, str], list[float]] = {}
    specs: dict = {}
    for name in ("vla", "wam"):
        manifest = work / f"ours-advised-{name}.manifest.parquet"
        bench_spec = work / "specs" / f"{name}_block.json"  # bench.lerobot_peer writes each order
        g_path, g_spec = global_spec(bench_spec, manifest)
        specs[name] = (manifest, bench_spec, g_path, json.loads(bench_spec.read_text()), g_spec)
    for r in range(a.rounds):
        for name, (manifest, bench_spec, g_path, _, _) in specs.items():
            names = list(VARIANTS)
            for v in names[r % len(names) :] + names[: r % len(names)]:
                spec = g_path if v == "shuffle_global" else bench_spec
                cmd = [sys.executable, "-m", "bench.lerobot_peer_ours", "bench", "--manifest", str(manifest)]
                cmd += ["--spec", str(spec), "--workers", "0", *VARIANTS[v]]
                res = run_json(cmd, log)
                got.setdefault((name, v), []).append(res["samples_per_s"])
                log(f"round {r} {name} {v}: {res['samples_per_s']:.2f} samples/s")
    for name, (_, _, _, b_spec, g_spec) in specs.items():
        plan_file = work / f"plan-{name}-source.json"  # advise --source (bench/lerobot_peer_layouts.py)
        plan = json.loads((plan_file if plan_file.exists() else work / f"plan-{name}.json").read_text())
        gop = next((g["video"]["gop"] for g in plan["layout"]["groups"] if g.get("video")), 30)
        med = {v: statistics.median(got[(name, v)]) for v in VARIANTS}
        out[name] = {
            "samples_per_s_w0": {v: round(x, 2) for v, x in med.items()},
            "vs_baseline": {v: round(x / med["baseline"], 2) for v, x in med.items() if v != "baseline"},
            "per_round": {v: [round(x, 2) for x in got[(name, v)]] for v in VARIANTS},
            "spread_block": batch_spread(b_spec, gop / 30.0),
            "spread_global": batch_spread(g_spec, gop / 30.0),
            "advised_gop": gop,
        }
    out.update({"size": a.size, "rounds": a.rounds, "peak_rss_mb": peak_rss_mb()})
    emit(out)


if __name__ == "__main__":
    main()
