"""Ingestion's configuration: `ingest` (robodata.ingest.settings.IngestSettings, field for field)
and `landing` (where the sensors list, how they cut batches and stagger launches).

Roots are local folders or s3://bucket/prefix; empty means the deployment's (lib/env.py), resolved
in the process that uses it. S3 endpoint, region and credentials never enter run config:
`paths()` reads the AWS_* variables of the process that runs the step (StorageLocation.from_env).
"""

import math
import os
from typing import TYPE_CHECKING

import dagster as dg
from pydantic import Field

from robodata.ingest.qc import ALL_CHECKS, DEFAULT_BLOCKING
from robodata_dagster.lib.env import setting, state_root, storage_root
from robodata_dagster.lib.settings import to_settings

if TYPE_CHECKING:
    from robodata.ingest.landing.launches import BatchPolicy
    from robodata.ingest.landing.stagger import StaggerPolicy
    from robodata.ingest.settings import IngestSettings
    from robodata.ingest.tables import IngestPaths
    from robodata.storage import StateRoot


class VideoConfig(dg.Config):
    """robodata.container.meta.VideoSettings."""

    codec: str = "h264"
    gop: int = 30
    crf: int = 23
    preset: str = "veryfast"
    bframes: int = 0
    threads: int = 0  # encoder threads per camera; 0 = the codec's choice
    entropy: str = "cabac"  # H.264's entropy coder: cabac | cavlc (cheaper to decode, ~10 % more bytes)
    deblock: bool = True  # H.264/HEVC in-loop deblocking; False: ~30 % cheaper decode, a little blockier


class VideoCopyConfig(dg.Config):
    """robodata.ingest.video_copy.VideoCopyConfig: keep a source's video bitstream or transcode it."""

    mode: str = Field(default="auto", description="auto | copy | transcode (robodata ingest --video)")
    verify_gops: int = 1  # GOPs per copied camera decoded after the write (the first, then the last, between)
    annexb_decode: str = "all"  # Annex B H.264/HEVC (MCAP): all (every GOP decoded) | sample (verify_gops, headers)
    verify_readback: bool = False  # True: read the stored packets back (also catches storage corruption before fsync)
    max_cost_ratio: float = 1.1  # auto: the source's frames decoded per read over the layout's


class WorkBoundsConfig(dg.Config):
    """robodata.ingest.importers.bounds.WorkBounds: work per landing item, from its size."""

    decoded_per_input_byte: float = 4096.0  # declared decoded bytes per input byte
    decoded_floor_mb: float = 256.0  # an item may always declare this much
    cpu_s_per_input_mb: float = 30.0  # CPU seconds of opening + converting one item, per MB of input
    cpu_floor_s: float = 30.0  # an item may always spend this much CPU


class QCThresholdsConfig(dg.Config):
    """robodata.ingest.qc.QCThresholds."""

    rate_tolerance: float = 0.15
    max_gap_periods: float = 4.0
    joint_abs_max: float = 2 * math.pi
    max_clock_error_ms: float = 5.0
    min_duration_s: float = 0.5
    duration_tolerance_s: float = 0.5


class QCConfig(dg.Config):
    """robodata.ingest.qc.QCSelection: which checks run per vendor / source, which quarantine."""

    checks: list[str] = list(ALL_CHECKS)
    by_vendor: dict[str, list[str]] = {}
    by_source: dict[str, list[str]] = {}
    blocking: list[str] = list(DEFAULT_BLOCKING)
    thresholds: QCThresholdsConfig = QCThresholdsConfig()


class TopicRuleConfig(dg.Config):
    """robodata.ingest.topics.TopicRule."""

    topic: str
    kind: str
    stream: str = "{name}"
    field: str = ""
    rate_hz: float = 0.0
    units: str = ""
    join: str = ""


class AlignConfig(dg.Config):
    """robodata.ingest.align.AlignConfig: clock jumps and declared rates the timestamps contradict."""

    jump_periods: float = 25.0
    on_discontinuity: str = "quarantine"  # or "rebase" (where the jump is provably an offset)
    on_rate_mismatch: str = "quarantine"  # or "measured"


class IngestResource(dg.ConfigurableResource):
    """IngestSettings, plus `bulk`: the throughput profile (IngestSettings.for_bulk) on the cores of
    the machine that runs the step, unless `workers` is set above 1."""

    root: str = Field(default="", description="state root (folder or s3://); empty: ROBODATA_STORAGE_ROOT, else .demo")
    workers: int = 1
    decode_threads: int = 2
    video: VideoConfig = VideoConfig()
    topics: list[TopicRuleConfig] = []
    unknown_topics: str = "report"
    topics_file: str = Field(default="", description="YAML topic rules (docs/ingestion.md), readable by every worker")
    msgs: str = Field(default="", description="folder of .msg / .idl definitions the bags do not embed")
    key_map: str = Field(default="", description="YAML key maps for HDF5 / Zarr / RLDS layouts")
    qc: QCConfig = QCConfig()
    qc_file: str = Field(
        default="",
        description="YAML QC file (per check: run, blocking, thresholds; docs/ingestion.md), applied to `qc`, "
        "readable by every worker",
    )
    align: AlignConfig = AlignConfig()
    visual_frames: int = 6
    plan: str = Field(
        default="",
        description="LayoutPlan JSON (`robodata advise --out`), readable by every worker: episodes "
        "are written in its layout instead of `video`",
    )
    video_copy: VideoCopyConfig = VideoCopyConfig()
    bounds: WorkBoundsConfig = WorkBoundsConfig()
    bulk: bool = False

    def root_uri(self) -> str:
        return storage_root(self.root)

    def state(self) -> "StateRoot":
        return state_root(self.root)

    def paths(self) -> "IngestPaths":
        from robodata.ingest.tables import IngestPaths

        return IngestPaths(self.state())

    def settings(self) -> "IngestSettings":
        from robodata.ingest.settings import IngestSettings

        s = to_settings(IngestSettings, self)  # the root is the paths' (paths()), not a setting
        if self.bulk:
            s = s.for_bulk(self.workers if self.workers > 1 else max(1, os.cpu_count() or 1))
        return s


class BatchConfig(dg.Config):
    """robodata.ingest.landing.launches.BatchPolicy: how a tick cuts new landing items into batches."""

    max_items: int = 1000
    max_bytes: int = 64 * 2**30
    settle_s: float = 2.0  # unchanged over two ticks at least this far apart (and the sensor's interval)
    list_limit: int = 100_000
    incomplete_after_s: float = 900.0  # settled this long without its format's end: claimed, then quarantined


class StaggerConfig(dg.Config):
    """robodata.ingest.landing.stagger.StaggerPolicy: how batch runs are spread over time."""

    max_concurrent: int = 32
    run_s: float = 60.0
    jitter: float = 0.5
    seed: int = 0


class LaunchConfig(dg.Config):
    batch: BatchConfig = BatchConfig()
    stagger: StaggerConfig = StaggerConfig()

    def policies(self) -> tuple["BatchPolicy", "StaggerPolicy"]:
        from robodata.ingest.landing.launches import BatchPolicy
        from robodata.ingest.landing.stagger import StaggerPolicy

        return to_settings(BatchPolicy, self.batch), to_settings(StaggerPolicy, self.stagger)


class LandingResource(dg.ConfigurableResource):
    """The landing zone the sensors list, and their batch / launch policies (bulk and live)."""

    landing: str = Field(default="", description="folder or s3://; empty: ROBODATA_LANDING, else <root>/landing")
    bulk: LaunchConfig = LaunchConfig(stagger=StaggerConfig(max_concurrent=8))
    live: LaunchConfig = LaunchConfig(
        batch=BatchConfig(max_items=16, settle_s=5.0), stagger=StaggerConfig(max_concurrent=8, run_s=0.0)
    )

    def landing_uri(self, state: "StateRoot") -> str:
        return self.landing or setting("ROBODATA_LANDING", state.landing)
