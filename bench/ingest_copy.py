"""bench.ingest section `copy` (issue 40): ingest at the byte limit, a source's bitstream kept as it is.

Inputs: a synthetic LeRobot v2.1 dataset with AV1 GOP-2 video, plus the real LeRobot fixtures where
present (bench.realdata_fixtures: lerobot_v21_g1_av1, AV1 GOP 2, 640x480; lerobot_v30_open50,
MPEG-4 part 2, which the loader does not decode: transcoded, with its reason), and synthetic MCAP
episodes whose cameras are foxglove.CompressedVideo H.264 (protobuf, GOP 2; the byte copy copies
the .mcap file; Annex B packets carry no sizes, so their copy's verification decodes every GOP by
default (annexb_decode="all": a copy of them costs a decode of their video, see per_input;
docs/ingestion.md says what annexb_decode="sample" trades for its speed).

Per episode, after its import and alignment (as bench.ingest times the conversion stage):
copy_*: `convert` with --video auto (demux, header checks, write, verification); floor_*: the
transcoding floor, the source's frames decoded (PyAV, one thread) plus encoded by the writer in
the ingestion default (x264, one thread); byte_*: the episode's source files (videos + parquet)
copied and fsync'ed (the container write fsyncs too). vs_decode_plus_encode = floor CPU / copy
CPU (_wall: wall over wall); vs_byte_copy = byte wall / copy wall (_cpu: CPU over CPU), over the
copied episodes, medians over rounds. frames_identical_to_source: every frame of every copied
stream, read back through EpisodeReader, equals PyAV's decode of the same source packets.
loader_vs_transcoded: for vla and wam, PatternDataset samples/s (CPU) on the episodes ingested
with --video auto under the advisor's plan for that pattern over samples/s on the same episodes
transcoded into that plan's layout; `advisor_chose` says where auto transcoded instead (and
`copy_forced_vs_transcoded` what --video copy would have given). annexb_decode_sample: the two
speed figures with the MCAP episodes copied under annexb_decode="sample" (not the default: a packet
cut short inside its slice data is then stored as recorded unless its GOP is sampled).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import av
import numpy as np

from bench.common import cpu_s
from bench.realdata_fixtures import REAL, present


def _datasets(tmp: Path, size: str) -> list[tuple[str, str, list[str]]]:
    """(label, kind, uris) of every LeRobot input."""
    import json

    from robodata.ingest.importers.lerobot import dataset_episodes
    from robodata.ingest.synth.lerobot import write_lerobot

    n, secs, hw = {"smoke": (1, 5, (64, 64)), "quick": (2, 6, (480, 640))}.get(size, (4, 10, (480, 640)))
    root = write_lerobot(
        tmp / "synth_av1_gop2", episodes=n, frames_per_episode=secs * 30, fps=30, height=hw[0], width=hw[1],
        codec="av1", cameras=("top", "wrist"), gop=2,
    )  # fmt: skip
    out = [("synthetic_av1_gop2", root)]
    for name in ("lerobot_v21_g1_av1", "lerobot_v30_open50"):
        if present(f"{name}/meta/info.json"):
            out.append((name, REAL / name))
    res = []
    for label, r in out:
        kind = "lerobot-" + json.loads((Path(r) / "meta" / "info.json").read_text())["codebase_version"]
        eps = [e.index for e in dataset_episodes(str(r))]
        res.append((label, kind, [f"{r}#{i}" for i in eps]))
    res.append(("synthetic_mcap_h264", "mcap", _mcap(tmp / "synth_mcap_h264", n, secs, hw)))
    return res


def _mcap(root: Path, n: int, secs: int, hw: tuple[int, int]) -> list[str]:
    """MCAP episodes with foxglove.CompressedVideo H.264 (libx264, GOP 2, SPS/PPS on keyframes)
    cameras, protobuf-encoded as Foxglove writes them, plus joint states and events (JSON)."""
    from robodata.ingest.synth.episode import SynthConfig, make_episode
    from robodata.ingest.synth.mcap import write_mcap_episode
    from robodata.ingest.synth.mcap_video import CompressedVideoSpec

    root.mkdir(parents=True, exist_ok=True)
    cfg = SynthConfig(
        episodes=n, duration_s=secs, cameras=("top", "wrist"), height=hw[0], width=hw[1], fps=30.0, format="mcap"
    )
    spec = CompressedVideoSpec(gop=2, encoding="protobuf")
    return [str(write_mcap_episode(make_episode(cfg, i), root, video=spec)) for i in range(n)]


def _source_files(raw) -> list[str]:
    """The episode's video files and its parquet file (v2.1: one a episode); an MCAP's own file."""
    if raw.uri.endswith(".mcap"):
        return [raw.uri]
    vids = sorted({raw.video_sources(c).origin for c in raw.cameras})
    root, _, idx = raw.uri.partition("#")
    parquet = sorted(Path(root, "data").rglob(f"episode_{int(idx):06d}.parquet")) or sorted(
        Path(root, "data").rglob("*.parquet")
    )
    return vids + [str(p) for p in parquet[:1]]


def _byte_copy(files: list[str], dst: Path) -> tuple[float, float]:
    c0, w0 = cpu_s(), time.perf_counter()
    for i, f in enumerate(files):
        shutil.copyfile(f, dst / f"{i}")
        fd = os.open(dst / f"{i}", os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    return cpu_s() - c0, time.perf_counter() - w0


def _floor(raw, al, out: Path) -> tuple[float, float]:
    """The source's frames decoded (one thread), then encoded by the writer in the ingestion default."""
    from robodata.container import EpisodeWriter
    from robodata.container.meta import VideoSettings
    from robodata.ingest.convert import episode_meta, layout_for

    c0, w0 = cpu_s(), time.perf_counter()
    frames = list(raw.frames())
    cam_t = {c: al.times(c, cam.t_ns) for c, cam in raw.cameras.items()}
    with EpisodeWriter(out, episode_meta(raw, al), layout_for(raw, VideoSettings(threads=1))) as w:
        for cam, k, img in frames:
            w.write_frame(cam, img, int(cam_t[cam][k]))
        for s, a in raw.arrays.items():
            w.write_array(s, al.times(s, a.t_ns), a.values)
    return cpu_s() - c0, time.perf_counter() - w0


def source_frames(src) -> list[np.ndarray]:
    """PyAV's decode of a SourceVideo's packets (RGB, in pts order): the source's own frames."""
    ctx = av.CodecContext.create({"av1": "libdav1d"}.get(src.codec, src.codec), "r")
    if src.extradata:
        ctx.extradata = src.extradata
    out = {}
    for p in src.packets:
        pkt = av.Packet(p.data)
        pkt.pts, pkt.dts = p.pts, p.dts
        out.update({f.pts: f.to_ndarray(format="rgb24") for f in ctx.decode(pkt)})
    out.update({f.pts: f.to_ndarray(format="rgb24") for f in ctx.decode(None)})
    return [out[k] for k in sorted(out)]


def _identical(path: Path, raw) -> bool:
    """Every frame of each copied stream equals PyAV's decode of the same source packets."""
    from robodata.container import EpisodeReader

    r = EpisodeReader.open(path)
    ok = True
    for cam, d in (r.meta.extra.get("video") or {}).items():
        if d["mode"] != "copy":
            continue
        frames = source_frames(raw.video_sources(cam))
        got = r.read_window(-1.0, float("inf"), [cam])[cam].data
        ok = ok and len(got) == len(frames) and all(np.array_equal(a, b) for a, b in zip(got, frames, strict=True))
    r.close()
    return ok


def _ingest(datasets, tmp: Path, rounds: int) -> dict[str, Any]:
    from robodata.ingest.align import aligned_tracks
    from robodata.ingest.convert import convert
    from robodata.ingest.importers import open_raw
    from robodata.ingest.video_copy import VideoCopyConfig

    rows: list[dict] = []
    copied = transcoded = 0
    identical = True
    reasons: dict[str, str] = {}
    (tmp / "bytes").mkdir(exist_ok=True)
    for label, kind, uris in datasets:
        for j, uri in enumerate(uris):
            raw = open_raw(uri, kind)
            al = aligned_tracks(raw)
            out = tmp / f"{label}-{j}.rdep"
            m = {"label": label, "copy": [], "floor": [], "byte": []}
            for _ in range(rounds):
                c0, w0 = cpu_s(), time.perf_counter()
                res = convert(raw, al, out, copy=VideoCopyConfig(mode="auto"))
                m["copy"].append((cpu_s() - c0, time.perf_counter() - w0))
            if kind == "mcap":  # what the sampled option would give it (the defaults' figures are above)
                m["sampled"] = []
                for _ in range(rounds):
                    c0, w0 = cpu_s(), time.perf_counter()
                    convert(raw, al, tmp / "sampled.rdep", copy=VideoCopyConfig(mode="auto", annexb_decode="sample"))
                    m["sampled"].append((cpu_s() - c0, time.perf_counter() - w0))
            modes = [d["mode"] for d in res.video.values()]
            copied += modes.count("copy")
            transcoded += modes.count("transcode")
            reasons.update({f"{label}/{c}": f"{d['mode']}: {d['reason']}" for c, d in res.video.items()})
            if "copy" not in modes:
                continue
            identical = identical and _identical(out, raw)
            files = _source_files(raw)
            for _ in range(rounds):
                m["floor"].append(_floor(raw, al, tmp / "floor.rdep"))
                m["byte"].append(_byte_copy(files, tmp / "bytes"))
            m["frames"] = sum(res.frames.values())
            m["source_bytes"] = sum(os.path.getsize(f) for f in files)
            rows.append(m)
    return {"rows": rows, "copied": copied, "transcoded": transcoded, "identical": identical, "reasons": reasons}


def _ratio(rows: list[dict], num: str, den: str, i: int) -> float:
    """Median over rounds of sum(num) / sum(den) over the episodes (i: 0 CPU, 1 wall)."""
    k = min(len(r[num]) for r in rows)
    per = [sum(r[num][x][i] for r in rows) / max(1e-9, sum(r[den][x][i] for r in rows)) for x in range(k)]
    return round(float(np.median(per)), 3)


def _sampled(rows: list[dict]) -> dict[str, float]:
    """The two speed figures with the Annex B (MCAP) episodes copied under annexb_decode="sample"
    (a GOP a camera decoded, not every GOP: what a packet cut short inside its slice data then
    escapes, bench.robustness copy counts), every other episode as above."""
    alt = [{**r, "copy": r.get("sampled", r["copy"])} for r in rows]
    return {"vs_decode_plus_encode": _ratio(alt, "floor", "copy", 0), "vs_byte_copy": _ratio(alt, "byte", "copy", 1)}


def _med(rows: list[dict], what: str, i: int) -> float:
    """Sum over the episodes of each one's median over rounds (i: 0 CPU, 1 wall seconds)."""
    return sum(float(np.median([x[i] for x in r[what]])) for r in rows)


def copy_section(tmp: Path, size: str) -> dict[str, Any]:
    from bench.ingest_copy_loader import loader_vs_transcoded

    tmp = tmp / "copy"
    tmp.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    datasets = _datasets(tmp, size)
    rounds = 1 if size == "smoke" else 3
    got = _ingest(datasets, tmp, rounds)
    rows = got["rows"]
    out: dict[str, Any] = {
        "inputs": {label: len(uris) for label, _, uris in datasets},
        "copied_streams": got["copied"],
        "transcoded_streams": got["transcoded"],
        "decisions": got["reasons"],
        "frames_identical_to_source": got["identical"],
    }
    if rows:
        out.update(
            {
                "vs_decode_plus_encode": _ratio(rows, "floor", "copy", 0),
                "vs_decode_plus_encode_wall": _ratio(rows, "floor", "copy", 1),
                "vs_byte_copy": _ratio(rows, "byte", "copy", 1),
                "vs_byte_copy_cpu": _ratio(rows, "byte", "copy", 0),
                "copy_cpu_ms_per_frame": round(1e3 * _med(rows, "copy", 0) / sum(r["frames"] for r in rows), 4),
                "per_input": {
                    label: {
                        "vs_decode_plus_encode": _ratio([r for r in rows if r["label"] == label], "floor", "copy", 0),
                        "vs_byte_copy": _ratio([r for r in rows if r["label"] == label], "byte", "copy", 1),
                    }
                    for label in sorted({r["label"] for r in rows})
                },
                "annexb_decode_sample": _sampled(rows),
                "copy_cpu_s": round(_med(rows, "copy", 0), 3),
                "copy_wall_s": round(_med(rows, "copy", 1), 3),
                "floor_cpu_s": round(_med(rows, "floor", 0), 3),
                "floor_wall_s": round(_med(rows, "floor", 1), 3),
                "byte_cpu_s": round(_med(rows, "byte", 0), 4),
                "byte_wall_s": round(_med(rows, "byte", 1), 4),
                "source_mb": round(sum(r["source_bytes"] for r in rows) / 1e6, 2),
            }
        )
    synth = next(uris for label, _, uris in datasets if label == "synthetic_av1_gop2")
    out["loader_vs_transcoded"], out["loader"] = loader_vs_transcoded(synth, tmp / "loader", size)
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    return out
