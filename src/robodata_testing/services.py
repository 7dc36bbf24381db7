"""Real loopback services for tests and benchmarks: a private PostgreSQL cluster and a moto S3 server.

    with PrivatePostgres.start() as pg:          # initdb + pg_ctl in a temp dir, free 127.0.0.1 port
        url = pg.create_database("dagster")      # postgresql://robodata@127.0.0.1:PORT/dagster
    with LoopbackS3.start("robodata-test") as s3:
        s3.location("prod")                      # StorageLocation for s3://robodata-test/prod

Nothing is installed or touched system-wide: the cluster lives in its own temp directory and is
stopped (and deleted) on exit. The server runs in the foreground in a process group of its own
under robodata_testing.procs' watchdog, so it stops with the process that started it even when
that process is killed (a daemonized `pg_ctl start` outlived a killed test). As root, initdb
refuses to run, so the cluster runs as the `postgres` system user (created by the Debian package)
or `nobody`.
"""

from __future__ import annotations

import atexit
import glob
import logging
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from robodata.errors import RobodataError
from robodata.storage import StorageLocation
from robodata_testing import procs


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
    _proc: subprocess.Popen | None = None

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
        opts = [f"port={pg.port}", f"unix_socket_directories={workdir}", "listen_addresses=127.0.0.1", "fsync=off"]
        opts += ["synchronous_commit=off", "full_page_writes=off", f"max_connections={max_connections}"]
        argv = [*prefix, str(bindir / "postgres"), "-D", str(data), *(a for o in opts for a in ("-c", o))]
        # SIGQUIT: immediate shutdown (a throwaway cluster); the group is SIGKILLed 3 s later at the latest
        pg._proc = procs.spawn(argv, log=workdir / "server.log", cwd=workdir, stop_signal=signal.SIGQUIT, grace_s=3.0)
        pg._running = True
        atexit.register(pg.stop)
        pg._wait_ready(60.0)
        return pg

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        ready = [str(self._bindir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port)]
        while subprocess.run(ready, capture_output=True).returncode != 0:
            if time.monotonic() > deadline or (self._proc is not None and self._proc.poll() is not None):
                log = self.workdir / "server.log"
                tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                self.stop()
                raise RobodataError(f"postgres did not start within {timeout_s:g}s: {tail}")
            time.sleep(0.2)

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
                if self._proc is not None:
                    procs.stop(self._proc)
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
