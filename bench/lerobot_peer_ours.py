"""The robodata side of bench.lerobot_peer, one measurement per process (project venv), the twin
of bench/lerobot_peer_side.py:

    python -m bench.lerobot_peer_ours bench --manifest M --spec SPEC.json --workers W
    python -m bench.lerobot_peer_ours items --manifest M --spec SPEC.json --out ITEMS.npz

bench: samples/s of PatternDataset through its own loader (BatchLoader: whole batches built in
the workers) over the spec's anchor list, batch by batch. LeRobot returns float32
(B, T, 3, H, W) in [0, 1] per camera, so the dataset is asked for exactly that
(DatasetConfig(frames="float32"): each decode thread converts its frames as it writes them into
the batch, inside the timed loop); `--frames uint8_chw` is LeRobot's return_uint8=True layout
(uint8 (B, T, 3, H, W)), `--frames uint8` our uint8 (B, T, H, W, 3) default.
items: the spec's anchors one by one as PatternDataset returns them, and the frame index of
each returned camera frame (position of the picked frame among the episode's frames).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import torch
from torch.utils.data import BatchSampler

from bench.common import peak_rss_mb
from bench.lerobot_peer_timing import CPU_KEY, timed_batches
from robodata.dataset import Anchor, BatchLoader, DatasetConfig, LoaderConfig, PatternDataset, ReadPattern
from robodata.dataset.frames import fetch_streams, nearest

PART_OF = "lerobot_peer"  # a process of bench.lerobot_peer, not a bench (bench/suite.py)


class _Timed(PatternDataset):
    """PatternDataset whose every batch carries the CPU seconds its building took (CPU_KEY: the
    process's CPU, decode threads included), for the timed loop's per-sample CPU with workers."""

    def batch(self, keys, shared=None, arena=None):
        c = time.process_time()
        out = super().batch(keys, shared, arena)
        out[CPU_KEY] = torch.tensor([time.process_time() - c], dtype=torch.float64)
        return out


def _dataset(manifest: str, spec: dict, frames: str = "float32", decode_threads: int = 0) -> PatternDataset:
    cfg = DatasetConfig(frames=frames, decode_threads=decode_threads)
    return _Timed(pq.read_table(manifest), ReadPattern.from_dict(spec["pattern"]), config=cfg)


def cmd_bench(a: argparse.Namespace) -> None:
    spec = json.loads(Path(a.spec).read_text())
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    ds = _dataset(a.manifest, spec, a.frames, a.decode_threads)
    keys = [Anchor(int(r), float(t)) for r, t in spec["anchors"]]
    cfg = LoaderConfig(
        batch_size=spec["batch"],
        num_workers=a.workers,
        prefetch_factor=a.prefetch,
        timeout_s=900,
        batch_slots=a.batch_slots,
    )
    dl = BatchLoader(ds, BatchSampler(keys, spec["batch"], False), cfg)  # type: ignore[arg-type]  # any items
    out = timed_batches(dl, "t", a.workers, t0)
    out.update({"frames": a.frames, "peak_rss_mb": peak_rss_mb()})
    print(json.dumps(out))


def cmd_items(a: argparse.Namespace) -> None:
    spec = json.loads(Path(a.spec).read_text())
    ds = _dataset(a.manifest, spec, "uint8")
    out: dict[str, np.ndarray] = {}
    times: dict[tuple[int, str], np.ndarray] = {}
    for n, (row, t) in enumerate(spec["anchors"]):
        b = ds.batch([Anchor(int(row), float(t))])
        r = ds.reader(int(row))
        idx = []
        for w in ds.pattern.video:
            rate = r.meta.streams[w.streams[0]].rate_hz
            targets = float(t) + (w.offset + np.arange(w.length) * w.every) / rate
            for c in w.streams:
                if (row, c) not in times:
                    times[(row, c)] = np.sort(fetch_streams(r, {c: (0.0, r.meta.duration_s + 1.0)})[c].t_s)
                j, _ = nearest(times[(row, c)], targets, 0.5 / rate)
                idx.append(j)
                out[f"{n}/{c}"] = b[c][0].numpy()
        out[f"{n}/frame_index"] = np.asarray(idx, np.int64)
        for k, v in b.items():
            if not any(k == c for w in ds.pattern.video for c in w.streams):
                out[f"{n}/{k}"] = v[0].numpy()
    np.savez(a.out, **out)  # type: ignore[arg-type]  # numpy's stubs take **kwds as the allow_pickle flag
    print(json.dumps({"items": len(spec["anchors"]), "peak_rss_mb": peak_rss_mb()}))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("bench", "items"):
        p = sub.add_parser(name)
        p.add_argument("--manifest", required=True)
        p.add_argument("--spec", required=True)
        p.add_argument("--workers", type=int, default=0)
        p.add_argument("--out", default="")
        p.add_argument("--frames", default="float32", choices=("float32", "uint8_chw", "uint8"))
        p.add_argument("--decode-threads", type=int, default=0, help="per worker (0: one per camera)")
        p.add_argument("--batch-slots", type=int, default=None, help="LoaderConfig.batch_slots (0: fresh memory)")
        p.add_argument(
            "--prefetch", type=int, default=1, help="batches prefetched per worker (a WAM batch as float32 is 3.5 GB)"
        )
    a = ap.parse_args(argv)
    {"bench": cmd_bench, "items": cmd_items}[a.cmd](a)


if __name__ == "__main__":
    main(sys.argv[1:])
