"""What an importer is told besides the item: the topic map (MCAP / bags), message definitions
(bags whose types are not embedded) and key maps (HDF5 / Zarr / RLDS layouts). One value, built
from IngestSettings (`IngestSettings.import_options`) or by a caller directly."""

from __future__ import annotations

from dataclasses import dataclass, field

from robodata.ingest.topics import TopicMap


@dataclass(frozen=True)
class ImportOptions:
    topic_map: TopicMap = field(default_factory=TopicMap.default)
    msgs: str = ""  # folder of .msg / .idl files (robodata.ingest.importers.msgdefs)
    key_map: str = ""  # YAML file of array-layout key maps (robodata.ingest.importers.keymap)
