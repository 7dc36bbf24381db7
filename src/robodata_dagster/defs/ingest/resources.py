"""The ingestion asset set's one configuration, as a resource (run profiles set its fields).

`root` is a local folder or s3://bucket/prefix. S3 endpoint, region and credentials never enter
run config: `paths()` reads the AWS_* variables of the process that runs the step
(StorageLocation.from_env).
"""

import os
from typing import Any

import dagster as dg

from robodata.container.meta import VideoSettings
from robodata.ingest.qc import ALL_CHECKS, DEFAULT_BLOCKING, QCSelection
from robodata.ingest.settings import IngestSettings
from robodata.ingest.tables import IngestPaths
from robodata.ingest.topics import TopicRule
from robodata.storage import StorageLocation


def default_root() -> str:
    """ROBODATA_ROOT, else the deployment's storage root (ROBODATA_STORAGE_ROOT), else .demo."""
    return os.environ.get("ROBODATA_ROOT") or os.environ.get("ROBODATA_STORAGE_ROOT") or ".demo"


class IngestResource(dg.ConfigurableResource):
    root: str = default_root()
    workers: int = 1
    decode_threads: int = 2
    codec: str = "h264"
    crf: int = 23
    preset: str = "veryfast"
    gop: int = 30
    encoder_threads: int = 0  # per camera; 0 = the codec's choice, 1 = bulk (a process per core)
    qc_checks: list[str] = list(ALL_CHECKS)
    qc_by_vendor: dict[str, list[str]] = {}
    qc_by_source: dict[str, list[str]] = {}
    qc_blocking: list[str] = list(DEFAULT_BLOCKING)
    topics: list[dict[str, Any]] = []
    unknown_topics: str = "report"
    visual_frames: int = 6

    def paths(self) -> IngestPaths:
        return IngestPaths(StorageLocation.from_env(self.root))

    def settings(self) -> IngestSettings:
        return IngestSettings(
            root=self.root,
            workers=self.workers,
            decode_threads=self.decode_threads,
            video=VideoSettings(
                codec=self.codec, gop=self.gop, crf=self.crf, preset=self.preset, threads=self.encoder_threads
            ),
            topics=tuple(TopicRule(**t) for t in self.topics),
            unknown_topics=self.unknown_topics,
            qc=QCSelection(
                checks=tuple(self.qc_checks),
                by_vendor={k: tuple(v) for k, v in self.qc_by_vendor.items()},
                by_source={k: tuple(v) for k, v in self.qc_by_source.items()},
                blocking=tuple(self.qc_blocking),
            ),
            visual_frames=self.visual_frames,
        )


@dg.definitions
def resources() -> dg.Definitions:
    return dg.Definitions(resources={"ingest": IngestResource()})
