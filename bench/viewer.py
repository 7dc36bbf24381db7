"""Viewer benchmark: `robodata view --save` of a long 3-camera episode, and the UI previews.

    python -m bench.viewer --quick   # a 10-minute episode, 3 cameras at 320x240 30 fps (cached in .bench/)
    python -m bench.viewer --smoke   # 20 s at 64x48

The view runs as `robodata view EPISODE --save OUT.rrd --quiet` in a subprocess, so
peak_rss_mb is the viewer's own, and view_cpu_s its CPU time (wall time on a shared machine
includes waiting for a core and for imports to load). log_s: log_episode alone, in this process.
rrd_bytes_vs_container: the recording's size over the container's (the cameras' samples are
the container's own, so this is the overhead of Rerun's framing and the scalars as float64).
preview_*_per_batch: robodata.viz.preview.batch_preview over three episodes plus
quarantine_preview of one (a gap finding), as an ingest batch asset would call them.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.common import BENCH_DIR, emit, parse, size_of, timer
from robodata.container import EpisodeMeta, EpisodeWriter, StreamSpec
from robodata.container.meta import VideoSettings, default_layout
from robodata.ingest.synth.scene import SceneRenderer

CAMS = ("cam_left", "cam_right", "wrist")
FPS, STATE_HZ = 30.0, 100.0
KEYS = (
    "episode_s",
    "view_s",
    "view_s_per_episode_minute",
    "rrd_bytes_vs_container",
    "reencoded_frames",
    "peak_rss_mb",
    "preview_ms_per_batch",
    "preview_bytes_per_batch",
)


@dataclass(frozen=True)
class Size:
    seconds: float
    height: int
    width: int


SIZES = {"smoke": Size(20.0, 48, 64), "quick": Size(600.0, 240, 320), "full": Size(1800.0, 240, 320)}
LOOP = 150  # distinct rendered frames per camera (5 s), cycled with a moving offset


def generate(path: Path, size: Size) -> None:
    """A size.seconds-long episode: 3 cameras (h264, gop 30, crf 23), joint_pos/joint_cur/cmd at 100 Hz, events."""
    h, w = size.height, size.width
    streams = {c: StreamSpec(c, "video", FPS, (h, w, 3)) for c in CAMS}
    for s in ("joint_pos", "joint_cur", "cmd"):
        streams[s] = StreamSpec(s, "array", STATE_HZ, (7,), names=tuple(f"j{i}" for i in range(7)))
    streams["events"] = StreamSpec("events", "events")
    meta = EpisodeMeta(path.stem, "robot-v", "site-v", "bench", 0, streams)
    layout = default_layout(
        CAMS, events=("events",), video=VideoSettings()
    )  # ingestion's default: h264, gop 30, crf 23
    rend = {c: SceneRenderer(h, w, seed=5, view=i) for i, c in enumerate(CAMS)}
    loop = {
        c: [rend[c].render(i / FPS, np.full(7, 0.3 * np.sin(i / 20)), i > LOOP // 2) for i in range(LOOP)] for c in CAMS
    }
    n = int(size.seconds * FPS)
    tmp = path.with_suffix(".part")
    with EpisodeWriter(tmp, meta, layout) as wr:
        for i in range(n):
            for c in CAMS:
                frame = np.roll(loop[c][i % LOOP], (i // LOOP) % w, axis=1)
                wr.write_frame(c, frame, int(i * 1e9 / FPS))
        # arrays in 60 s pieces: memory stays flat however long the episode is
        step = int(60 * STATE_HZ)
        total = int(size.seconds * STATE_HZ)
        for s, phase in (("joint_pos", 0.0), ("joint_cur", 1.0), ("cmd", 2.0)):
            for a in range(0, total, step):
                t = (np.arange(a, min(a + step, total)) * 1e9 / STATE_HZ).astype(np.int64)
                v = np.sin(t[:, None] / 1e9 * 0.7 + np.arange(7) + phase).astype(np.float32)
                wr.write_array(s, t, v)
        te = np.arange(0, int(size.seconds), 10, dtype=np.int64) * 1_000_000_000
        wr.write_events("events", te, [f"event {i}" for i in range(len(te))])
    os.replace(tmp, path)


def view(path: Path, out: Path) -> tuple[float, dict, float, float]:
    """(seconds, the command's JSON, its peak RSS MB, its CPU seconds) of `robodata view path --save out`."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    before = r0.ru_maxrss
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-m", "robodata.cli", "view", str(path), "--save", str(out), "--quiet"],
        capture_output=True,
        text=True,
        check=False,
    )
    dt = time.perf_counter() - t0
    if p.returncode:
        raise SystemExit(f"robodata view failed:\n{p.stderr[-4000:]}")
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    return dt, json.loads(p.stdout.strip().splitlines()[-1]), round(max(r1.ru_maxrss, before) / 1024, 1), cpu


def log_in_process(path: Path, out: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of log_episode alone, in this process: the command without the
    interpreter's start and imports (seconds of I/O-bound wall time on a busy machine)."""
    import rerun as rr

    from robodata.container import EpisodeReader
    from robodata.viz.record import log_episode

    r = EpisodeReader.open(path)
    rec = rr.RecordingStream("robodata-bench", recording_id="bench")
    rec.save(str(out))
    cpu = time.process_time()
    with timer() as t:
        log_episode(r, rec)
        rec.flush()
        rec.disconnect()
    r.close()
    return t[0], time.process_time() - cpu


def previews(path: Path) -> tuple[float, float, int]:
    from robodata.viz.preview import batch_preview, quarantine_preview
    from robodata.viz.qc import QcFinding

    finding = QcFinding("pre", "gaps", False, True, "joint_pos: gap of 500 ms > 40 ms (4 periods)")
    uris = [str(path)] * 3
    batch_preview(uris[:1], episodes=1)  # imports (matplotlib, PIL) are not per batch
    cpu = time.process_time()
    with timer() as t:
        a = batch_preview(uris)
        b = quarantine_preview([(str(path), [finding])])
    return t[0] * 1e3, (time.process_time() - cpu) * 1e3, a.nbytes + b.nbytes


def main(argv: list[str] | None = None) -> None:
    args = parse(__doc__ or "", argv)
    size = SIZES[size_of(args)]
    BENCH_DIR.mkdir(exist_ok=True)
    path = BENCH_DIR / f"viewer-{int(size.seconds)}s-{size.width}x{size.height}-crf23.rdep"
    gen_s = 0.0
    if not path.exists():
        with timer() as t:
            generate(path, size)
        gen_s = t[0]
    out = BENCH_DIR / "viewer-out.rrd"
    view_s, result, rss, view_cpu = view(path, out)
    ms, cpu_ms, nbytes = previews(path)
    log_s, log_cpu = log_in_process(path, out)
    frames = sum(result["frames"].values())
    emit(
        {
            "episode_s": size.seconds,
            "frames": frames,
            "view_s": round(view_s, 2),
            "view_s_per_episode_minute": round(view_s / (size.seconds / 60), 3),
            "view_cpu_s": round(view_cpu, 2),  # wall time on a shared machine waits for CPU; this does not
            "log_s": round(log_s, 2),  # log_episode alone (no interpreter start, no imports)
            "log_cpu_s": round(log_cpu, 2),
            "rrd_bytes_vs_container": round(out.stat().st_size / path.stat().st_size, 3),
            "container_mb": round(path.stat().st_size / 1e6, 1),
            "reencoded_frames": result["reencoded_frames"],
            "peak_rss_mb": rss,
            "gen_s": round(gen_s, 1),
            "preview_ms_per_batch": round(ms, 1),
            "preview_cpu_ms_per_batch": round(cpu_ms, 1),
            "preview_bytes_per_batch": nbytes,
        }
    )
    out.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
