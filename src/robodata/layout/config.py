"""Typed configuration of the layout advisor (validated up front)."""

from __future__ import annotations

from dataclasses import dataclass, field

from robodata.codecs import video_codec
from robodata.config import require
from robodata.errors import ConfigError

KiB = 1024
MiB = 1024 * KiB


@dataclass(frozen=True)
class StoreModel:
    """Where the containers are read from, as seen by a cold page cache.

    latency_s     time to first byte of one range request
    bandwidth_bps bytes per second of one request stream
    page_cpu_s    CPU per cached page touched (index lookup, page file open/read/verify)
    """

    latency_s: float = 0.030
    bandwidth_bps: float = 100e6
    page_cpu_s: float = 150e-6

    def __post_init__(self) -> None:
        require(self.latency_s >= 0, "store latency_s must be >= 0")
        require(self.bandwidth_bps > 0, "store bandwidth_bps must be > 0")
        require(self.page_cpu_s >= 0, "store page_cpu_s must be >= 0")


@dataclass(frozen=True)
class AdvisorConfig:
    """Search space and constraints.

    gops, crfs, camera_spans_s, array_spans_s, page_sizes: the candidate settings.
    bframes: extra B-frame counts to try besides 0 and every-1 of each video window.
    entropies: the entropy coders to try (VideoSettings.entropy): () = every one the codec offers
      (H.264: cabac and cavlc, each calibrated for bytes, decode cost and quality; other codecs:
      their own coder alone); naming one the codec lacks is a ConfigError.
    deblocks: in-loop deblocking on (True) and/or off (False) to try (VideoSettings.deblock): () =
      what the codec offers (H.264 and HEVC: both, each calibrated like a coder; AV1: on alone).
    min_psnr_db, median_psnr_db: the quality floor, PSNR against the sample's frames (with
      --source: the source's decode) over the calibration frames: a CRF whose 1st percentile is
      below min_psnr_db or whose median is below median_psnr_db is never chosen.
    max_storage_x: a camera group may take at most this many times the bytes of the
      ingestion default (GOP 30, CRF 23) at the same resolution.
    mix_floor: with several read patterns (one layout for all, robodata.layout.mix), a layout that
      keeps each pattern at >= this fraction of its own best (best cost / cost) is preferred. 0.85:
      a margin over the 0.8 a team states, as the advisor measures a few dozen samples of one
      episode (bench.lerobot_peer: a choice measured at 0.84 here gave 0.80 in the full bench).
    tie_tolerance: among layouts whose cost is within this fraction of the best, the one
      with the least storage wins.
    verify_top: how many of the best predicted alternatives are written and measured.
    choose: "measured" (the measured best of verify_top) or "predicted" (the model's best).
    objective: "cpu" (loader CPU per sample: data on local disk / in the page cache) or
      "cold" (CPU plus cold-cache fetch time from the store model).
    loader: what the cost model follows and what measures the alternatives: "dataset" (the
      delivery PatternDataset, one sample at a time as under a global shuffle: its GOP decoder
      skips every non-reference frame no sample wants, so B-frames cost a random-access pattern
      little; what training reads with) or "reader" (EpisodeReader.read_window per window).
    measure_episodes: how many sample episodes are re-laid per alternative to measure it.
    samples: read-pattern samples used for measuring; rounds: interleaved repetitions.
    """

    codec: str = "h264"
    preset: str = "veryfast"
    gops: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 10, 15, 20, 30, 45, 60, 90, 120)
    crfs: tuple[int, ...] = (18, 20, 23, 28)
    bframes: tuple[int, ...] = (2,)
    entropies: tuple[str, ...] = ()
    deblocks: tuple[bool, ...] = ()
    camera_spans_s: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0, 8.0)
    array_spans_s: tuple[float, ...] = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
    page_sizes: tuple[int, ...] = (64 * KiB, 256 * KiB, 1 * MiB, 4 * MiB, 16 * MiB)
    min_psnr_db: float = 35.0
    median_psnr_db: float = 37.0
    max_storage_x: float = 8.0
    tie_tolerance: float = 0.02
    mix_floor: float = 0.85
    verify_top: int = 3
    choose: str = "measured"
    objective: str = "cpu"
    loader: str = "dataset"
    measure_episodes: int = 2
    samples: int = 48
    rounds: int = 3
    calibration_frames: int = 60
    seed: int = 0
    store: StoreModel = field(default_factory=StoreModel)

    def __post_init__(self) -> None:
        for name in (
            "gops", "crfs", "bframes", "entropies", "deblocks", "camera_spans_s", "array_spans_s", "page_sizes"
        ):  # fmt: skip
            object.__setattr__(self, name, tuple(getattr(self, name)))
        require(
            len(self.gops) > 0 and all(1 <= g <= 1000 for g in self.gops), f"gops must be in [1, 1000], got {self.gops}"
        )
        require(
            len(self.crfs) > 0 and all(0 <= c <= 51 for c in self.crfs), f"crfs must be in [0, 51], got {self.crfs}"
        )
        require(all(0 <= b <= 8 for b in self.bframes), f"bframes must be in [0, 8], got {self.bframes}")
        offered = video_codec(self.codec).entropies
        require(
            all(e in offered for e in self.entropies),
            f"entropies {list(self.entropies)}: codec {self.codec!r} offers {list(offered)} (cavlc is H.264's alone)",
        )
        can = video_codec(self.codec).deblocks
        require(
            all(isinstance(d, bool) and d in can for d in self.deblocks),
            f"deblocks {list(self.deblocks)}: codec {self.codec!r} offers {list(can)} (false: h264 and hevc alone)",
        )
        require(len(self.camera_spans_s) > 0 and all(s > 0 for s in self.camera_spans_s), "camera_spans_s must be > 0")
        require(len(self.array_spans_s) > 0 and all(s > 0 for s in self.array_spans_s), "array_spans_s must be > 0")
        require(
            len(self.page_sizes) > 0 and all(4 * KiB <= p <= 256 * MiB for p in self.page_sizes),
            "page_sizes must be in [4 KiB, 256 MiB]",
        )
        require(self.max_storage_x > 0, "max_storage_x must be > 0")
        require(0 <= self.tie_tolerance < 1, "tie_tolerance must be in [0, 1)")
        require(0 < self.mix_floor <= 1, "mix_floor must be in (0, 1]")
        require(self.median_psnr_db >= 0 and self.min_psnr_db >= 0, "PSNR floors must be >= 0")
        require(self.verify_top >= 0, "verify_top must be >= 0")
        require(
            self.choose in ("measured", "predicted"), f"choose must be 'measured' or 'predicted', got {self.choose!r}"
        )
        if self.choose == "measured" and self.verify_top == 0:
            raise ConfigError("choose='measured' needs verify_top >= 1")
        require(self.objective in ("cpu", "cold"), f"objective must be 'cpu' or 'cold', got {self.objective!r}")
        require(self.loader in ("reader", "dataset"), f"loader must be 'reader' or 'dataset', got {self.loader!r}")
        require(self.measure_episodes >= 1, "measure_episodes must be >= 1")
        require(self.samples >= 1 and self.rounds >= 1, "samples and rounds must be >= 1")
        require(self.calibration_frames >= 8, "calibration_frames must be >= 8")

    def search_entropies(self) -> tuple[str, ...]:
        """The entropy coders the advisor calibrates and searches."""
        return tuple(dict.fromkeys(self.entropies)) or video_codec(self.codec).entropies

    def search_coders(self) -> tuple[tuple[str, bool], ...]:
        """(entropy coder, deblocking) pairs the advisor calibrates and searches."""
        deblocks = tuple(dict.fromkeys(self.deblocks)) or video_codec(self.codec).deblocks
        return tuple((e, d) for e in self.search_entropies() for d in deblocks)
