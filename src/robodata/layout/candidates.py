"""The video encodings the advisor searches for one window: every GOP, B-frame count, CRF and
chunk span of the configuration, for each entropy coder and deblocking choice the calibration
measured (H.264: CABAC and CAVLC, robodata.container.VideoSettings.entropy; the in-loop deblocking
filter on or off, VideoSettings.deblock), held to the quality floor.

CAVLC decodes cheaper than CABAC (a random-access read pays a keyframe's decode, which is
entropy-decoding-bound) for more bytes at the same CRF; each candidate carries its coder's own
calibrated bytes and decode cost, so the cost model weighs one against the other (bytes cost read
and checksum CPU per byte, storage against max_storage_x and the least-storage tie-break, and with
objective "cold" the pages fetched) for each declared pattern. Deblocking off likewise trades a
little quality (held to the floor like every CRF) for a cheaper decode of every frame.
"""

from __future__ import annotations

from robodata.container.calibration import Calibration, CodecPoint
from robodata.dataset.pattern import StreamWindow
from robodata.layout.config import AdvisorConfig
from robodata.layout.costmodel import VideoChoice


def meets_floor(pt: CodecPoint, cfg: AdvisorConfig, intra: bool) -> bool:
    """Whether an encoding keeps the quality floor on the calibration frames (1st percentile and
    median PSNR)."""
    p1, med = pt.quality(intra)
    return p1 >= cfg.min_psnr_db and med >= cfg.median_psnr_db


def searched_coders(cfg: AdvisorConfig, cal: Calibration) -> list[tuple[str, bool]]:
    """The (entropy coder, deblocking) pairs of the search: the configuration's that the calibration
    has points for."""
    have = {(p.entropy, p.deblock) for p in cal.points}
    return [c for c in cfg.search_coders() if c in have]


def searched_gops(w: StreamWindow, cfg: AdvisorConfig) -> list[int]:
    """The configuration's GOPs and, for a window reading every k-th frame, each of them rounded up
    to a multiple of k (sorted, distinct). With k-1 B-frames a GOP that is a multiple of k keeps
    every k-th frame a reference frame, so the frames such a window wants are I/P frames and no B
    is decoded; one layout for several patterns (a VLA reading every frame, a WAM every 3rd) finds
    its compromise among these (GOP 12 between VLA's 4 and WAM's 30 where the list has 10 and 15)."""
    k = w.every
    return sorted({*cfg.gops, *((-(-g // k) * k) for g in cfg.gops if k > 1)})


def video_candidates(w: StreamWindow, cfg: AdvisorConfig, cal: Calibration) -> list[VideoChoice]:
    """Every calibrated encoding within the quality floor, over `searched_gops`; where none keeps
    it, the best quality on offer (the least CRF) of each coder."""
    bfs = {0, *cfg.bframes} | ({w.every - 1} if w.every > 1 else set())
    coders = searched_coders(cfg, cal)
    pts = {e: [p for p in cal.points if (p.entropy, p.deblock) == e] for e in coders}
    good = {e: [c for c in cfg.crfs if any(p.crf == c and meets_floor(p, cfg, False) for p in pts[e])] for e in pts}
    any_good = any(good.values())
    out = []
    for entropy, deblock in coders:
        calibrated = {(p.crf, p.bframes) for p in pts[(entropy, deblock)]}
        crfs = good[(entropy, deblock)] if any_good else [min(cfg.crfs)]
        for gop in searched_gops(w, cfg):
            for bf in sorted(bfs):
                if bf > 0 and gop <= bf + 1:
                    continue
                if gop == 1 and bf:
                    continue
                for crf in crfs:
                    if (crf, bf) not in calibrated:
                        continue
                    if any_good and not meets_floor(cal.point(crf, bf, entropy, deblock), cfg, gop == 1):
                        continue
                    for span in cfg.camera_spans_s:
                        out.append(VideoChoice(gop, bf, crf, span, entropy, deblock))
    return out
