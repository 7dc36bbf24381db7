"""SIGKILL the uploader at random points during 50 uploads, restart, repeat until done.

Every episode must end upstream byte-identical, none may leave the spool before its
upstream copy is complete and identical (checked independently, straight against moto),
none may be lost.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time

from tests.core.helpers_upload import (
    CREDS,
    PREFIX,
    Monitor,
    episodes_in,
    moto_server,
    s3,
    upstream_identical,
    write_config,
    write_episode,
)

N = 50
LATE = 10  # written while the uploader is being killed and restarted


def test_sigkill_during_50_uploads(tmp_path):
    rng = random.Random(8)
    spool = tmp_path / "spool"
    spool.mkdir()
    expected: dict[str, dict[str, bytes]] = {}
    names = [f"ep{i:03d}" + (".mcap" if i % 3 == 0 else "") for i in range(N)]
    kinds = {n: "file" if n.endswith(".mcap") or i % 2 else "dir" for i, n in enumerate(names)}
    for n in names[: N - LATE]:
        expected[n] = write_episode(spool, n, rng, kind=kinds[n], max_bytes=300_000)
    big = rng.randbytes(3_000_000)  # ~46 parts: kills land inside this multipart upload
    (spool / "ep_big.mcap.partial").write_bytes(big)
    os.rename(spool / "ep_big.mcap.partial", spool / "ep_big.mcap")
    expected["ep_big.mcap"] = {f"{PREFIX}/ep_big.mcap": big}

    with moto_server() as url:
        client = s3(url)
        cfg = write_config(tmp_path / "upload.yaml", spool, url, bandwidth_bytes_per_s=1_000_000)
        mon = Monitor(spool, client, expected)
        mon.start()

        def late_writer() -> None:
            wr = random.Random(9)
            for n in names[N - LATE :]:
                time.sleep(wr.uniform(0.1, 0.6))
                expected[n] = write_episode(spool, n, wr, kind=kinds[n], max_bytes=300_000)

        writer = threading.Thread(target=late_writer, daemon=True)
        writer.start()
        env = {**os.environ, **CREDS}
        cmd = [sys.executable, "-m", "robodata.cli", "upload", "once", "-c", str(cfg), "--no-progress"]
        kills, runs, deadline = 0, 0, time.monotonic() + 150
        while True:
            assert time.monotonic() < deadline, f"not done after {runs} runs, {kills} kills"
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            runs += 1
            try:
                out, err = proc.communicate(timeout=rng.uniform(0.6, 2.0) if kills < 12 else 120)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.communicate()
                kills += 1
                continue
            assert proc.returncode in (0, 1), err.decode()[-2000:]
            if proc.returncode == 0 and not writer.is_alive() and not episodes_in(spool):
                break
        mon.stop.set()
        mon.join()

        from robodata.upload.journal import Journal

        counters = Journal(spool / ".robodata-upload" / "journal.sqlite").counters()
        print(f"runs={runs} kills={kills} {counters}")
        assert kills >= 8, f"only {kills} kills in {runs} runs; the test did not exercise crashes"
        assert mon.deleted_unverified == [], mon.deleted_unverified
        assert sorted(mon.deleted) == sorted(expected), "every episode leaves the spool exactly once"
        flat = {k: v for files in expected.values() for k, v in files.items()}
        assert len(expected) == N + 1
        assert upstream_identical(client, flat) == []
        assert not list((spool / ".robodata-upload" / "trash").glob("*"))
