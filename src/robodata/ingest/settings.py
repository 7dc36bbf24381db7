"""The one configuration of the ingestion asset set; run profiles only pick values. Where the state
lives is not a setting: the steps take it as their paths (robodata.ingest.tables.IngestPaths, a
robodata.storage.StateRoot), so the root travels once."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache

from robodata.config import from_dict, require
from robodata.container.meta import VideoSettings
from robodata.container.plan import LayoutPlan
from robodata.ingest.align import AlignConfig
from robodata.ingest.importers.bounds import WorkBounds
from robodata.ingest.importers.options import ImportOptions
from robodata.ingest.qc import QCSelection
from robodata.ingest.topics import TopicMap, TopicRule, load_topics
from robodata.ingest.video_copy import VideoCopyConfig


@lru_cache(maxsize=8)
def load_plan(path: str) -> LayoutPlan:
    """A LayoutPlan file (local or s3://, credentials from the AWS_* variables), loaded once per
    process; ConfigError naming the file when it does not load."""
    from robodata.storage import StorageLocation, objects

    opts = StorageLocation.from_env(path).fsspec_options() if objects.is_remote(path) else None
    return LayoutPlan.load(path, opts)


@dataclass(frozen=True)
class IngestSettings:
    workers: int = 1  # conversion processes per batch (work bins)
    decode_threads: int = 2  # read-ahead decode threads per conversion
    video: VideoSettings = field(default_factory=VideoSettings)
    topics: tuple[TopicRule, ...] = ()  # custom MCAP / ROS 2 topic rules, tried before the defaults
    unknown_topics: str = "report"
    topics_file: str = ""  # YAML topic rules (robodata.ingest.topics.load_topics), tried before `topics`
    msgs: str = ""  # folder of .msg / .idl definitions bags do not embed (robodata.ingest.importers.msgdefs)
    key_map: str = ""  # YAML key maps for HDF5 / Zarr / RLDS layouts (robodata.ingest.importers.keymap)
    qc: QCSelection = field(default_factory=QCSelection)
    qc_file: str = ""  # YAML per-check run / blocking / thresholds (robodata.ingest.qc_file), applied to `qc`
    align: AlignConfig = field(default_factory=AlignConfig)  # clock jumps, declared vs measured rates
    visual_frames: int = 6  # frames decoded per episode for visual features
    bounds: WorkBounds = field(default_factory=WorkBounds)  # work per item from its size (importers.bounds)
    plan: str = ""  # LayoutPlan JSON (`robodata advise --out`): episodes are written in its layout, not `video`
    # copy a source's video bitstream where it fits, else transcode (robodata.ingest.video_copy)
    video_copy: VideoCopyConfig = field(default_factory=VideoCopyConfig)

    def __post_init__(self) -> None:
        require(1 <= self.workers <= 256, f"workers must be in [1, 256], got {self.workers}")
        require(0 <= self.decode_threads <= 32, "decode_threads must be in [0, 32]")
        self.topic_map  # noqa: B018 - a bad topics file fails here, before any work
        if self.msgs:
            from robodata.ingest.importers.msgdefs import load_msgdefs

            load_msgdefs(self.msgs)
        if self.key_map:
            from robodata.ingest.importers.keymap import load_key_maps

            load_key_maps(self.key_map)
        if self.plan:
            self.layout_plan  # noqa: B018 - a plan that does not load fails here, naming the file
        if self.qc_file:  # a bad file fails here, naming the file and key; `qc` becomes what it says
            from robodata.ingest.qc_file import load_qc_file

            object.__setattr__(self, "qc", load_qc_file(self.qc_file, self.qc))

    def for_bulk(self, workers: int) -> IngestSettings:
        """These settings for throughput: `workers` conversion processes (one a core), each reading,
        decoding and encoding on its one thread. Read-ahead threads and x264's own threads only pay
        where cores would sit idle; on busy cores they cost CPU (bench.ingest: ~15% more episode-hours
        per core-hour without them)."""
        return replace(self, workers=workers, decode_threads=0, video=replace(self.video, threads=1))

    @property
    def topic_map(self) -> TopicMap:
        from_file = load_topics(self.topics_file) if self.topics_file else ()
        return TopicMap(from_file + tuple(self.topics) + TopicMap.default().rules, self.unknown_topics)

    @property
    def layout_plan(self) -> LayoutPlan | None:
        """The plan episodes are written in (None: the ingestion default, `video`)."""
        return load_plan(self.plan) if self.plan else None

    @property
    def import_options(self) -> ImportOptions:
        return ImportOptions(self.topic_map, self.msgs, self.key_map, self.bounds)

    def to_dict(self) -> dict:
        """JSON-safe (how the settings reach a worker process); `from_dict` gives them back."""
        return json.loads(json.dumps(asdict(self)))

    @classmethod
    def from_dict(cls, d: dict) -> IngestSettings:
        return from_dict(cls, d)
