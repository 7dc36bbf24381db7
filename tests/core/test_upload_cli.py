"""`robodata upload once|status|run` end to end against a loopback moto server."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

from typer.testing import CliRunner

from robodata.cli import app
from tests.core.helpers_upload import (
    CREDS,
    episodes_in,
    moto_server,
    s3,
    upstream_identical,
    write_config,
    write_episode,
)


def test_once_then_status(tmp_path, monkeypatch):
    for k, v in CREDS.items():
        monkeypatch.setenv(k, v)
    spool = tmp_path / "spool"
    spool.mkdir()
    rng = random.Random(2)
    expected = {}
    for i in range(4):
        expected.update(write_episode(spool, f"ep{i}", rng, kind="dir" if i % 2 else "file"))
    (spool / "ep..\\evil").write_bytes(b"x")
    with moto_server() as url:
        cfg = write_config(tmp_path / "u.yaml", spool, url)
        r = CliRunner().invoke(app, ["upload", "once", "-c", str(cfg)])
        assert r.exit_code == 1, r.output  # one refused episode -> not a clean pass
        assert json.loads(r.output.strip().splitlines()[-1]) == {"uploaded": 4, "rejected": 1}
        assert upstream_identical(s3(url), expected) == []
        assert episodes_in(spool) == {"ep..\\evil"}

        r = CliRunner().invoke(app, ["upload", "status", "-c", str(cfg)])
        st = json.loads(r.output)
        assert st["counters"]["episodes_deleted"] == 4 and list(st["rejected"]) == ["ep..\\evil"]
        assert st["held"] == [] and st["in_trash"] == []
        state = spool / ".robodata-upload"
        (state / "trash" / "ep9").mkdir(parents=True)  # a delete in progress: in the trash, not held
        r = CliRunner().invoke(app, ["upload", "status", "-c", str(cfg)])
        st = json.loads(r.output)
        assert st["held"] == [] and st["in_trash"] == ["ep9"]
        (state / "held.json").write_text(json.dumps({"ep9": "an object is missing upstream", "gone": "x"}))
        r = CliRunner().invoke(app, ["upload", "status", "-c", str(cfg)])  # what a settle left held
        st = json.loads(r.output)
        assert st["held"] == ["ep9"] and st["held_reasons"] == {"ep9": "an object is missing upstream"}
        (state / "trash" / "ep9").rmdir()
        r = CliRunner().invoke(app, ["upload", "status", "-c", str(cfg), "--format", "prometheus"])
        assert "robodata_upload_episodes_deleted_total 4" in r.output
        assert "# TYPE robodata_upload_retries_total counter" in r.output


def test_bad_config_is_refused_before_any_work(tmp_path):
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "ep.mcap").write_bytes(b"x")
    cfg = write_config(tmp_path / "u.yaml", spool, "http://127.0.0.1:9", site_prefix="../other-site")
    r = CliRunner().invoke(app, ["upload", "once", "-c", str(cfg)])
    assert r.exit_code == 2 and "site_prefix" in r.output
    assert (spool / "ep.mcap").exists() and not (spool / ".robodata-upload").exists()


def test_daemon_uploads_as_episodes_appear_and_stops_on_sigterm(tmp_path):
    spool = tmp_path / "spool"
    spool.mkdir()
    rng = random.Random(4)
    with moto_server() as url:
        cfg = write_config(tmp_path / "u.yaml", spool, url, poll_interval_s=0.1)
        proc = subprocess.Popen(
            [sys.executable, "-m", "robodata.cli", "upload", "run", "-c", str(cfg), "--quiet"],
            env={**os.environ, **CREDS},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            expected = {}
            for i in range(3):
                expected.update(write_episode(spool, f"ep{i}", rng, kind="file"))
                time.sleep(0.2)
            metrics = spool / ".robodata-upload" / "metrics.prom"
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if metrics.exists() and "robodata_upload_episodes_deleted_total 3" in metrics.read_text():
                    break
                assert proc.poll() is None, proc.communicate()[1].decode()
                time.sleep(0.1)
            else:
                raise AssertionError(f"daemon did not finish: {metrics.read_text() if metrics.exists() else None}")
            assert upstream_identical(s3(url), expected) == [] and not episodes_in(spool)
            status = json.loads((spool / ".robodata-upload" / "status.json").read_text())
            assert status["ready"] == 0 and status["counters"]["episodes_verified"] == 3
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err.decode()[-2000:]
