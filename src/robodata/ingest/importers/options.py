"""What an importer is told besides the item: the topic map (MCAP / bags), message definitions
(bags whose types are not embedded), key maps (HDF5 / Zarr / RLDS layouts) and work bounds. One value, built
from IngestSettings (`IngestSettings.import_options`) or by a caller directly."""

from __future__ import annotations

from dataclasses import dataclass, field

from robodata.errors import ConfigError
from robodata.ingest.importers.bounds import WorkBounds
from robodata.ingest.topics import TopicMap


@dataclass(frozen=True)
class ImportOptions:
    topic_map: TopicMap = field(default_factory=TopicMap.default)
    msgs: str = ""  # folder of .msg / .idl files (robodata.ingest.importers.msgdefs)
    key_map: str = ""  # YAML file of array-layout key maps (robodata.ingest.importers.keymap)
    bounds: WorkBounds = field(default_factory=WorkBounds)  # work per item from its size (importers.bounds)
    # MCAP / bags: image payload kept from the one pass over the recording for its frames (MiB);
    # past it, frames take a second pass over the file (0: always a second pass, least memory)
    keep_image_mb: int = 256

    def __post_init__(self) -> None:
        if not isinstance(self.keep_image_mb, int) or isinstance(self.keep_image_mb, bool) or self.keep_image_mb < 0:
            raise ConfigError(f"ImportOptions.keep_image_mb: a whole number of MiB >= 0, not {self.keep_image_mb!r}")
