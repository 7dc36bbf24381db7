"""A real S3-compatible server (moto) on loopback for tests."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def moto_s3() -> Iterator[dict]:
    """Yields {"endpoint_url", "key", "secret", "storage_options"} for a fresh server."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    try:
        yield {
            "endpoint_url": url,
            "key": "testing",
            "secret": "testing",
            "storage_options": {
                "key": "testing",
                "secret": "testing",
                "client_kwargs": {"endpoint_url": url, "region_name": "us-east-1"},
            },
        }
    finally:
        server.stop()
