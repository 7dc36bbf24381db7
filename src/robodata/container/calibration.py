"""A machine's measured encode and decode costs (robodata.layout.calibration measures them on one
sample episode): what a LayoutPlan carries beside its layout, so ingestion prices reads of a layout
(robodata.ingest.copy_cost) with the numbers the advisor chose it by."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from robodata.errors import ConfigError


@dataclass(frozen=True)
class CodecPoint:
    """One (crf, bframes, entropy, deblock) encode: mean bytes and decode seconds per frame type, quality."""

    crf: int
    bframes: int
    bytes: tuple[float, float, float]  # I, P, B in a long GOP
    decode_s: tuple[float, float, float]  # I, P, B
    intra_bytes: float  # an all-intra (GOP 1) frame
    intra_decode_s: float
    psnr_db: float  # long GOP
    intra_psnr_db: float
    skip_s: float = 0.0  # a non-reference packet dropped by the decoder
    # the quality floor's statistics over the calibration frames (0: a calibration saved before them)
    psnr_p1_db: float = 0.0  # long GOP, 1st percentile
    psnr_median_db: float = 0.0
    intra_psnr_p1_db: float = 0.0
    intra_psnr_median_db: float = 0.0
    entropy: str = "cabac"  # H.264's entropy coder (VideoSettings.entropy); a calibration before it: cabac
    deblock: bool = True  # the in-loop deblocking filter (VideoSettings.deblock); a calibration before it: on

    def quality(self, intra: bool) -> tuple[float, float]:
        """(1st percentile, median) PSNR in dB of the calibration frames, all-intra or long GOP
        (the mean for both where the calibration predates them)."""
        p1, med = (
            (self.intra_psnr_p1_db, self.intra_psnr_median_db) if intra else (self.psnr_p1_db, self.psnr_median_db)
        )
        mean = self.intra_psnr_db if intra else self.psnr_db
        return (p1 or mean, med or mean)


@dataclass
class Calibration:
    codec: str
    preset: str
    height: int
    width: int
    points: list[CodecPoint]
    rgb_s: float  # YUV->RGB per returned frame
    open_s: float  # one decoder context
    call_s: float  # one read_window call (planning, bookkeeping)
    range_s: float  # one range read + checksum
    part_s: float  # parsing one stream part
    byte_s: float  # reading + checksumming + parsing one byte
    array_part_bytes: dict[str, tuple[float, float]] = field(default_factory=dict)  # stream -> (fixed, per sample)
    video_part_s: float = 0.0  # per camera per chunk decoded by read_window, beyond the codec work
    pool_s: float = 0.0  # per multi-camera read_window (decode threads)
    frame_s: float = 0.0  # per returned frame beyond codec and YUV->RGB (packet feed, stacking)
    packet1_s: float = 0.0  # per packet fed to a decoder, one-camera read (Python, GIL round trip)
    packet_s: float = 0.0  # the same when cameras decode on parallel threads (GIL contention)

    def point(self, crf: int, bframes: int, entropy: str = "cabac", deblock: bool = True) -> CodecPoint:
        for p in self.points:
            if p.crf == crf and p.bframes == bframes and p.entropy == entropy and p.deblock == deblock:
                return p
        raise ConfigError(
            f"calibration has no point for crf={crf} bframes={bframes} entropy={entropy} deblock={deblock}; has "
            f"{[(p.crf, p.bframes, p.entropy, p.deblock) for p in self.points]}"
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Calibration:
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, d: dict) -> Calibration:
        d = dict(d)
        d["points"] = [
            CodecPoint(**{**p, "bytes": tuple(p["bytes"]), "decode_s": tuple(p["decode_s"])}) for p in d["points"]
        ]
        d["array_part_bytes"] = {k: tuple(v) for k, v in d.get("array_part_bytes", {}).items()}
        return cls(**d)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json())
