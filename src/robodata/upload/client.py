"""The boto3 S3 client the uploader uses: our retries only, path-style, Content-MD5 integrity."""

from __future__ import annotations

from typing import Any

from robodata.upload.config import UploadConfig


def make_client(cfg: UploadConfig) -> Any:
    import boto3
    from botocore.config import Config

    bc = Config(
        region_name=cfg.region,
        retries={"total_max_attempts": 1},  # the uploader's Retrier owns retries and counts them
        connect_timeout=cfg.connect_timeout_s,
        read_timeout=cfg.read_timeout_s,
        # Content-MD5 on every PUT guards the body; unsigned payload means the body is read once
        # (by the socket), which keeps the bandwidth cap honest over plain-http endpoints too.
        s3={"addressing_style": "path", "payload_signing_enabled": False},
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    return boto3.session.Session().client("s3", endpoint_url=cfg.endpoint_url, config=bc)
