"""Test plumbing for the edge uploader: a moto server with small parts, a fault-injecting
HTTP proxy in front of it (a real server on loopback), spool writers, upstream checks."""

from __future__ import annotations

import hashlib
import http.client
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

BUCKET = "robot-landing"
PREFIX = "landing/site-a"
PART = 64 * 1024
CREDS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


@contextmanager
def moto_server(min_part_size: int = PART) -> Iterator[str]:
    """A fresh ThreadedMotoServer on 127.0.0.1 (free port) whose minimum part size is small."""
    import moto.s3.models as s3models
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    old = s3models.S3_UPLOAD_PART_MIN_SIZE
    s3models.S3_UPLOAD_PART_MIN_SIZE = min_part_size
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    try:
        # moto's backends are per process: start every test from an empty store.
        conn = http.client.HTTPConnection(host, port)
        conn.request("POST", "/moto-api/reset")
        assert conn.getresponse().read() is not None
        conn.close()
        s3(url).create_bucket(Bucket=BUCKET)
        yield url
    finally:
        server.stop()
        s3models.S3_UPLOAD_PART_MIN_SIZE = old


def s3(url: str):
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=url,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}),
    )


class Faults:
    """What the proxy breaks. Probabilities per request whose method is in `methods`."""

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.p_500_before = 0.0  # answer 500 without forwarding
        self.p_500_after = 0.0  # forward (the server applies it), then answer 500
        self.p_bad_etag = 0.0  # forward, then corrupt the ETag response header
        self.methods = {"PUT", "POST", "HEAD"}
        self.match = lambda method, path: True  # narrow faults to some requests
        self.budget: int | None = None  # stop injecting after this many faults
        self.injected = {"500_before": 0, "500_after": 0, "bad_etag": 0}

    def roll(self, method: str, path: str, kind: str) -> bool:
        if method not in self.methods or not self.match(method, path):
            return False
        with self.lock:
            if self.budget is not None and sum(self.injected.values()) >= self.budget:
                return False
            hit = self.rng.random() < getattr(self, "p_" + kind)
            if hit:
                self.injected[kind] += 1
            return hit


HOP = {"connection", "keep-alive", "transfer-encoding", "expect", "proxy-connection", "upgrade"}


def _corrupt(etag: str) -> str:
    core = etag.strip('"')
    flipped = ("0" if core[0] != "0" else "1") + core[1:]
    return f'"{flipped}"'


@contextmanager
def fault_proxy(upstream: str, faults: Faults) -> Iterator[str]:
    """An HTTP/1.1 proxy on 127.0.0.1 that forwards to `upstream` and injects `faults`."""
    up_host, up_port = upstream.removeprefix("http://").split(":")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def _reply(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            if self.command != "HEAD" or not any(k.lower() == "content-length" for k, _ in headers):
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _handle(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else b""
            method = self.command
            if faults.roll(method, self.path, "500_before"):
                return self._reply(
                    500,
                    [("Content-Type", "application/xml")],
                    b"<Error><Code>InternalError</Code><Message>injected</Message></Error>",
                )
            conn = http.client.HTTPConnection(up_host, int(up_port), timeout=60)
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
                conn.request(method, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                out = [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP]
            finally:
                conn.close()
            if faults.roll(method, self.path, "500_after"):
                return self._reply(
                    500,
                    [("Content-Type", "application/xml")],
                    b"<Error><Code>InternalError</Code><Message>injected</Message></Error>",
                )
            if any(k.lower() == "etag" for k, _ in out) and faults.roll(method, self.path, "bad_etag"):
                out = [(k, _corrupt(v) if k.lower() == "etag" else v) for k, v in out]
            self._reply(resp.status, out, data)

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _handle

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# spool ---------------------------------------------------------------------------------
def write_episode(
    spool: Path, name: str, rng: random.Random, *, kind: str, protocol: str = "rename", max_bytes: int = 400_000
) -> dict[str, bytes]:
    """Write one episode with the completion protocol; returns {key: bytes} expected upstream."""
    files: dict[str, bytes] = {}
    if kind == "file":
        files[""] = rng.randbytes(rng.randint(0, max_bytes))
    else:
        for i in range(rng.randint(1, 4)):
            files[f"cam{i}/{i:06d}.bin" if i else "meta.json"] = rng.randbytes(rng.randint(1, max_bytes // 3))
    target = spool / name
    tmp = spool / (name + ".partial") if protocol == "rename" else target
    for rel, data in files.items():
        p = tmp / rel if rel else tmp
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    if protocol == "rename":
        os.rename(tmp, target)
    else:
        (spool / (name + ".done")).write_bytes(b"")
    return {(f"{PREFIX}/{name}/{rel}" if rel else f"{PREFIX}/{name}"): data for rel, data in files.items()}


def upstream_identical(client, expected: dict[str, bytes]) -> list[str]:
    """Keys whose upstream bytes differ from `expected` (missing counts as different)."""
    bad = []
    for key, data in expected.items():
        try:
            got = client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        except client.exceptions.NoSuchKey:
            bad.append(key)
            continue
        if hashlib.sha256(got).digest() != hashlib.sha256(data).digest():
            bad.append(key)
    return bad


def write_config(path: Path, spool: Path, endpoint: str, **extra) -> Path:
    cfg = {
        "spool": str(spool),
        "bucket": BUCKET,
        "site_prefix": PREFIX,
        "endpoint_url": endpoint,
        "part_size": PART,
        "min_part_size": PART,
        "poll_interval_s": 0.2,
        "retry": {"max_attempts": 6, "base_delay_s": 0.01, "max_delay_s": 0.2},
    }
    cfg.update(extra)
    path.write_text(yaml.safe_dump(cfg))
    return path


def episodes_in(spool: Path) -> set[str]:
    return {n for n in os.listdir(spool) if not n.startswith(".")}


class Monitor(threading.Thread):
    """Watches the spool; when an episode disappears, checks upstream right then."""

    def __init__(self, spool: Path, client, expected: dict[str, dict[str, bytes]]):
        super().__init__(daemon=True)
        self.spool, self.client, self.expected = spool, client, expected
        self.seen: set[str] = set()
        self.deleted: list[str] = []
        self.deleted_unverified: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.poll()
            time.sleep(0.01)
        self.poll()

    def poll(self) -> None:
        now = episodes_in(self.spool)
        for name in sorted(self.seen - now):
            for _ in range(100):  # a writer thread may not have recorded what it just renamed in
                if name in self.expected:
                    break
                time.sleep(0.01)
            if name in self.expected:
                self.deleted.append(name)
                keys: dict[str, bytes | None] = dict(self.expected[name])
                if any(k.startswith(f"{PREFIX}/{name}/") for k in keys):  # directories: manifest too
                    keys[f"{PREFIX}/{name}/_UPLOADED.json"] = None
                bad = upstream_identical(self.client, {k: v for k, v in keys.items() if v is not None})
                if f"{PREFIX}/{name}/_UPLOADED.json" in keys:
                    try:
                        self.client.head_object(Bucket=BUCKET, Key=f"{PREFIX}/{name}/_UPLOADED.json")
                    except Exception:  # noqa: BLE001
                        bad.append("manifest")
                if bad:
                    self.deleted_unverified.append(name)
        self.seen = (self.seen & now) | {n for n in now if not n.endswith(".partial")}


# real kills at a chosen point ------------------------------------------------------------
KILL_AFTER_VERIFIED = "ROBODATA_TEST_KILL_AFTER_VERIFIED"


def kill_after_verified_main() -> None:
    """The real `robodata` CLI, SIGKILLed by itself right after its journal committed "verified"
    for the N-th time (N = $ROBODATA_TEST_KILL_AFTER_VERIFIED), before that episode's local delete.

    Run as ``python -c "from tests.core.helpers_upload import kill_after_verified_main as m; m()" upload once ...``.
    """
    from robodata.cli import app
    from robodata.upload.journal import Journal

    left = [int(os.environ[KILL_AFTER_VERIFIED])]
    original = Journal.set_episode

    def set_episode(self, name, state, *args, **kwargs):
        original(self, name, state, *args, **kwargs)  # committed (WAL) before the kill
        if state == "verified":
            left[0] -= 1
            if left[0] <= 0:
                os.kill(os.getpid(), signal.SIGKILL)

    Journal.set_episode = set_episode  # type: ignore[method-assign]
    sys.argv = ["robodata", *sys.argv[1:]]
    app()


def upload_once(cfg: Path, kill_after_verified: int | None = None) -> subprocess.Popen:
    """`robodata upload once -c cfg` in a subprocess; optionally SIGKILLed right after "verified"."""
    env = {**os.environ, **CREDS}
    if kill_after_verified is None:
        cmd = [sys.executable, "-m", "robodata.cli"]
    else:
        env[KILL_AFTER_VERIFIED] = str(kill_after_verified)
        cmd = [sys.executable, "-c", "from tests.core.helpers_upload import kill_after_verified_main as m; m()"]
    cmd += ["upload", "once", "-c", str(cfg), "--no-progress"]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def in_process_uploader(spool: Path, url: str, **kw):
    """An Uploader in this process on `spool` and the server at `url`, with quick retries."""
    from robodata.upload.config import RetryConfig, UploadConfig
    from robodata.upload.uploader import Uploader

    kw.setdefault("retry", RetryConfig(max_attempts=2, base_delay_s=0.001, max_delay_s=0.01))
    return Uploader(UploadConfig(spool=str(spool), bucket=BUCKET, site_prefix=PREFIX, endpoint_url=url, **kw))


def upload_world(tmp_path: Path, monkeypatch) -> Iterator[tuple[Path, str, object]]:
    """(spool, server url, client) for in-process uploads; use as `name = pytest.fixture(upload_world)`."""
    for k, v in CREDS.items():
        monkeypatch.setenv(k, v)
    spool = tmp_path / "spool"
    spool.mkdir()
    with moto_server() as url:
        yield spool, url, s3(url)
