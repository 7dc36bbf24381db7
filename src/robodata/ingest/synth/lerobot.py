"""Write small LeRobot datasets (v2.1 or v3.0 layout, parquet + mp4) for tests and demos."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import cast

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from av.video.stream import VideoStream

from robodata.codecs.video import yuv420p_frame
from robodata.ingest.synth.scene import SceneRenderer

ENCODERS = {"h264": "libx264", "av1": "libsvtav1"}


def _write_video(
    path: Path, frames: list[np.ndarray], fps: int, codec: str, gop: int = 0, bframes: int = -1, keys: int = 0
) -> None:
    """`gop` > 0: a keyframe every `gop` frames exactly; `bframes` >= 0 (H.264): that many B-frames;
    `keys` > 0: a keyframe forced every `keys` frames too (a v3.0 file's episode starts)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    h, w, _ = frames[0].shape
    with av.open(str(path), "w") as c:
        s = cast(VideoStream, c.add_stream(ENCODERS[codec], rate=Fraction(fps)))  # ENCODERS holds video encoders
        s.width, s.height, s.pix_fmt = w, h, "yuv420p"
        if codec == "av1":
            s.options = {"preset": "11", "svtav1-params": "lp=1" + (f":keyint={gop}:scd=0" if gop else "")}
        else:
            x264 = ([f"keyint={gop}:min-keyint={gop}:scenecut=0:open-gop=0"] if gop else []) + (
                [f"bframes={bframes}:b-adapt=0:b-pyramid=none"] if bframes >= 0 else []
            )
            s.options = {"preset": "ultrafast", **({"x264-params": ":".join(x264)} if x264 else {})}
        for i, rgb in enumerate(frames):
            f = yuv420p_frame(rgb)
            if keys and i % keys == 0:
                f.pict_type = av.video.frame.PictureType.I
            f.pts = i
            f.time_base = Fraction(1, fps)
            for p in s.encode(f):
                c.mux(p)
        for p in s.encode(None):
            c.mux(p)


def _png(rgb: np.ndarray) -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="PNG")
    return buf.getvalue()


def _episode(index: int, n: int, h: int, w: int, cams: tuple[str, ...], seed: int):
    rng = np.random.default_rng([seed, index])
    t = np.arange(n)
    state = (0.5 * np.sin(t[:, None] / 9.0 + rng.uniform(0, 6, 6))).astype(np.float32)
    action = np.roll(state, -1, axis=0)
    rend = {c: SceneRenderer(h, w, seed=seed + index, view=v) for v, c in enumerate(cams)}
    frames = {c: [rend[c].render(i / 10, state[i], i > n // 2) for i in range(n)] for c in cams}
    return state, action, frames


def write_lerobot(
    root: str | Path,
    version: str = "v2.1",
    episodes: int = 2,
    frames_per_episode: int = 20,
    fps: int = 10,
    height: int = 48,
    width: int = 64,
    codec: str = "h264",
    cameras: tuple[str, ...] = ("top", "wrist"),
    seed: int = 0,
    task: str = "pick_place",
    image_cameras: tuple[str, ...] = (),
    gop: int = 0,
    bframes: int = -1,
) -> Path:
    """`image_cameras`: cameras stored as `dtype: image` features, PNG bytes in the parquet
    (struct<bytes, path>, as Hugging Face datasets' Image feature writes them), not as videos.
    `gop` > 0: videos with a keyframe every `gop` frames (0: the encoder's default); `bframes`
    >= 0: H.264 with that many B-frames (-1: the encoder's default)."""
    root = Path(root)
    (root / "meta").mkdir(parents=True, exist_ok=True)
    n = frames_per_episode
    feats: dict[str, dict[str, object]] = {
        f"observation.images.{c}": {
            "dtype": "video",
            "shape": [height, width, 3],
            "names": ["height", "width", "channels"],
            "info": {"video.fps": fps, "video.codec": codec},
        }
        for c in cameras
    }
    for c in image_cameras:
        feats[f"observation.images.{c}"] = {
            "dtype": "image",
            "shape": [height, width, 3],
            "names": ["height", "width", "channels"],
        }
    feats["observation.state"] = {"dtype": "float32", "shape": [6], "names": [f"j{i}" for i in range(6)]}
    feats["action"] = {"dtype": "float32", "shape": [6], "names": [f"j{i}" for i in range(6)]}
    for k in ("timestamp",):
        feats[k] = {"dtype": "float32", "shape": [1], "names": None}
    for k in ("frame_index", "episode_index", "index", "task_index"):
        feats[k] = {"dtype": "int64", "shape": [1], "names": None}
    tables: list[pa.Table] = []
    ep_rows: list[dict[str, object]] = []
    vids: dict[str, list[np.ndarray]] = {c: [] for c in cameras}
    for e in range(episodes):
        state, action, frames = _episode(e, n, height, width, cameras + image_cameras, seed)
        images = {
            f"observation.images.{c}": pa.array(
                [{"bytes": _png(x), "path": f"frame_{i:06d}.png"} for i, x in enumerate(frames[c])],
                pa.struct([("bytes", pa.binary()), ("path", pa.string())]),
            )
            for c in image_cameras
        }
        tbl = pa.table(
            {
                **images,
                "observation.state": pa.array(list(state), pa.list_(pa.float32())),
                "action": pa.array(list(action), pa.list_(pa.float32())),
                "timestamp": pa.array(np.arange(n) / fps, pa.float32()),
                "frame_index": pa.array(np.arange(n), pa.int64()),
                "episode_index": pa.array(np.full(n, e), pa.int64()),
                "index": pa.array(np.arange(n) + e * n, pa.int64()),
                "task_index": pa.array(np.zeros(n), pa.int64()),
            }
        )
        tables.append(tbl)
        if version == "v2.1":
            (root / "data" / "chunk-000").mkdir(parents=True, exist_ok=True)
            pq.write_table(tbl, root / "data" / "chunk-000" / f"episode_{e:06d}.parquet")
            for c in cameras:
                _write_video(
                    root / "videos" / "chunk-000" / f"observation.images.{c}" / f"episode_{e:06d}.mp4",
                    frames[c],
                    fps,
                    codec,
                    gop,
                    bframes,
                )
            ep_rows.append({"episode_index": e, "tasks": [task], "length": n})
        else:
            row = {
                "episode_index": e,
                "tasks": [task],
                "length": n,
                "data/chunk_index": 0,
                "data/file_index": 0,
                "dataset_from_index": e * n,
                "dataset_to_index": (e + 1) * n,
            }
            for c in cameras:
                key = f"observation.images.{c}"
                row[f"videos/{key}/chunk_index"] = 0
                row[f"videos/{key}/file_index"] = 0
                row[f"videos/{key}/from_timestamp"] = e * n / fps
                row[f"videos/{key}/to_timestamp"] = (e + 1) * n / fps
                vids[c].extend(frames[c])
            ep_rows.append(row)
    info = {
        "codebase_version": version,
        "robot_type": "so100",
        "fps": fps,
        "total_episodes": episodes,
        "total_frames": episodes * n,
        "total_tasks": 1,
        "chunks_size": 1000,
        "features": feats,
    }
    if version == "v2.1":
        info["data_path"] = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
        info["video_path"] = "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"
        (root / "meta" / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ep_rows))
        (root / "meta" / "tasks.jsonl").write_text(json.dumps({"task_index": 0, "task": task}) + "\n")
    else:
        info["data_path"] = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
        info["video_path"] = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
        (root / "data" / "chunk-000").mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.concat_tables(tables), root / "data" / "chunk-000" / "file-000.parquet")
        for c in cameras:
            _write_video(
                root / "videos" / f"observation.images.{c}" / "chunk-000" / "file-000.mp4",
                vids[c],
                fps,
                codec,
                gop,
                bframes,
                keys=n,  # LeRobot encodes each episode, then concatenates: every episode opens on a keyframe
            )
        (root / "meta" / "episodes" / "chunk-000").mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(ep_rows), root / "meta" / "episodes" / "chunk-000" / "file-000.parquet")
        pq.write_table(pa.table({"task_index": [0], "task": [task]}), root / "meta" / "tasks.parquet")
    (root / "meta" / "info.json").write_text(json.dumps(info, indent=1))  # written last: marks the dataset complete
    return root
