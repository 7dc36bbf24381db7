"""Importers benchmark: one landing zone holding every format robodata imports plus entries of
unknown formats, ingested as one batch; per format, conversion cost against decode + encode.

    python -m bench.importers --quick   # --smoke: 1 episode a format, 1 s, 64x48

formats.<fmt>.items / converted / quarantined / unrecognized: the batch's landing items of that
    format, how many converted, how many were quarantined, and (format "unknown") how many were
    unrecognized entries (rows with their guessed kind).
formats.<fmt>.episode_hours_per_core_hour: the format's good episodes read, aligned and converted
    (bulk settings: one thread decodes and encodes), episode time per CPU hour.
formats.<fmt>.vs_decode_plus_encode: (CPU of reading + decoding the source frames alone + CPU of
    encoding those decoded frames through the same writer) / CPU of the whole conversion, as
    bench.ingest measures the JPEG path: 1.0 = nothing but decoding and encoding costs. Each
    item is measured REPEAT times (all three parts, in turn) and each part's median taken: at
    --quick a conversion is ~0.2 s of CPU, and one measurement swung 0.65-1.08 under load.
silently_skipped: landing entries that became neither an item nor a row (must be 0).
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import emit, parse, size_of

KEYS = ("formats", "silently_skipped", "peak_rss_mb")
CAMS = ("cam_left", "wrist")
# landing item kind (and name) -> the bench's format name
UNKNOWN_ENTRIES = ("flight.ulg", "euroc", "notes.txt", "capture.svo")


REPEAT = 3


def cpu_s() -> float:
    """This process's CPU time, every thread (os.times() ticks in 10 ms: 5 % of a conversion)."""
    return time.process_time()


def _landing(root: Path, n: int, duration: float, h: int, w: int) -> tuple[Path, Path, dict[str, str]]:
    """The zone, the --msgs folder, and item name prefix -> format (from the files written)."""
    from robodata.ingest.synth import SynthConfig, synthesize
    from robodata.ingest.synth.lerobot import write_lerobot

    land = root / "landing"
    land.mkdir(parents=True)
    owner: dict[str, str] = {}
    base = dict(duration_s=duration, height=h, width=w, fps=15.0, state_hz=50.0, cameras=CAMS)
    for fmt, synth in (
        ("jpeg", "jpeg"),
        ("mcap", "mcap"),
        ("ros1_bag", "ros1-bag"),
        ("ros2_bag_custom_msgs", "ros2-bag-custom"),
        ("hdf5_aloha", "hdf5-aloha"),
        ("hdf5_robomimic", "hdf5-robomimic"),
        ("zarr", "zarr"),
        ("rlds", "rlds"),
    ):
        tmp = root / f"w-{fmt}"
        for p in synthesize(SynthConfig(episodes=n, format=synth, site=fmt, **base), tmp):  # type: ignore[arg-type]
            name = f"{fmt}-{p.name}" if fmt != "ros2_bag_custom_msgs" else p.name
            if fmt == "hdf5_aloha":
                name = p.name.replace("episode_", f"episode_{len(owner)}0")
            shutil.move(str(p), land / name)
            owner[name] = fmt
    shutil.move(str(root / "w-ros2_bag_custom_msgs-msgs"), root / "msgs")
    frames = max(2, int(duration * 15))
    for fmt, ver in (("lerobot_v21", "v2.1"), ("lerobot_v30", "v3.0")):
        p = write_lerobot(
            land / fmt, ver, episodes=n, frames_per_episode=frames, fps=15, height=h, width=w, image_cameras=("side",)
        )
        owner[p.name] = fmt
    (land / "flight.ulg").write_bytes(b"ULog\x01" + bytes(256))
    (land / "euroc" / "mav0" / "cam0").mkdir(parents=True)
    (land / "notes.txt").write_text("not a recording\n")
    (land / "capture.svo").write_bytes(bytes(64))
    for name in UNKNOWN_ENTRIES:
        owner[name] = "unknown"
    return land, root / "msgs", owner


def _fmt_of(uri: str, owner: dict[str, str]) -> str:
    name = uri.split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    return owner.get(name, "unknown")


def _measure(uri: str, kind: str, options, tmp: Path, i: int) -> dict[str, float]:
    """CPU of the whole conversion, of decoding the frames alone, of encoding them alone."""
    from robodata.container import EpisodeWriter
    from robodata.container.meta import VideoSettings
    from robodata.ingest.align import aligned_tracks
    from robodata.ingest.convert import convert, episode_meta, layout_for
    from robodata.ingest.importers import open_raw

    video = VideoSettings(threads=1)
    c0 = cpu_s()
    raw = open_raw(uri, kind, None, 0, options)
    al = aligned_tracks(raw)
    res = convert(raw, al, tmp / f"p{i}.rdep", video)
    pipe = cpu_s() - c0
    raw = open_raw(uri, kind, None, 0, options)
    assert raw.frames is not None
    c0 = cpu_s()
    frames = list(raw.frames())
    dec = cpu_s() - c0
    cam_t = {c: al.times(c, cam.t_ns) for c, cam in raw.cameras.items()}
    c0 = cpu_s()
    with EpisodeWriter(tmp / f"e{i}.rdep", episode_meta(raw, al), layout_for(raw, video)) as w:
        for cam, k, img in frames:
            w.write_frame(cam, img, int(cam_t[cam][k]))
        for s, a in raw.arrays.items():
            w.write_array(s, al.times(s, a.t_ns), a.values)
    enc = cpu_s() - c0
    for f in ("p", "e"):
        (tmp / f"{f}{i}.rdep").unlink(missing_ok=True)
    return {"pipe": pipe, "dec": dec, "enc": enc, "ep_s": res.duration_s}


def run(n: int, duration: float, h: int, w: int) -> dict:
    from deltalake import DeltaTable

    from robodata.ingest.landing.batch import write_manifest
    from robodata.ingest.landing.scan import LandingCursor, new_items
    from robodata.ingest.pipeline import run_batch
    from robodata.ingest.settings import IngestSettings
    from robodata.ingest.tables import IngestPaths

    with tempfile.TemporaryDirectory(prefix="bench-importers-") as d:
        root = Path(d)
        land, msgs, owner = _landing(root, n, duration, h, w)
        paths = IngestPaths(str(root / "state"))
        s = IngestSettings(msgs=str(msgs)).for_bulk(1)
        items = new_items(str(land), LandingCursor())
        covered = {it.uri.split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1] for it in items}
        skipped = sorted(set(os.listdir(land)) - covered)
        write_manifest(paths, "b", items)
        run_batch(paths, "b", s, derived=False)
        qc = DeltaTable(paths.table("qc_results")).to_pyarrow_table().to_pylist()
        formats: dict[str, dict] = {}
        for fmt in sorted(set(owner.values())):
            formats[fmt] = {"items": 0, "converted": 0, "quarantined": 0, "unrecognized": 0}
        for r in qc:
            if r["stage"] == "summary":
                f = formats[_fmt_of(r["uri"], owner)]
                f["items"] += 1
                f["quarantined"] += int(not r["passed"])
                f["converted"] += int(r["passed"])
                f["unrecognized"] += int(r["source"] == "unrecognized")
        tmp = root / "measure"
        tmp.mkdir()
        per: dict[str, list[dict]] = {}
        for i, it in enumerate(items):
            fmt = _fmt_of(it.uri, owner)
            if fmt != "unknown":
                runs = [_measure(it.uri, it.kind, s.import_options, tmp, i) for _ in range(REPEAT)]
                per.setdefault(fmt, []).append({k: statistics.median(r[k] for r in runs) for k in runs[0]})
        for fmt, ms in per.items():
            pipe, dec, enc, ep_s = (sum(m[k] for m in ms) for k in ("pipe", "dec", "enc", "ep_s"))
            formats[fmt]["episode_hours_per_core_hour"] = round(ep_s / max(pipe, 1e-9), 2)
            formats[fmt]["vs_decode_plus_encode"] = round((dec + enc) / max(pipe, 1e-9), 3)
        formats["unknown"].update(episode_hours_per_core_hour=None, vs_decode_plus_encode=None)
    return {"formats": formats, "silently_skipped": len(skipped), "skipped_entries": skipped}


def main(argv: list[str] | None = None) -> None:
    args = parse(__doc__.splitlines()[0], argv)
    size = size_of(args)
    n, duration, h, w = {"smoke": (1, 1.0, 48, 64), "quick": (2, 4.0, 240, 320), "full": (4, 10.0, 480, 640)}[size]
    t0 = time.perf_counter()
    out = run(n, duration, h, w)
    out.update(size=size, episodes_per_format=n, episode_s=duration, wall_s=round(time.perf_counter() - t0, 1))
    emit(out)


if __name__ == "__main__":
    main()
