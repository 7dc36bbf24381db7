"""Where data lives: a storage root (local folder or s3://bucket/prefix) and its options, and the
layout of robodata's state under a root (StateRoot)."""

from robodata.storage.location import StorageLocation
from robodata.storage.state import StateRoot

__all__ = ["StateRoot", "StorageLocation"]
