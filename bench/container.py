"""Container benchmark: storage vs per-frame JPEG, bytes per window vs a time-interleaved
stream, random-frame latency at short and long GOP, window decode rate, encode overhead.

    python -m bench.container --quick   # 6 s at 640x480 (--smoke: 6 s at 160x120; full: 20 s at 640x480)
"""

from __future__ import annotations

import random
import struct
import time
from dataclasses import dataclass

import numpy as np

from bench.common import BENCH_DIR, emit, parse, size_of, timer
from robodata.codecs.video import VideoEncoder
from robodata.container import EpisodeMeta, EpisodeReader, EpisodeWriter, StreamSpec
from robodata.container.meta import VideoSettings, default_layout
from robodata.container.source import LocalFileSource
from robodata.ingest.synth.episode import jpeg_bytes
from robodata.ingest.synth.scene import SceneRenderer

CAMS = ("cam_left", "cam_right", "wrist")
FPS, STATE_HZ = 30.0, 100.0
KEYS = (
    "frames",
    "resolution",
    "storage_ratio_vs_jpeg",
    "window_bytes_ratio_vs_interleaved.camera",
    "window_bytes_ratio_vs_interleaved.proprio",
    "random_frame_ms.gop2",
    "random_frame_ms.gop60",
    "window_decode_fps",
    "encode_fps",
    "encode_overhead",
    "peak_rss_mb",
)


@dataclass(frozen=True)
class Size:
    seconds: float  # >= 6: the 2 s windows read start at 2.5 s and the GOP-60 window ends at 5 s
    height: int
    width: int
    random_frames: int


SIZES = {
    "smoke": Size(6.0, 120, 160, 10),
    "quick": Size(6.0, 480, 640, 40),
    "full": Size(20.0, 480, 640, 40),
}


def render(seconds: float, h: int, w: int) -> tuple[dict[str, list[np.ndarray]], np.ndarray, np.ndarray]:
    n = int(seconds * FPS)
    rend = {c: SceneRenderer(h, w, seed=11, view=i) for i, c in enumerate(CAMS)}
    rng = np.random.default_rng(0)
    tj = (np.arange(int(seconds * STATE_HZ)) * 1e9 / STATE_HZ).astype(np.int64)
    joints = (0.6 * np.sin(tj[:, None] / 1e9 * rng.uniform(0.5, 2, 7) + rng.uniform(0, 6, 7))).astype(np.float32)
    frames: dict[str, list[np.ndarray]] = {c: [] for c in CAMS}
    for i in range(n):
        k = min(len(tj) - 1, int(i / FPS * STATE_HZ))
        for c in CAMS:
            frames[c].append(rend[c].render(i / FPS, joints[k], i > n // 2))
    return frames, tj, joints


def meta(episode_id: str, h: int, w: int) -> EpisodeMeta:
    streams = {c: StreamSpec(c, "video", FPS, (h, w, 3)) for c in CAMS}
    for s in ("joint_pos", "joint_cur", "cmd"):
        streams[s] = StreamSpec(s, "array", STATE_HZ, (7,))
    return EpisodeMeta(episode_id, "robot-b", "site-b", "bench", 0, streams)


def write_container(path, frames, tj, joints, video: VideoSettings) -> float:
    n = len(frames[CAMS[0]])
    h, w_ = frames[CAMS[0]][0].shape[:2]
    layout = default_layout(CAMS, events=(), video=video)
    with timer() as t, EpisodeWriter(path, meta(path.stem, h, w_), layout) as w:
        for i in range(n):
            for c in CAMS:
                w.write_frame(c, frames[c][i], int(i * 1e9 / FPS))
        for s in ("joint_pos", "joint_cur", "cmd"):
            w.write_array(s, tj, joints)
    return t[0]


def raw_encode(frames, video: VideoSettings) -> float:
    h, w = frames[CAMS[0]][0].shape[:2]
    encs = {
        c: VideoEncoder(video.codec, w, h, FPS, video.gop, video.crf, video.preset, video.bframes, video.threads)
        for c in CAMS
    }
    n = len(frames[CAMS[0]])
    with timer() as t:
        for i in range(n):
            for c in CAMS:
                encs[c].encode(frames[c][i])
        for e in encs.values():
            e.flush()
    return t[0]


def write_interleaved(path, frames_path) -> list[tuple[int, int, int, int]]:
    """The same packets and samples as one time-ordered stream; returns (t_ns, offset, length, kind) per
    record (kind 0: a camera packet, 1: an array sample)."""
    r = EpisodeReader.open(frames_path)
    records: list[tuple[int, int, bytes]] = []  # (t, kind, payload)
    from robodata.codecs.arrays import decode_packets

    for c in r.chunks:
        blob = r.source.read(c.offset, c.length)
        for p in c.parts:
            part = blob[p.offset : p.offset + p.length]
            if c.group == "cameras":
                tab = decode_packets(part)
                for t, d in zip(tab.column("t_ns").to_pylist(), tab.column("data").to_pylist(), strict=True):
                    records.append((t, 0, d))
    win = r.read_window(0, 1e9, ["joint_pos", "joint_cur", "cmd"])
    for wv in win.values():
        for t, v in zip((wv.t * 1e9).round().astype(np.int64), wv.data, strict=True):
            records.append((int(t), 1, v.tobytes()))
    records.sort(key=lambda x: x[0])
    index = []
    with open(path, "wb") as f:
        off = 0
        for t, kind, payload in records:
            head = struct.pack("<qBI", t, kind, len(payload))
            f.write(head + payload)
            index.append((t, off, len(head) + len(payload), kind))
            off += len(head) + len(payload)
    return index


def interleaved_window_bytes(src: LocalFileSource, index, t0: int, t1: int, camera: bool, gop_ns: int) -> int:
    # A camera window must start at the keyframe at or before t0 (GOPs start at multiples of gop_ns).
    start_t = (t0 // gop_ns) * gop_ns if camera else t0
    sel = [(o, n) for t, o, n, _ in index if start_t <= t <= t1]
    lo, hi = sel[0][0], sel[-1][0] + sel[-1][1]
    return len(src.read(lo, hi - lo))  # one contiguous range read, perfect index (best case)


def random_frame_ms(path, n: int, seed: int) -> float:
    r = EpisodeReader.open(path)
    dur = r.meta.duration_s
    rng = random.Random(seed)
    r.read_window(0.0, 0.0, ["cam_left"])  # warm-up
    t = time.perf_counter()
    for _ in range(n):
        x = rng.randrange(int(dur * FPS)) / FPS  # one frame's instant
        win = r.read_window(x - 0.2 / FPS, x + 0.2 / FPS, ["cam_left"])
        assert len(win["cam_left"].t) == 1
    return (time.perf_counter() - t) / n * 1000


def main() -> None:
    args = parse(__doc__ or "")
    size = SIZES[size_of(args)]
    out = BENCH_DIR / "container"
    out.mkdir(parents=True, exist_ok=True)
    frames, tj, joints = render(size.seconds, size.height, size.width)
    n_frames = len(frames[CAMS[0]]) * len(CAMS)
    jpeg_total = sum(len(jpeg_bytes(f, 90)) for c in CAMS for f in frames[c])

    default = VideoSettings()  # h264, GOP 30, CRF 23, veryfast
    t_raw = min(raw_encode(frames, default) for _ in range(2))
    t_cont = min(write_container(out / "default.rdep", frames, tj, joints, default) for _ in range(2))
    container_bytes = (out / "default.rdep").stat().st_size

    write_container(out / "gop2.rdep", frames, tj, joints, VideoSettings(gop=2))
    write_container(out / "gop60.rdep", frames, tj, joints, VideoSettings(gop=60))

    # Bytes for 2 s windows: container vs one time-interleaved stream of the same data.
    index = write_interleaved(out / "interleaved.bin", out / "default.rdep")
    isrc = LocalFileSource(out / "interleaved.bin")
    t0, t1 = int(2.5e9), int(4.5e9)
    gop_ns = int(default.gop / FPS * 1e9)
    ratios = {}
    for name, streams, camera in (("camera", list(CAMS), True), ("proprio", ["joint_pos", "joint_cur", "cmd"], False)):
        r = EpisodeReader.open(out / "default.rdep")
        r.read_window(t0 / 1e9, t1 / 1e9, streams)
        ratios[name] = round(r.stats.bytes_read / interleaved_window_bytes(isrc, index, t0, t1, camera, gop_ns), 4)

    r60 = EpisodeReader.open(out / "gop60.rdep", decode_threads=1)
    with timer() as tw:
        win = r60.read_window(1.0, 5.0, list(CAMS))
    decoded = sum(len(w.t) for w in win.values())

    emit(
        {
            "frames": n_frames,
            "resolution": f"{size.width}x{size.height}",
            "codec": "h264",
            "gop": default.gop,
            "crf": default.crf,
            "storage_ratio_vs_jpeg": round(jpeg_total / container_bytes, 2),
            "jpeg_bytes": jpeg_total,
            "container_bytes": container_bytes,
            "window_bytes_ratio_vs_interleaved": ratios,
            "random_frame_ms": {
                "gop2": round(random_frame_ms(out / "gop2.rdep", size.random_frames, 1), 2),
                "gop60": round(random_frame_ms(out / "gop60.rdep", size.random_frames, 1), 2),
            },
            "window_decode_fps": round(decoded / tw[0], 1),
            "encode_fps": round(n_frames / t_cont, 1),
            "encode_fps_raw": round(n_frames / t_raw, 1),
            "encode_overhead": round(t_cont / t_raw, 3),
        }
    )


if __name__ == "__main__":
    main()
