"""Real loopback services for tests and benchmarks: a private PostgreSQL cluster and a moto S3 server.

    with PrivatePostgres.start() as pg:          # initdb + pg_ctl in a temp dir, free 127.0.0.1 port
        url = pg.create_database("dagster")      # postgresql://robodata@127.0.0.1:PORT/dagster
    with LoopbackS3.start("robodata-test") as s3:
        s3.location("prod")                      # StorageLocation for s3://robodata-test/prod

Nothing is installed or touched system-wide: the cluster lives in its own temp directory and is
stopped (and deleted) on exit. As root, initdb refuses to run, so the cluster runs as the
`postgres` system user (created by the Debian package) or `nobody`.
"""

from __future__ import annotations

import atexit
import glob
import logging
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from robodata.errors import RobodataError
from robodata.storage import StorageLocation


class ServiceUnavailable(RobodataError):
    """A binary the service needs is not installed (install the Debian package named)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def postgres_bindir() -> Path:
    """Directory holding initdb/pg_ctl: $PG_BINDIR, the newest /usr/lib/postgresql/*/bin, or PATH."""
    candidates = [os.environ.get("PG_BINDIR", "")]
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), reverse=True)
    which = shutil.which("initdb")
    candidates.append(str(Path(which).resolve().parent) if which else "")
    for c in candidates:
        if c and (Path(c) / "initdb").is_file() and (Path(c) / "pg_ctl").is_file():
            return Path(c)
    raise ServiceUnavailable(
        "PostgreSQL server binaries (initdb, pg_ctl) not found; "
        "install the Debian package `postgresql` or set PG_BINDIR"
    )


def _run_as() -> list[str]:
    if os.geteuid() != 0:
        return []
    for user in ("postgres", "nobody"):
        try:
            pwd.getpwnam(user)
        except KeyError:
            continue
        return ["runuser", "-u", user, "--"]
    raise ServiceUnavailable("running as root and no `postgres`/`nobody` user to run PostgreSQL as")


@dataclass
class PrivatePostgres:
    """A throwaway PostgreSQL cluster on 127.0.0.1 (trust auth, durability off: tests and benches only)."""

    workdir: Path
    port: int
    user: str = "robodata"
    _prefix: list[str] = field(default_factory=list)
    _bindir: Path = Path(".")
    _running: bool = False

    @classmethod
    def start(cls, max_connections: int = 200) -> PrivatePostgres:
        bindir = postgres_bindir()
        prefix = _run_as()
        workdir = Path(tempfile.mkdtemp(prefix="robodata-pg-"))
        if prefix:
            shutil.chown(workdir, user=prefix[2])
        pg = cls(workdir=workdir, port=free_port(), _prefix=prefix, _bindir=bindir)
        data = workdir / "data"
        pg._exec(["initdb", "-D", str(data), "-A", "trust", "-U", pg.user, "-E", "UTF8", "--locale=C", "--no-sync"])
        opts = (
            f"-p {pg.port} -k {workdir} -c listen_addresses=127.0.0.1 -c fsync=off "
            f"-c synchronous_commit=off -c full_page_writes=off -c max_connections={max_connections}"
        )
        pg._exec(["pg_ctl", "-D", str(data), "-o", opts, "-l", str(workdir / "server.log"), "-w", "-t", "60", "start"])
        pg._running = True
        atexit.register(pg.stop)
        return pg

    def _exec(self, argv: list[str]) -> None:
        cmd = [*self._prefix, str(self._bindir / argv[0]), *argv[1:]]
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=self.workdir)
        if out.returncode != 0:
            log = self.workdir / "server.log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RobodataError(f"{' '.join(argv[:1])} failed ({out.returncode}): {out.stderr.strip()} {tail}")

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, name: str) -> str:
        """Create (or recreate empty) database `name`; returns its URL."""
        import psycopg2

        if not name.replace("_", "").isalnum():
            raise ValueError(f"bad database name {name!r}")
        conn = psycopg2.connect(self.url())
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                cur.execute(f'CREATE DATABASE "{name}"')
        finally:
            conn.close()
        return self.url(name)

    def stop(self) -> None:
        if self._running:
            self._running = False
            try:
                self._exec(["pg_ctl", "-D", str(self.workdir / "data"), "-m", "immediate", "-w", "stop"])
            finally:
                shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> PrivatePostgres:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class LoopbackS3:
    """A moto S3 server on 127.0.0.1 with one bucket; credentials are dummies."""

    bucket: str
    endpoint_url: str
    _server: object = None

    @classmethod
    def start(cls, bucket: str = "robodata-test") -> LoopbackS3:
        import boto3
        from moto.server import ThreadedMotoServer

        port = free_port()
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no per-request access log
        server.start()
        s3 = cls(bucket=bucket, endpoint_url=f"http://127.0.0.1:{port}", _server=server)
        boto3.client("s3", **s3.boto_kwargs()).create_bucket(Bucket=bucket)
        return s3

    def boto_kwargs(self) -> dict[str, str]:
        return {
            "endpoint_url": self.endpoint_url,
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
            "region_name": "us-east-1",
        }

    def env(self) -> dict[str, str]:
        """AWS_* variables that point every client (s3fs, delta-rs, boto3) at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
        }

    def location(self, prefix: str = "") -> StorageLocation:
        root = f"s3://{self.bucket}" + (f"/{prefix.strip('/')}" if prefix else "")
        return StorageLocation.from_env(root, self.env())

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()  # type: ignore[attr-defined]
            self._server = None

    def __enter__(self) -> LoopbackS3:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
