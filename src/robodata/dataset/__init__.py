"""Delivery: read patterns, samplers and the PyTorch dataset over manifests."""

from robodata.dataset.dataset import DatasetConfig, PatternDataset
from robodata.dataset.index import Anchor, SampleIndex
from robodata.dataset.loader import BatchLoader, LoaderConfig, PatternLoader
from robodata.dataset.mixpattern import MixPattern
from robodata.dataset.mixture import MixedDataset
from robodata.dataset.pattern import ReadPattern, StreamWindow, preset
from robodata.dataset.sampler import PatternSampler

__all__ = [
    "Anchor",
    "SampleIndex",
    "ReadPattern",
    "StreamWindow",
    "preset",
    "PatternSampler",
    "DatasetConfig",
    "PatternDataset",
    "BatchLoader",
    "LoaderConfig",
    "PatternLoader",
    "MixPattern",
    "MixedDataset",
]
