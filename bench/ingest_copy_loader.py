"""bench.ingest `copy.loader_vs_transcoded`: the loader on stream-copied episodes against the same
episodes transcoded into the layout the advisor chose for the pattern (a part of bench.ingest).

For vla and wam: the advisor (choose="predicted", a small candidate set) plans a layout over one
transcoded sample episode; each episode is ingested twice under that plan, --video auto (copied
where the source fits the pattern, else transcoded into the plan) and --video transcode; the
delivery PatternDataset then serves the same random samples one at a time (as under a global
shuffle) from each copy, alternating, and the figure is copied samples/s over transcoded samples/s
(CPU seconds; wall beside), median over rounds.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from bench.common import cpu_s

PART_OF = "ingest"  # a part of bench.ingest, not a bench (bench/suite.py)


def _manifest(results, raws) -> pa.Table:
    from robodata.catalog.schema import MANIFEST_SCHEMA

    rows = []
    for res, (raw, _) in zip(results, raws, strict=True):
        from robodata.container import EpisodeReader

        m = EpisodeReader.open(res.uri).meta
        rows.append(
            {
                "episode_id": res.episode_id,
                "uri": res.uri,
                "site": "s",
                "task": "t",
                "duration_s": res.duration_s,
                "num_frames": min(res.frames.values()),
                "num_state_steps": res.state_steps,
                "cameras": list(raw.cameras),
                "stream_rates_json": json.dumps({s: v.rate_hz for s, v in m.streams.items()}, sort_keys=True),
                "layout_version": res.layout_version,
                "size_bytes": res.size_bytes,
                "footer_offset": res.footer_offset,
                "footer_length": res.footer_length,
                "split": "train",
                "weight": 1.0 / len(results),
            }
        )
    return pa.Table.from_pylist(rows, schema=MANIFEST_SCHEMA)


def _serve(ds, keys) -> tuple[float, float]:
    c0, w0 = cpu_s(), time.perf_counter()
    for k in keys:
        ds.__getitems__([k])
    return cpu_s() - c0, time.perf_counter() - w0


def loader_vs_transcoded(uris: list[str], tmp: Path, size: str) -> tuple[dict[str, float], dict[str, Any]]:
    from robodata.dataset import PatternDataset
    from robodata.dataset.pattern import preset
    from robodata.ingest.align import aligned_tracks
    from robodata.ingest.convert import convert
    from robodata.ingest.importers import open_raw
    from robodata.ingest.video_copy import VideoCopyConfig
    from robodata.layout.advisor import advise
    from robodata.layout.config import AdvisorConfig

    tmp.mkdir(parents=True, exist_ok=True)
    raws = [(raw, aligned_tracks(raw)) for raw in (open_raw(u, "lerobot-v2.1") for u in uris)]
    base = convert(*raws[0], tmp / "base.rdep", copy=VideoCopyConfig(mode="transcode"))
    n, rounds = (8, 1) if size == "smoke" else (48, 3)
    cfg = AdvisorConfig(
        gops=(2, 4, 10, 30), crfs=(23,), bframes=(), camera_spans_s=(1.0, 2.0), array_spans_s=(1.0, 10.0),
        verify_top=0, choose="predicted", samples=16, measure_episodes=1, calibration_frames=20,
    )  # fmt: skip
    ratios: dict[str, float] = {}
    detail: dict[str, Any] = {}
    cams = tuple(raws[0][0].cameras)
    rate = raws[0][0].cameras[cams[0]].fps
    for name in ("vla", "wam"):
        pattern = preset(name, cams, rate, state_hz=rate)
        plan = advise(pattern, [base.uri], cfg, workdir=str(tmp / name))
        made = {}
        for mode in ("auto", "transcode", "copy"):
            made[mode] = [
                convert(raw, al, tmp / f"{name}-{mode}-{i}.rdep", plan=plan, copy=VideoCopyConfig(mode=mode))
                for i, (raw, al) in enumerate(raws)
            ]
        chose = sorted({d["mode"] for r in made["auto"] for d in r.video.values()})
        sets = {m: PatternDataset(_manifest(made[m], raws), pattern) for m in made}
        rng = np.random.default_rng(0)
        total = len(sets["auto"])
        keys = [sets["auto"].index.locate(int(i)) for i in rng.integers(0, total, size=n)]
        for ds in sets.values():  # open readers, decoders warm
            _serve(ds, keys[:2])
        per: dict[str, list[tuple[float, float]]] = {m: [] for m in sets}
        for _ in range(rounds):
            for m, ds in sets.items():
                per[m].append(_serve(ds, keys))
        cpu = [t[0] / max(1e-9, c[0]) for c, t in zip(per["auto"], per["transcode"], strict=True)]
        wall = [t[1] / max(1e-9, c[1]) for c, t in zip(per["auto"], per["transcode"], strict=True)]
        forced = [t[0] / max(1e-9, c[0]) for c, t in zip(per["copy"], per["transcode"], strict=True)]
        ratios[name] = round(float(np.median(cpu)), 3)
        g = plan.layout.groups[0].video
        detail[name] = {
            "advisor_chose": "copy" if chose == ["copy"] else "transcode" if chose == ["transcode"] else chose,
            "advised_video": f"{g.codec} gop{g.gop}/b{g.bframes}/crf{g.crf}" if g else None,
            "auto_reasons": sorted({d["reason"] for r in made["auto"] for d in r.video.values()}),
            "vs_transcoded_wall": round(float(np.median(wall)), 3),
            # every camera copied (--video copy) whatever auto chose: what auto's choice avoids or takes
            "copy_forced_vs_transcoded": round(float(np.median(forced)), 3),
            "samples": n,
            "cpu_ms_per_sample": {m: round(1e3 * float(np.median([c for c, _ in v])) / n, 3) for m, v in per.items()},
            "bytes_per_episode": {m: int(np.mean([r.size_bytes for r in made[m]])) for m in made},
        }
        for ds in sets.values():
            ds.close()
    return ratios, detail
