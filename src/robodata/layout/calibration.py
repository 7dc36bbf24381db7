"""Short measurements on this machine that the cost model is calibrated with.

From one sample episode: a few seconds of one camera are re-encoded at every candidate
CRF, all-intra and with each B-frame count, to get bytes, PSNR and decode CPU per frame
type; the episode's own chunks give the per-range-read, per-part and per-byte costs of the
reader. Everything is CPU time of the measuring thread (the loader's scarce resource).
"""

from __future__ import annotations

import functools
import time
import zlib
from collections.abc import Callable

import av
import numpy as np

from robodata.codecs.arrays import decode_array, decode_packets
from robodata.codecs.gop import B, I, P, frame_types
from robodata.codecs.video import VideoEncoder, timing_decoder, to_rgb
from robodata.container import EpisodeReader
from robodata.container.calibration import Calibration, CodecPoint
from robodata.errors import ConfigError
from robodata.layout.config import AdvisorConfig

CAL_GOP = 30


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float32) - b.astype(np.float32)) ** 2))
    return 99.0 if mse == 0 else 10 * np.log10(255.0**2 / mse)


def _encode(
    frames: list[np.ndarray],
    codec: str,
    gop: int,
    crf: int,
    preset: str,
    bframes: int,
    rate: float,
    coder: tuple[str, bool] = ("cabac", True),
):
    """`coder`: (entropy, deblock) of VideoSettings."""
    h, w, _ = frames[0].shape
    enc = VideoEncoder(codec, w, h, rate, gop, crf, preset, bframes, threads=1, entropy=coder[0], deblock=coder[1])
    pkts = []
    for f in frames:
        pkts += enc.encode(f)
    pkts += enc.flush()
    return enc.extradata, pkts


def _decode_timed(
    codec: str, extradata: bytes, pkts, gop: int, bframes: int, passes: int = 3, skip_nonref: bool = False
) -> tuple[np.ndarray, dict[int, av.VideoFrame]]:
    """Per-type mean decode CPU (min over passes) and the decoded frames by pts (last pass)."""
    types = frame_types(gop, bframes)
    best = np.full(3, np.inf)
    frames: dict[int, av.VideoFrame] = {}
    for _ in range(passes):
        ctx = timing_decoder(codec, extradata)
        if skip_nonref:
            ctx.skip_frame = "NONREF"
        tot, cnt = np.zeros(3), np.zeros(3)
        out: list[av.VideoFrame] = []
        for p in pkts:
            t = time.thread_time_ns()
            pkt = av.Packet(p.data)
            pkt.pts, pkt.dts = p.pts, p.dts
            got = ctx.decode(pkt)
            dt = time.thread_time_ns() - t
            k = types[p.pts % gop]
            tot[k] += dt
            cnt[k] += 1
            out += got
        out += ctx.decode(None)
        best = np.minimum(best, np.where(cnt > 0, tot / np.maximum(cnt, 1) / 1e9, 0.0))
        frames = {f.pts: f for f in out if f.pts is not None}  # every packet is given a pts
    return best, frames


def _codec_points(frames: list[np.ndarray], rate: float, cfg: AdvisorConfig, bframes_set: set[int]) -> list[CodecPoint]:
    """A point per (crf, bframes, entropy coder, deblocking on/off): each coder's bytes, decode cost
    and quality measured on the same frames, so the advisor weighs CAVLC's bytes, and deblocking's
    quality, against their decode."""
    points = []
    for coder, crf in ((c, crf) for c in cfg.search_coders() for crf in cfg.crfs):
        ex, pk = _encode(frames, cfg.codec, 1, crf, cfg.preset, 0, rate, coder)
        ds, dec = _decode_timed(cfg.codec, ex, pk, 1, 0)
        intra_bytes = float(np.mean([len(p.data) for p in pk]))
        intra_all = [_psnr(to_rgb(dec[i]), frames[i]) for i in sorted(dec)]
        for bf in sorted(bframes_set):
            ex, pk = _encode(frames, cfg.codec, CAL_GOP, crf, cfg.preset, bf, rate, coder)
            ds_long, dec = _decode_timed(cfg.codec, ex, pk, CAL_GOP, bf)
            types = frame_types(CAL_GOP, bf)
            by = [[len(p.data) for p in pk if types[p.pts % CAL_GOP] == k] for k in (I, P, B)]
            mean_bytes = [float(np.mean(b)) if b else 0.0 for b in by]  # indexed by I, P, B
            skip_s = 0.0
            if bf > 0:
                sk, _ = _decode_timed(cfg.codec, ex, pk, CAL_GOP, bf, skip_nonref=True)
                skip_s = float(sk[B])
            psnrs = [_psnr(to_rgb(dec[i]), frames[i]) for i in sorted(dec)]
            points.append(
                CodecPoint(
                    crf,
                    bf,
                    (mean_bytes[I], mean_bytes[P], mean_bytes[B]),
                    (float(ds_long[I]), float(ds_long[P]), float(ds_long[B])),
                    intra_bytes,
                    float(ds[I]),
                    float(np.mean(psnrs)),
                    float(np.mean(intra_all)),
                    skip_s,
                    *_floor_stats(psnrs),
                    *_floor_stats(intra_all),
                    *coder,
                )
            )
    return points


def _floor_stats(psnrs: list[float]) -> tuple[float, float]:
    """(1st percentile, median) of per-frame PSNRs: what the quality floor is checked on."""
    return float(np.percentile(psnrs, 1)), float(np.median(psnrs))


def _packet_times(part: bytes) -> np.ndarray:
    return decode_packets(part).column("t_ns").to_numpy()


def _cpu(fn, repeat: int, median: bool = False) -> float:
    """Thread CPU seconds of fn: the minimum of `repeat` runs, or their median."""
    runs = []
    for _ in range(repeat):
        t = time.thread_time_ns()
        fn()
        runs.append(time.thread_time_ns() - t)
    return float(np.median(runs) if median else min(runs)) / 1e9


def _io_costs(reader: EpisodeReader) -> tuple[float, float, float, float]:
    """(range_s, part_s, byte_s, call_s) from the sample episode's own chunks."""
    src = reader.source
    rows_read, rows_parse = [], []
    for c in reader.chunks[:64]:
        rows_read.append((c.length, _cpu(lambda c=c: zlib.crc32(src.read(c.offset, c.length)), 3)))
        blob = src.read(c.offset, c.length)
        for p in c.parts:
            part = blob[p.offset : p.offset + p.length]
            spec = reader.meta.streams[p.stream]
            fn: Callable[[], object]
            if spec.kind == "video":
                fn = functools.partial(_packet_times, part)
            elif spec.kind == "array":
                fn = functools.partial(decode_array, part, spec.shape, spec.dtype)
            else:
                continue
            rows_parse.append((p.length, _cpu(fn, 3)))

    def fit(rows) -> tuple[float, float]:
        if len(rows) < 2:
            return (rows[0][1] if rows else 0.0), 0.0
        x = np.array([[1.0, n] for n, _ in rows])
        y = np.array([t for _, t in rows])
        coef, *_ = np.linalg.lstsq(x, y, rcond=None)
        fixed, per = max(0.0, float(coef[0])), max(0.0, float(coef[1]))
        if fixed == 0.0 and per == 0.0:
            fixed = float(np.median(y))
        return fixed, per

    range_s, read_b = fit(rows_read)
    part_s, parse_b = fit(rows_parse)
    arrays = [s for s, sp in reader.meta.streams.items() if sp.kind == "array"]
    call_s = 0.0
    if arrays:
        t = reader.meta.duration_s / 2
        whole = _cpu(lambda: reader.read_window(t, t, [arrays[0]]), 5)
        call_s = max(0.0, whole - range_s - part_s)
    return range_s, part_s, read_b + parse_b, call_s


def _array_bytes(reader: EpisodeReader) -> dict[str, tuple[float, float]]:
    """Stored bytes of one array part as fixed + per-sample, per stream, from the episode's parts."""
    out: dict[str, tuple[float, float]] = {}
    for s, spec in reader.meta.streams.items():
        if spec.kind != "array":
            continue
        rows = [(p.count, p.length) for c in reader.chunks for p in c.parts if p.stream == s]
        if not rows:
            continue
        n = np.array([r[0] for r in rows], float)
        b = np.array([r[1] for r in rows], float)
        if len(rows) >= 2 and np.ptp(n) > 0:
            per, fixed = np.polyfit(n, b, 1)
            per, fixed = max(per, 0.0), max(fixed, 0.0)
        else:
            per, fixed = float(b.sum() / n.sum()), 0.0
        out[s] = (float(fixed), float(per))
    return out


def _window_overhead(
    reader: EpisodeReader, cams: list[str], cal: Calibration
) -> tuple[float, float, float, float, float]:
    """What a real read_window costs beyond the codec work: measured 1-frame windows on the sample
    episode's own layout minus their micro-model cost (decode times of those very packets)."""
    from robodata.codecs.gop import decoded_counts

    cam = cams[0]
    g = reader.layout.group_of(cam)
    v = g.video
    assert v is not None
    chunk = next(c for c in reader.chunks if any(p.stream == cam for p in c.parts))
    part = next(p for p in chunk.parts if p.stream == cam)
    tab = decode_packets(reader.source.read(chunk.offset + part.offset, part.length))

    class _Pkt:
        def __init__(self, pts, dts, data):
            self.pts, self.dts, self.data = pts, dts, data

    pkts = [
        _Pkt(int(a), int(b), d.as_py())
        for a, b, d in zip(tab.column("pts"), tab.column("dts"), tab.column("data"), strict=True)
    ]
    dec, _ = _decode_timed(cal.codec, reader.codec_extradata(cam), pkts, v.gop, v.bframes)
    rate = reader.meta.streams[cam].rate_hz
    fpc = part.count
    n_frames = int(round(reader.meta.duration_s * rate)) + 1
    single, multi = [], []
    positions = sorted({int(x) for x in np.linspace(0, min(fpc, v.gop) - 1, 8)})
    for f in positions:
        t = f / rate
        d = decoded_counts(v.gop, v.bframes, fpc, f, f, 1, n_frames)
        micro_cam = float(d.types @ dec) + d.opens * cal.open_s + d.kept * cal.rgb_s + d.chunks * cal.part_s
        micro_io = cal.call_s + cal.range_s
        packets = float(d.types.sum() + d.skipped)
        one = _cpu(lambda t=t: reader.read_window(t - 0.25 / rate, t + 0.25 / rate, [cam]), 5, median=True)
        single.append((packets, one - micro_cam - micro_io - part.length * cal.byte_s))
        if len(cams) > 1:
            allc = _cpu_process(lambda t=t: reader.read_window(t - 0.25 / rate, t + 0.25 / rate, cams), 5)
            multi.append((len(cams) * packets, allc - len(cams) * micro_cam - micro_io - chunk.length * cal.byte_s))

    def fit(rows) -> tuple[float, float]:
        x = np.array([r[0] for r in rows])
        y = np.array([r[1] for r in rows])
        if len(rows) >= 2 and np.ptp(x) > 0:
            slope, icpt = np.polyfit(x, y, 1)
            if slope < 0:
                slope, icpt = 0.0, float(np.median(y))
        else:
            slope, icpt = 0.0, float(np.median(y))
        return max(0.0, float(icpt)), max(0.0, float(slope))

    video_part_s, packet1_s = fit(single)
    pool_s, packet_s = 0.0, packet1_s
    if multi:
        icpt, packet_s = fit(multi)
        pool_s = max(0.0, icpt - len(cams) * video_part_s)
    # a whole chunk, every frame: what is left per returned frame
    d = decoded_counts(v.gop, v.bframes, fpc, 0, fpc - 1, 1, n_frames)
    micro = (
        float(d.types @ dec)
        + d.opens * (cal.open_s + video_part_s)
        + d.kept * cal.rgb_s
        + d.chunks * cal.part_s
        + cal.call_s
        + cal.range_s
        + part.length * cal.byte_s
        + packet1_s * float(d.types.sum())
    )
    whole = _cpu(lambda: reader.read_window(-0.25 / rate, (fpc - 0.75) / rate, [cam]), 3, median=True)
    frame_s = max(0.0, (whole - micro) / max(1, d.kept))
    return video_part_s, pool_s, frame_s, packet1_s, packet_s


def _cpu_process(fn, repeat: int) -> float:
    """Process CPU seconds (all threads) of fn, median of `repeat` runs."""
    runs = []
    for _ in range(repeat):
        t = time.process_time_ns()
        fn()
        runs.append(time.process_time_ns() - t)
    return float(np.median(runs)) / 1e9


def calibrate(
    reader: EpisodeReader, cfg: AdvisorConfig, bframes_set: set[int], camera: str | None = None
) -> Calibration:
    cams = [s for s, sp in reader.meta.streams.items() if sp.kind == "video"]
    if not cams:  # a camera-less episode (IMU, telemetry, state only): its reads cost I/O and parsing only
        range_s, part_s, byte_s, call_s = _io_costs(reader)
        return Calibration(
            cfg.codec, cfg.preset, 0, 0, [], 0.0, 0.0, call_s, range_s, part_s, byte_s, _array_bytes(reader)
        )
    cam = camera or cams[0]
    spec = reader.meta.streams[cam]
    n = min(cfg.calibration_frames, max(8, int(reader.meta.duration_s * spec.rate_hz)))
    win = reader.read_window(0.0, (n - 0.5) / spec.rate_hz, [cam])[cam]
    frames = list(win.data)
    if len(frames) < 8:
        raise ConfigError(
            f"episode {reader.meta.episode_id!r}: {cam!r} has only {len(frames)} frames; need >= 8 to calibrate"
        )
    points = _codec_points(frames, spec.rate_hz, cfg, bframes_set | {0})
    ex, pk = _encode(frames[:8], cfg.codec, CAL_GOP, cfg.crfs[0], cfg.preset, 0, spec.rate_hz)
    _, dec = _decode_timed(cfg.codec, ex, pk, CAL_GOP, 0, passes=1)
    some = list(dec.values())
    rgb_s = float(np.median([_cpu(lambda f=f: to_rgb(f), 3) for f in some]))

    def open_ctx() -> None:
        timing_decoder(cfg.codec, ex).decode(None)

    open_s = float(np.median([_cpu(open_ctx, 3) for _ in range(5)]))
    range_s, part_s, byte_s, call_s = _io_costs(reader)
    h, w, _ = spec.shape
    cal = Calibration(
        cfg.codec, cfg.preset, h, w, points, rgb_s, open_s, call_s, range_s, part_s, byte_s, _array_bytes(reader)
    )
    same = [c for c in cams if reader.layout.group_of(c).name == reader.layout.group_of(cam).name]
    cal.video_part_s, cal.pool_s, cal.frame_s, cal.packet1_s, cal.packet_s = _window_overhead(
        reader, [cam] + [c for c in same if c != cam], cal
    )
    return cal
