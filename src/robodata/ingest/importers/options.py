"""What an importer is told besides the item: the topic map (MCAP / bags), message definitions
(bags whose types are not embedded), key maps (HDF5 / Zarr / RLDS layouts) and work bounds. One value, built
from IngestSettings (`IngestSettings.import_options`) or by a caller directly."""

from __future__ import annotations

from dataclasses import dataclass, field

from robodata.ingest.importers.bounds import WorkBounds
from robodata.ingest.topics import TopicMap


@dataclass(frozen=True)
class ImportOptions:
    topic_map: TopicMap = field(default_factory=TopicMap.default)
    msgs: str = ""  # folder of .msg / .idl files (robodata.ingest.importers.msgdefs)
    key_map: str = ""  # YAML file of array-layout key maps (robodata.ingest.importers.keymap)
    bounds: WorkBounds = field(default_factory=WorkBounds)  # work per item from its size (importers.bounds)
