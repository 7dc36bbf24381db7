"""Typed, validated configuration of the edge uploader."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from robodata.config import require
from robodata.upload.keys import check_prefix

MIB = 1024 * 1024
S3_MIN_PART = 5 * MIB
S3_MAX_PARTS = 10_000


@dataclass(frozen=True)
class RetryConfig:
    """Exponential backoff with full jitter around every S3 call."""

    max_attempts: int = 8
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0

    def __post_init__(self) -> None:
        require(self.max_attempts >= 1, f"retry.max_attempts must be >= 1, got {self.max_attempts}")
        require(self.base_delay_s >= 0, f"retry.base_delay_s must be >= 0, got {self.base_delay_s}")
        require(
            self.max_delay_s >= self.base_delay_s,
            f"retry.max_delay_s ({self.max_delay_s}) must be >= base_delay_s ({self.base_delay_s})",
        )


@dataclass(frozen=True)
class UploadConfig:
    """Where to read episodes, where to put them, and how.

    Credentials are never part of the config: boto3's usual chain (environment,
    shared files, instance role) provides them.
    """

    spool: str
    bucket: str
    site_prefix: str
    endpoint_url: str | None = None
    region: str = "us-east-1"
    completion: str = "rename"  # "rename" (<name>.partial -> <name>) or "marker" (<name>.done)
    part_size: int = 8 * MIB
    min_part_size: int = S3_MIN_PART  # the server's minimum part size (S3: 5 MiB)
    bandwidth_bytes_per_s: float | None = None
    verify: str = "etag"  # "etag": HEAD size+ETag+sha256; "download": also re-read and sha256 the bytes
    retry: RetryConfig = field(default_factory=RetryConfig)
    poll_interval_s: float = 5.0
    min_age_s: float = 0.0  # extra guard: episode untouched for this long before upload
    state_dir: str | None = None  # journal, status, metrics, trash; default <spool>/.robodata-upload
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        require(bool(self.spool), "spool must be set")
        require(bool(self.bucket) and "/" not in self.bucket, f"bucket must be a bare bucket name, got {self.bucket!r}")
        check_prefix(self.site_prefix)
        require(
            self.completion in ("rename", "marker"), f"completion must be 'rename' or 'marker', got {self.completion!r}"
        )
        require(self.verify in ("etag", "download"), f"verify must be 'etag' or 'download', got {self.verify!r}")
        require(self.min_part_size >= 1, f"min_part_size must be >= 1, got {self.min_part_size}")
        require(
            self.part_size >= self.min_part_size,
            f"part_size ({self.part_size}) must be >= the server's min_part_size ({self.min_part_size})",
        )
        require(self.part_size <= 5 * 1024 * MIB, f"part_size must be <= 5 GiB, got {self.part_size}")
        require(
            self.bandwidth_bytes_per_s is None or self.bandwidth_bytes_per_s > 0,
            f"bandwidth_bytes_per_s must be > 0 or unset, got {self.bandwidth_bytes_per_s}",
        )
        require(self.poll_interval_s > 0, f"poll_interval_s must be > 0, got {self.poll_interval_s}")
        require(self.min_age_s >= 0, f"min_age_s must be >= 0, got {self.min_age_s}")
        require(self.connect_timeout_s > 0 and self.read_timeout_s > 0, "timeouts must be > 0")
        if self.endpoint_url is not None:
            require(
                self.endpoint_url.startswith(("http://", "https://")),
                f"endpoint_url must start with http:// or https://, got {self.endpoint_url!r}",
            )

    @property
    def state_path(self) -> Path:
        return Path(self.state_dir) if self.state_dir else Path(self.spool) / ".robodata-upload"

    @property
    def trash_path(self) -> Path:
        """Where a verified episode goes for its delete (robodata.upload.trash)."""
        return self.state_path / "trash"

    @property
    def held_path(self) -> Path:
        """The trash entries the last settle held, with why (robodata.upload.trash)."""
        return self.state_path / "held.json"

    def part_size_for(self, size: int) -> int:
        """The configured part size, grown (by whole MiB) when a file would need > 10,000 parts."""
        ps = self.part_size
        while -(-size // ps) > S3_MAX_PARTS:
            ps += MIB
        return ps
