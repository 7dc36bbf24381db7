"""Where data lives: a storage root (local folder or s3://bucket/prefix) and its options."""

from robodata.storage.location import StorageLocation

__all__ = ["StorageLocation"]
