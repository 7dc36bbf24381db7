"""A real S3-compatible server (moto) on loopback for tests, counting the requests it serves."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Requests:
    """Requests served: how many of each method, GETs with a Range header, bytes of GET bodies."""

    methods: dict[str, int] = field(default_factory=dict)
    ranged: int = 0
    get_bytes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def total(self) -> int:
        return sum(self.methods.values())

    def reset(self) -> None:
        with self.lock:
            self.methods, self.ranged, self.get_bytes = {}, 0, 0

    def counting(self, app: Any) -> Any:
        """The WSGI app `app`, each request and GET body counted."""

        def wrapped(environ: dict, start_response: Any) -> Iterable[bytes]:
            method = environ.get("REQUEST_METHOD", "")
            with self.lock:
                self.methods[method] = self.methods.get(method, 0) + 1
                self.ranged += int(method == "GET" and "HTTP_RANGE" in environ)
            for chunk in app(environ, start_response):
                if method == "GET":
                    with self.lock:
                        self.get_bytes += len(chunk)
                yield chunk

        return wrapped


@contextmanager
def moto_s3() -> Iterator[dict]:
    """Yields {"endpoint_url", "key", "secret", "storage_options" (fsspec's), "delta_options"
    (delta-rs'), "client" (boto3's), "requests"} for a fresh server; "requests" (a `Requests`)
    counts what it serves."""
    import boto3
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    requests = Requests()

    class Counted(ThreadedMotoServer):
        def _server_entry(self) -> None:
            app = requests.counting(DomainDispatcherApplication(create_backend_app))
            self._server = make_server(self._ip_address, self._port, app, True, request_handler=MotoRequestHandler)
            self._server_ready_event.set()
            self._server.serve_forever()

    port = free_port()
    server = Counted(ip_address="127.0.0.1", port=port, verbose=False)
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
            "delta_options": {
                "AWS_ENDPOINT_URL": url,
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_REGION": "us-east-1",
                "AWS_ALLOW_HTTP": "true",
                "aws_conditional_put": "etag",
            },
            "client": boto3.client(
                "s3",
                endpoint_url=url,
                aws_access_key_id="testing",
                aws_secret_access_key="testing",
                region_name="us-east-1",
            ),
            "requests": requests,
        }
    finally:
        server.stop()
