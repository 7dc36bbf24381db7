"""The kind of each format robodata ingests (a leaf: it imports nothing of robodata).

The registry (robodata.ingest.formats) builds one entry per kind here; importers name the kind of
the episodes they open with these constants, so no importer imports the registry that dispatches
to it. A versioned format's items are `<kind>-<version>` (`lerobot-v3.0`).
"""

from __future__ import annotations

MCAP = "mcap"
ROS1_BAG = "ros1-bag"
ROS2_BAG = "ros2-bag"
HDF5 = "hdf5"
LEGACY_JPEG = "legacy-jpeg"
LEROBOT = "lerobot"
ZARR = "zarr"
RLDS = "rlds"
UNRECOGNIZED = "unrecognized"  # the kind of a landing entry no format claims
KEY_MAPPED = (HDF5, ZARR, RLDS)  # formats whose layout a key map declares (robodata.ingest.importers.keymap)


def versioned(kind: str, version: str) -> str:
    """The kind of an item of format `kind` at `version` (`lerobot-v3.0`)."""
    return f"{kind}-{version}"
