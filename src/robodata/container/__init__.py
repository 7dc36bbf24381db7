"""Episode container: one object per episode, topic-group chunks, a footer index."""

from robodata.container.format import FORMAT_VERSION, ChunkInfo, PartInfo
from robodata.container.limits import ReaderConfig
from robodata.container.meta import EpisodeMeta, Layout, StreamSpec, TopicGroup, VideoSettings
from robodata.container.reader import EpisodeReader, Window, read_window
from robodata.container.writer import EpisodeWriter

__all__ = [
    "FORMAT_VERSION",
    "ChunkInfo",
    "PartInfo",
    "EpisodeMeta",
    "Layout",
    "StreamSpec",
    "TopicGroup",
    "VideoSettings",
    "EpisodeReader",
    "ReaderConfig",
    "Window",
    "EpisodeWriter",
    "read_window",
]
