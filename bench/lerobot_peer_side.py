"""The LeRobot side of bench.lerobot_peer: runs inside the peer venv (real lerobot 0.6.1), never
imports robodata (only its numpy-only scene renderer, loaded by file path).

    python bench/lerobot_peer_side.py write  --out DIR --episodes N --seconds S --cams a,b,c ...
    python bench/lerobot_peer_side.py bench  --root DS --spec SPEC.json --workers W [--uint8]
    python bench/lerobot_peer_side.py items  --root DS --spec SPEC.json --out ITEMS.npz

write: a v3.0 dataset with LeRobot's own writer (LeRobotDataset.create / add_frame / save_episode,
streaming encoding: its encoder with its defaults, libsvtav1, g=2, crf=30) and the same episodes as
a v2.1 dataset: LeRobot's per-episode encodes (each episode's video before DatasetWriter appends
it to the v3.0 file), the per-episode parquet rows and v2.1's meta/*.jsonl.
bench: samples/s of LeRobotDataset (default video backend, its DatasetReader decoding the
cameras of a sample in parallel threads; delta_timestamps windows; float32 by default,
`--uint8` for return_uint8=True) in a torch DataLoader over the spec's index list, batch by
batch; prints one JSON line.
items: the spec's samples as LeRobot returns them (frames back to uint8 HWC), and the frame
index LeRobot's decoder returned for each requested timestamp.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import shutil
import sys
import time
from pathlib import Path

import numpy as np

PART_OF = "lerobot_peer"  # a process of bench.lerobot_peer, not a bench (bench/suite.py)

REPO_ID = "robodata/peer"
TASK = "pick up the cube and place it in the bin"


def _by_path(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _scene():
    root = Path(__file__).resolve().parents[1]
    return _by_path(root / "src" / "robodata" / "ingest" / "synth" / "scene.py", "_rd_scene").SceneRenderer


def _timing():
    """bench/lerobot_peer_timing.py: the same timed loop as the robodata side."""
    return _by_path(Path(__file__).resolve().with_name("lerobot_peer_timing.py"), "_rd_timing")


def trajectory(index: int, n: int, fps: int, dim: int, seed: int) -> np.ndarray:
    """Smooth multi-joint motion: a few sines per joint with episode-specific frequencies."""
    rng = np.random.default_rng([seed, index])
    t = np.arange(n)[:, None] / fps
    freq, phase, amp = rng.uniform(0.2, 1.2, (3, dim)), rng.uniform(0, 6, (3, dim)), rng.uniform(0.1, 0.5, (3, dim))
    q = sum(amp[k] * np.sin(2 * np.pi * freq[k] * t / 3 + phase[k]) for k in range(3))
    return q.astype(np.float32)


def cmd_write(a: argparse.Namespace) -> None:
    from lerobot.datasets.dataset_writer import DatasetWriter
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    out = Path(a.out)
    v3, v21 = out / "v3.0", out / "v2.1"
    for d in (v3, v21):
        shutil.rmtree(d, ignore_errors=True)
    cams = a.cams.split(",")
    feats = {
        f"observation.images.{c}": {
            "dtype": "video",
            "shape": (a.height, a.width, 3),
            "names": ["height", "width", "channels"],
        }
        for c in cams
    }
    names = [f"joint_{i}" for i in range(a.dim)]
    feats["observation.state"] = {"dtype": "float32", "shape": (a.dim,), "names": names}
    feats["action"] = {"dtype": "float32", "shape": (a.dim,), "names": names}
    per_episode: dict[tuple[str, int], Path] = {}
    orig = DatasetWriter._save_episode_video

    def keep(self, video_key: str, episode_index: int, temp_path: Path | None = None) -> dict:
        # the v2.1 copy of LeRobot's own per-episode encode, before it is appended to the v3.0 file
        if temp_path is None:
            temp_path = self._encode_temporary_episode_video(video_key, episode_index)
        dst = v21 / "videos" / "chunk-000" / video_key / f"episode_{episode_index:06d}.mp4"
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(temp_path, dst)
        per_episode[(video_key, episode_index)] = dst
        return orig(self, video_key, episode_index, temp_path=temp_path)

    setattr(DatasetWriter, "_save_episode_video", keep)  # noqa: B010 - patched for the write only
    Scene = _scene()
    n = int(round(a.seconds * a.fps))
    # streaming encoding (0.6's, no PNG round trip); a queue that holds a whole episode never drops a frame
    ds = LeRobotDataset.create(
        REPO_ID, a.fps, feats, root=v3, robot_type="synthetic", streaming_encoding=True, encoder_queue_maxsize=n + 1
    )
    t0 = time.perf_counter()
    for e in range(a.episodes):
        q = trajectory(e, n + 1, a.fps, a.dim, a.seed)
        rend = {c: Scene(a.height, a.width, seed=a.seed + e, view=v) for v, c in enumerate(cams)}
        for i in range(n):
            frame = {f"observation.images.{c}": rend[c].render(i / a.fps, q[i], i > n // 2) for c in cams}
            frame["observation.state"] = q[i]
            frame["action"] = q[i + 1]  # the commanded next pose
            frame["task"] = TASK
            ds.add_frame(frame)
        ds.save_episode()
        print(f"[peer] episode {e}: {n} frames, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    ds.finalize()
    setattr(DatasetWriter, "_save_episode_video", orig)  # noqa: B010
    _v21_from_v3(v3, v21, cams, a.fps)
    print(json.dumps({"v3.0": str(v3), "v2.1": str(v21), "write_s": round(time.perf_counter() - t0, 1)}))


def _v21_from_v3(v3: Path, v21: Path, cams: list[str], fps: int) -> None:
    """v2.1 layout over the same episodes: per-episode parquet + the per-episode videos kept above."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    info = json.loads((v3 / "meta" / "info.json").read_text())
    data = pq.read_table(sorted((v3 / "data").glob("*/*.parquet")))
    (v21 / "data" / "chunk-000").mkdir(parents=True, exist_ok=True)
    (v21 / "meta").mkdir(parents=True, exist_ok=True)
    episodes, stats = [], []
    for e in sorted(set(data.column("episode_index").to_pylist())):
        rows = data.filter(pc.equal(data.column("episode_index"), e))
        pq.write_table(rows, v21 / "data" / "chunk-000" / f"episode_{e:06d}.parquet")
        episodes.append({"episode_index": e, "tasks": [TASK], "length": rows.num_rows})
        st = {}
        for k in ("observation.state", "action"):
            x = np.asarray(rows.column(k).to_pylist(), np.float64)
            st[k] = {
                "min": x.min(0).tolist(),
                "max": x.max(0).tolist(),
                "mean": x.mean(0).tolist(),
                "std": x.std(0).tolist(),
                "count": [len(x)],
            }
        stats.append({"episode_index": e, "stats": st})
    info = dict(info)
    info.update(
        codebase_version="v2.1",
        total_chunks=1,
        total_videos=len(episodes) * len(cams),
        data_path="data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
        video_path="videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4",
        splits={"train": f"0:{len(episodes)}"},
    )
    for k in ("data_files_size_in_mb", "video_files_size_in_mb"):
        info.pop(k, None)
    (v21 / "meta" / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in episodes))
    (v21 / "meta" / "episodes_stats.jsonl").write_text("".join(json.dumps(r) + "\n" for r in stats))
    (v21 / "meta" / "tasks.jsonl").write_text(json.dumps({"task_index": 0, "task": TASK}) + "\n")
    (v21 / "meta" / "info.json").write_text(json.dumps(info, indent=2))


# ---------------------------------------------------------------------------------------- reading
def _dataset(root: str, spec: dict, uint8: bool = False):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    return LeRobotDataset(REPO_ID, root=root, delta_timestamps=spec["delta_timestamps"], return_uint8=uint8)


def _peak_rss_mb() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return round(max(me, kids) / 1024, 1)


def cmd_bench(a: argparse.Namespace) -> None:
    import torch
    from torch.utils.data import DataLoader

    spec = json.loads(Path(a.spec).read_text())
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    ds = _dataset(a.root, spec, a.uint8)
    prefetch = a.prefetch if a.workers else None  # the same prefetch as our side (DataLoader's default: 2)
    timing = _timing()
    key = timing.CPU_KEY

    class Timed(torch.utils.data.Dataset):  # each item's CPU (the process's: DatasetReader's threads too)
        def __len__(self):
            return len(ds)

        def __getitem__(self, i):
            c = time.process_time()
            item = ds[i]
            item[key] = torch.tensor(time.process_time() - c, dtype=torch.float64)
            return item

    def collate(items):  # the default collate, its own CPU added to the batch's
        c = time.process_time()
        b = torch.utils.data.default_collate(items)
        b[key] = b[key].sum().reshape(1) + (time.process_time() - c)
        return b

    dl = DataLoader(
        Timed(),
        batch_size=spec["batch"],
        sampler=spec["indices"],
        num_workers=a.workers,
        prefetch_factor=prefetch,
        collate_fn=collate,
    )
    out = timing.timed_batches(dl, "index", a.workers, t0)
    print(
        json.dumps(
            {
                **out,
                "peak_rss_mb": _peak_rss_mb(),
                "backend": getattr(ds, "video_backend", getattr(ds, "_video_backend", "")),
                "frames": "uint8" if a.uint8 else "float32",
            }
        )
    )


def cmd_items(a: argparse.Namespace) -> None:
    from lerobot.datasets import video_utils

    spec = json.loads(Path(a.spec).read_text())
    returned: dict[str, list[float]] = {}  # per video file: cameras are decoded in parallel threads
    get = video_utils.VideoDecoderCache.get_decoder

    class _Seen:  # records the pts of every frame LeRobot's decoder hands back
        def __init__(self, dec, path):
            self.dec, self.path = dec, str(path)

        def __getattr__(self, k):
            return getattr(self.dec, k)

        def get_frames_at(self, indices):
            fb = self.dec.get_frames_at(indices=indices)
            returned.setdefault(self.path, []).extend(float(x) for x in fb.pts_seconds)
            return fb

    setattr(video_utils.VideoDecoderCache, "get_decoder", lambda self, p: _Seen(get(self, p), p))  # noqa: B010
    ds = _dataset(a.root, spec)
    fps = ds.fps
    out: dict[str, np.ndarray] = {}
    cams = ds.meta.video_keys
    for n, idx in enumerate(spec["indices"]):
        returned.clear()
        item = ds[idx]
        ep = int(item["episode_index"])
        frames_in_ep = []
        for c in cams:  # one decode call per camera and video file
            base = ds.meta.episodes[ep][f"videos/{c}/from_timestamp"]
            seen = returned.get(str(Path(ds.root) / ds.meta.get_video_file_path(ep, c)), [])
            frames_in_ep.append([round((p - base) * fps) for p in seen])
            x = item[c] if item[c].ndim == 4 else item[c][None]
            out[f"{n}/{c}"] = (x.permute(0, 2, 3, 1).numpy() * 255.0).round().clip(0, 255).astype(np.uint8)
        out[f"{n}/frame_index"] = np.asarray(frames_in_ep, np.int64)
        for k2 in ("observation.state", "action"):
            out[f"{n}/{k2}"] = item[k2].numpy()
        out[f"{n}/episode_index"] = np.asarray(ep)
        out[f"{n}/frame"] = np.asarray(int(item["frame_index"]))
    np.savez(a.out, **out)  # type: ignore[arg-type]  # numpy's stubs take **kwds as the allow_pickle flag
    print(json.dumps({"items": len(spec["indices"]), "cameras": list(cams), "fps": fps, "peak_rss_mb": _peak_rss_mb()}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("--out", required=True)
    w.add_argument("--episodes", type=int, default=2)
    w.add_argument("--seconds", type=float, default=62.0)
    w.add_argument("--cams", default="cam_high,cam_left_wrist,cam_right_wrist")
    w.add_argument("--height", type=int, default=480)
    w.add_argument("--width", type=int, default=640)
    w.add_argument("--fps", type=int, default=30)
    w.add_argument("--dim", type=int, default=14)
    w.add_argument("--seed", type=int, default=0)
    for name in ("bench", "items"):
        p = sub.add_parser(name)
        p.add_argument("--root", required=True)
        p.add_argument("--spec", required=True)
        p.add_argument("--workers", type=int, default=0)
        p.add_argument("--out", default="")
        p.add_argument("--uint8", action="store_true", help="return_uint8=True (uint8 (T, 3, H, W) frames)")
        p.add_argument("--prefetch", type=int, default=2, help="DataLoader prefetch_factor (its default: 2)")
    a = ap.parse_args()
    {"write": cmd_write, "bench": cmd_bench, "items": cmd_items}[a.cmd](a)


if __name__ == "__main__":
    main()
