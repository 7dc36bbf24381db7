"""Ingestion benchmark: throughput vs the encoder limit, bin-packed makespan, Dagster events per episode.

    python -m bench.ingest --quick   # --smoke: 1 s episodes, one round, 6 makespan episodes, batches of 4 and 8

episode_hours_per_core_hour: legacy JPEG episodes (3 cameras 480x640 30 fps + 100 Hz state) through
    the whole conversion (JPEG decode on read-ahead threads, x264 encode, container write), per CPU hour.
vs_encoder_limit: CPU time of encoding the same, already decoded frames (held in memory in the
    decoder's own pixel format, as the pipeline hands them on) through the same writer, divided
    by the pipeline's CPU time (1.0 = reading, decoding and everything else are free).
    vs_encoder_limit_wall: the same as a throughput (wall-clock) ratio, one episode at a time.
    vs_rgb_encode: the pipeline against encoding the same frames given as RGB arrays.
    vs_encoder_limit_decode_bound: encode / (encode + JPEG read and decode alone): the most
    vs_encoder_limit can be for these frames with a CPU JPEG decoder; vs_decode_plus_encode: how
    close the pipeline comes to that sum (1.0 = nothing else costs).
    All of these are for the `bulk` profile's settings (a conversion process per core, each
    decoding and encoding on its one thread: decode_threads 0, encoder_threads 1); keys ending in
    _threaded repeat them for the default settings (2 read-ahead decode threads, x264 choosing
    its own threads). Medians over `throughput_rounds` rounds (vs_encoder_limit_rounds: each one).
pool_episode_s_per_wall_s: episode-seconds converted per wall second by the conversion stage's
    worker pool, a process per core, all cores busy (the bulk profile's situation); _threaded: the
    same pool with the default settings; pool_bulk_vs_threaded: their ratio.
makespan_vs_ideal: heavy-tailed episodes on N workers as the conversion stage runs them (largest
    estimated work first, each worker pulling the next job when it finishes), replayed on each
    episode's measured conversion time: the busiest worker's time over total / N.
    makespan_vs_ideal_static_bins: the same with fixed bins cut from the estimates up front.
events_per_episode: event-log rows of one `full` run over a batch of 1,000 tiny episodes / 1,000
    (and the same for 100, to show it does not grow).
copy: stream copy of a source's video (issue 40; bench/ingest_copy.py says what each figure is).
    --section copy runs it alone (--section is repeatable; default: every section).
reads: bytes read from each landing item by the ingest run (alignment, pre-QC, conversion) over its
    size, and with the sensor's content digest beside it; strace (bench/ingest_reads.py says how).
"""

from __future__ import annotations

import resource
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import cpu_s, emit, parse, size_of

KEYS = (
    "episode_hours_per_core_hour",
    "vs_encoder_limit",
    "vs_encoder_limit_wall",
    "vs_encoder_limit_decode_bound",
    "vs_decode_plus_encode",
    "vs_rgb_encode",
    "vs_encoder_limit_threaded",
    "vs_encoder_limit_rounds",
    "pool_episode_s_per_wall_s",
    "pool_episode_s_per_wall_s_threaded",
    "pool_bulk_vs_threaded",
    "makespan_vs_ideal",
    "makespan_vs_ideal_static_bins",
    "work_estimate_vs_time_corr",
    "events_per_episode",
    "event_rows_per_run",
    "events_runs_succeeded",
    "copy.vs_decode_plus_encode",
    "copy.vs_byte_copy",
    "copy.frames_identical_to_source",
    "copy.copied_streams",
    "copy.transcoded_streams",
    "copy.loader_vs_transcoded.vla",
    "copy.loader_vs_transcoded.wam",
    "reads.bytes_read_vs_item_size",
    "reads.with_sensor_digest_vs_item_size",
    "size",
    "peak_rss_mb",
)


@dataclass(frozen=True)
class Size:
    throughput_episodes: int
    throughput_episode_s: float
    throughput_rounds: int
    pool_jobs: int
    pool_rounds: int
    makespan_episodes: int
    event_batches: tuple[int, ...]  # episodes per Dagster run; the largest is also run as `bulk`


SIZES = {
    "smoke": Size(1, 1.0, 1, 2, 1, 6, (4, 8)),
    "quick": Size(1, 4.0, 5, 4, 3, 40, (100, 1000)),
    "full": Size(3, 10.0, 3, 8, 3, 120, (100, 1000)),
}


def own_cpu_s() -> float:
    a = resource.getrusage(resource.RUSAGE_SELF)
    return a.ru_utime + a.ru_stime


def throughput(tmp: Path, episodes: int, duration_s: float, rounds: int) -> dict:
    """The conversion as the `bulk` profile runs it (IngestSettings.for_bulk: a process per core,
    each reading, decoding and encoding on its one thread) and, for reference, with the default
    settings (decode read-ahead threads, x264 choosing its own threads; keys ending in _threaded).
    CPU time on a shared machine drifts by tens of percent from one second to the next, so each
    round measures the pipeline and its baselines back to back for both, and every figure is the
    median over rounds of that round's ratio."""
    from robodata.ingest.settings import IngestSettings
    from robodata.ingest.synth import SynthConfig, synthesize

    eps = synthesize(SynthConfig(episodes=episodes, duration_s=duration_s), tmp / "landing")
    configs = {"": IngestSettings().for_bulk(1), "_threaded": IngestSettings()}
    runs: dict[str, list[dict]] = {k: [] for k in configs}
    for r in range(rounds):
        for key, settings in configs.items():
            runs[key].append(_measure(tmp, eps, settings, rgb=(r == 0 and key == "")))
    bulk = configs[""]
    out = {
        "encoder_threads": bulk.video.threads,
        "decode_threads": bulk.decode_threads,
        "throughput_rounds": rounds,
        **_figures(runs[""]),
    }
    threaded = _figures(runs["_threaded"])
    out.update(
        {
            f"{k}_threaded": threaded[k]
            for k in (
                "episode_hours_per_core_hour",
                "vs_encoder_limit",
                "vs_encoder_limit_decode_bound",
                "vs_decode_plus_encode",
                "encode_cpu_ms_per_frame",
                "vs_encoder_limit_wall",
            )
        }
    )
    out["vs_encoder_limit_rounds"] = [round(m["enc_cpu"] / m["pipe_cpu"], 3) for m in runs[""]]
    return out


def _figures(ms: list[dict]) -> dict:
    def med(f) -> float:
        return float(np.median([f(m) for m in ms]))

    out = {
        "episode_hours_per_core_hour": round(med(lambda m: m["ep_s"] / m["pipe_cpu"]), 3),
        "vs_encoder_limit": round(med(lambda m: m["enc_cpu"] / m["pipe_cpu"]), 3),
        "vs_encoder_limit_wall": round(med(lambda m: m["enc_wall"] / m["pipe_wall"]), 3),
        # What vs_encoder_limit could reach if everything but reading+decoding JPEGs were free, and
        # how close the pipeline gets to that (1.0 = no cost beyond decode + encode).
        "vs_encoder_limit_decode_bound": round(med(lambda m: m["enc_cpu"] / (m["enc_cpu"] + m["dec_cpu"])), 3),
        "vs_decode_plus_encode": round(med(lambda m: (m["enc_cpu"] + m["dec_cpu"]) / m["pipe_cpu"]), 3),
        "jpeg_decode_cpu_ms_per_frame": round(med(lambda m: m["dec_cpu"] / m["frames"]) * 1e3, 3),
        "encode_cpu_ms_per_frame": round(med(lambda m: m["enc_cpu"] / m["frames"]) * 1e3, 3),
        "pipeline_cpu_s_per_episode_s": round(med(lambda m: m["pipe_cpu"] / m["ep_s"]), 3),
        "encode_cpu_s_per_episode_s": round(med(lambda m: m["enc_cpu"] / m["ep_s"]), 3),
        "throughput_episode_s": round(ms[0]["ep_s"], 2),
    }
    rgb = [m["rgb_cpu"] / m["pipe_cpu"] for m in ms if "rgb_cpu" in m]
    if rgb:
        out["vs_rgb_encode"] = round(rgb[0], 3)
    return out


def _measure(tmp: Path, eps: list[Path], settings, rgb: bool) -> dict:
    """CPU and wall seconds of the pipeline, of reading + decoding the JPEGs alone, and of encoding
    the decoded frames alone (the same writer and layout), over `eps`."""
    from robodata.codecs.video import to_rgb
    from robodata.container import EpisodeWriter
    from robodata.ingest.align import aligned_tracks
    from robodata.ingest.convert import convert, episode_meta, layout_for
    from robodata.ingest.importers.legacy import open_legacy

    video = settings.video
    m = dict.fromkeys(("pipe_cpu", "pipe_wall", "dec_cpu", "enc_cpu", "enc_wall", "ep_s", "frames"), 0.0)
    if rgb:
        m["rgb_cpu"] = 0.0
    for i, ep in enumerate(eps):
        raw = open_legacy(str(ep), decode_threads=settings.decode_threads)
        al = aligned_tracks(raw)
        c0, w0 = cpu_s(), time.perf_counter()
        res = convert(raw, al, tmp / f"p{i}.rdep", video)
        m["pipe_cpu"] += cpu_s() - c0
        m["pipe_wall"] += time.perf_counter() - w0
        m["ep_s"] += res.duration_s
        m["frames"] += sum(res.frames.values())
        raw = open_legacy(str(ep), decode_threads=0)
        assert raw.frames is not None, "a legacy episode always has its frames"
        c0 = cpu_s()
        # read + JPEG decode alone, on this thread: the part encode-only leaves out
        frames: list | None = list(raw.frames())
        m["dec_cpu"] += cpu_s() - c0
        cam_t = {c: al.times(c, cam.t_ns) for c, cam in raw.cameras.items()}
        c0, w0 = cpu_s(), time.perf_counter()
        assert frames is not None
        with EpisodeWriter(tmp / f"e{i}.rdep", episode_meta(raw, al), layout_for(raw, video)) as w:
            for cam, k, img in frames:
                w.write_frame(cam, img, int(cam_t[cam][k]))
            for s, a in raw.arrays.items():
                w.write_array(s, al.times(s, a.t_ns), a.values)
        m["enc_cpu"] += cpu_s() - c0
        m["enc_wall"] += time.perf_counter() - w0
        if rgb:  # Reference: the same frames as RGB arrays (what the writer took before frames went in as YUV).
            rgbs = [(cam, k, to_rgb(f) if not isinstance(f, np.ndarray) else f) for cam, k, f in frames]
            frames = None
            c0 = cpu_s()
            with EpisodeWriter(tmp / f"r{i}.rdep", episode_meta(raw, al), layout_for(raw, video)) as w:
                for cam, k, img in rgbs:
                    w.write_frame(cam, img, int(cam_t[cam][k]))
            m["rgb_cpu"] += cpu_s() - c0
            del rgbs
        del frames
    return m


def pool(tmp: Path, jobs: int, rounds: int) -> dict:
    """Throughput where it is earned: the conversion stage's worker pool (robodata.ingest.workers.dispatch,
    one process per core) fed `jobs` copies of the throughput episode, wall clock, for the bulk
    settings against the threaded defaults, alternating per round (median of each)."""
    import os

    from robodata.ingest.align import aligned_tracks
    from robodata.ingest.importers.legacy import open_legacy
    from robodata.ingest.settings import IngestSettings
    from robodata.ingest.workers.dispatch import run_pool

    ep = sorted(p for p in (tmp / "landing").iterdir() if p.is_dir())[0]
    al = aligned_tracks(open_legacy(str(ep), decode_threads=0)).to_json()
    cores = os.cpu_count() or 1
    configs = {
        "bulk": IngestSettings().for_bulk(cores),
        "threaded": IngestSettings(workers=cores),
    }
    rates: dict[str, list[float]] = {k: [] for k in configs}
    for r in range(rounds):
        for key, s in configs.items():
            js = [
                {
                    "uri": str(ep),
                    "kind": "legacy-jpeg",
                    "episode_id": f"{key}{k}",
                    "alignment_json": al,
                    "container": str(tmp / "pool" / f"{key}{r}-{k}.rdep"),
                }
                for k in range(jobs)
            ]
            t0 = time.perf_counter()
            rows = run_pool(js, s.workers, s.to_dict())
            wall = time.perf_counter() - t0
            if not all(row["ok"] for row in rows):
                raise RuntimeError(f"pool conversion failed: {[row['error'] for row in rows if not row['ok']][:2]}")
            rates[key].append(sum(row["duration_s"] for row in rows) / wall)
            for j in js:
                Path(j["container"]).unlink()
    med = {k: float(np.median(v)) for k, v in rates.items()}
    return {
        "pool_workers": cores,
        "pool_jobs": jobs,
        "pool_episode_s_per_wall_s": round(med["bulk"], 3),
        "pool_episode_s_per_wall_s_threaded": round(med["threaded"], 3),
        "pool_bulk_vs_threaded": round(med["bulk"] / med["threaded"], 3),
    }


def makespan(tmp: Path, n: int, workers: int) -> dict:
    from robodata.ingest.align import aligned_tracks
    from robodata.ingest.convert import convert
    from robodata.ingest.importers.legacy import open_legacy
    from robodata.ingest.landing.scan import scan
    from robodata.ingest.steps.aligned_tracks import decoded_bytes
    from robodata.ingest.synth import SynthConfig, synthesize
    from robodata.ingest.workers.binpack import balance, list_schedule, lpt_order, work_estimate

    rng = np.random.default_rng(3)
    durs = np.clip(rng.lognormal(0.0, 0.8, n), 0.3, 8.0)  # heavy-tailed episode lengths, seconds
    land = tmp / "mk"
    for i, d in enumerate(durs):
        synthesize(
            SynthConfig(
                episodes=1,
                duration_s=float(d),
                height=64,
                width=96,
                fps=15.0,
                state_hz=50.0,
                seed=100 + i,
                site=f"s{i}",
            ),
            land,
        )
    items = sorted(scan(str(land)), key=lambda it: it.name)
    secs, work = [], []
    for i, it in enumerate(items):
        raw = open_legacy(it.uri, decode_threads=0)
        work.append(work_estimate(decoded_bytes(raw), it.size_bytes))
        t0 = own_cpu_s()  # CPU time of this process (encoder threads included): steadier than wall under load
        convert(raw, aligned_tracks(raw), tmp / f"mk{i}.rdep")
        secs.append(own_cpu_s() - t0)
    ideal = sum(secs) / workers
    # What the conversion stage does: jobs largest-estimate-first, pulled by workers as they finish.
    order = lpt_order(work, [it.uri for it in items])
    pulled = list_schedule([secs[i] for i in order], workers)
    span = max(sum(secs[order[k]] for k in b) for b in pulled)
    static = max(sum(secs[i] for i in b) for b in balance(work, workers))  # fixed bins cut from estimates
    return {
        "makespan_vs_ideal": round(span / ideal, 3),
        "makespan_vs_ideal_static_bins": round(static / ideal, 3),
        "makespan_workers": workers,
        "makespan_episodes": n,
        "work_estimate_vs_time_corr": round(float(np.corrcoef(work, secs)[0, 1]), 3),
        "makespan_bound_max_item": round(max(secs) / (sum(secs) / workers), 3),
    }


def _options(ap) -> None:
    ap.add_argument("--section", action="append", choices=SECTIONS, help="run only this section (repeatable)")


SECTIONS = ("throughput", "pool", "makespan", "events", "copy", "reads")


def main() -> None:
    from bench.ingest_copy import copy_section
    from bench.ingest_events import events
    from bench.ingest_reads import reads_section

    args = parse(__doc__.splitlines()[0], extra=_options)
    only = set(args.section or SECTIONS)
    size = SIZES[size_of(args)]
    result: dict[str, Any] = {"quick": bool(args.quick), "size": size_of(args)}
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as d:
        tmp = Path(d)
        if "throughput" in only:
            result.update(throughput(tmp, size.throughput_episodes, size.throughput_episode_s, size.throughput_rounds))
        if "pool" in only:
            result.update(pool(tmp, size.pool_jobs, size.pool_rounds))
        if "makespan" in only:
            result.update(makespan(tmp, size.makespan_episodes, 4))
        if "events" in only:
            result.update(events(tmp, size.event_batches))
        if "copy" in only:  # issue 40: the source's bitstream kept (bench/ingest_copy.py)
            result["copy"] = copy_section(tmp, size_of(args))
        if "reads" in only:  # issue 39: each landing item read about once
            result["reads"] = reads_section(tmp, size_of(args))
    emit(result)


if __name__ == "__main__":
    main()
