"""A storage root and the options each library needs to reach it (Dagster-free).

One canonical description (root URI plus S3 endpoint/region/credentials) is turned into
the option dialects of fsspec/s3fs (containers) and delta-rs (Delta tables):

    loc = StorageLocation.from_env("s3://robodata/prod")     # AWS_* variables, or IRSA/instance creds
    loc.join("data", "ep1.rdep")                              # 's3://robodata/prod/data/ep1.rdep'
    fsspec.open(loc.join(...), "wb", **loc.fsspec_options())
    deltalake.write_deltalake(loc.join("tables", "catalog"), table, storage_options=loc.delta_options())

Credentials are never required: when key/secret are unset both libraries use the default
AWS credential chain (web identity on Kubernetes, instance profile, ~/.aws).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robodata.config import require

SCHEMES = ("s3://", "file://")  # what a root, and a catalog or manifest row's uri, may name besides a local path


@dataclass(frozen=True)
class StorageLocation:
    root: str  # absolute local path, file://..., or s3://bucket[/prefix]
    endpoint_url: str | None = None  # S3-compatible endpoint (MinIO, moto, ...); None = AWS
    region: str | None = None
    key: str | None = None
    secret: str | None = None

    def __post_init__(self) -> None:
        require(bool(self.root), "StorageLocation.root must not be empty")
        if "://" in self.root:
            require(
                self.root.startswith(SCHEMES),
                f"StorageLocation.root: unsupported scheme in {self.root!r}; use a path or s3://",
            )
            if self.is_s3:
                require(
                    len(self.root) > len("s3://") and not self.root[5:].startswith("/"),
                    f"StorageLocation.root: no bucket in {self.root!r}",
                )
        else:
            require(os.path.isabs(self.root), f"StorageLocation.root must be absolute or s3://, got {self.root!r}")
        require((self.key is None) == (self.secret is None), "StorageLocation: set both key and secret, or neither")

    @property
    def is_s3(self) -> bool:
        return self.root.startswith("s3://")

    @classmethod
    def from_env(cls, root: str, env: Mapping[str, str] | None = None) -> StorageLocation:
        """Root plus the standard AWS_* variables (AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, ...)."""
        e = os.environ if env is None else env
        if "://" not in root:
            root = str(Path(root).expanduser().resolve())
        return cls(
            root=root.rstrip("/") if root != "/" else root,
            endpoint_url=e.get("AWS_ENDPOINT_URL_S3") or e.get("AWS_ENDPOINT_URL") or None,
            region=e.get("AWS_REGION") or e.get("AWS_DEFAULT_REGION") or None,
            key=e.get("AWS_ACCESS_KEY_ID") or None,
            secret=e.get("AWS_SECRET_ACCESS_KEY") or None,
        )

    def join(self, *parts: str) -> str:
        """Root joined with relative parts using '/' (works for paths and URLs)."""
        for p in parts:
            require(not p.startswith("/") and ".." not in p.split("/"), f"StorageLocation.join: bad part {p!r}")
        return "/".join([self.root.rstrip("/"), *parts])

    def fsspec_options(self) -> dict[str, Any]:
        """Keyword options for fsspec.open / fsspec.core.url_to_fs (s3fs dialect)."""
        if not self.is_s3:
            return {}
        opts: dict[str, Any] = {}
        client: dict[str, Any] = {}
        if self.endpoint_url:
            client["endpoint_url"] = self.endpoint_url
        if self.region:
            client["region_name"] = self.region
        if client:
            opts["client_kwargs"] = client
        if self.key:
            opts["key"], opts["secret"] = self.key, self.secret
        return opts

    def delta_options(self) -> dict[str, str]:
        """storage_options for deltalake (delta-rs object_store dialect)."""
        if not self.is_s3:
            return {}
        # S3 has no atomic rename; delta-rs commits with conditional put (AWS S3, MinIO and moto support it).
        opts = {"AWS_REGION": self.region or "us-east-1", "conditional_put": "etag"}
        if self.endpoint_url:
            opts["AWS_ENDPOINT_URL"] = self.endpoint_url
            if self.endpoint_url.startswith("http://"):
                opts["AWS_ALLOW_HTTP"] = "true"
        if self.key:
            opts["AWS_ACCESS_KEY_ID"], opts["AWS_SECRET_ACCESS_KEY"] = self.key, str(self.secret)
        return opts


def uri_refusal(uri: str) -> str | None:
    """Why a container `uri` read from a manifest or catalog row is refused, or None when it is
    not: a row names a local path, file:// or s3:// (the object stores robodata reads with its
    configured options), never a URL another fsspec protocol would fetch (http://, ftp://, ...),
    so editing a manifest cannot make a loader, an export or the viewer send requests elsewhere."""
    if "://" not in uri or uri.startswith(SCHEMES):
        return None
    scheme = uri.split("://", 1)[0][:32]
    return f"uri scheme {scheme!r} is refused: a manifest row names a local path, file:// or s3://"
