"""bench.robustness, section "upload": the edge uploader killed at random points and right after
"verified" (before the local delete), with upstream and local copies tampered with in between.

Against a real moto server on loopback, `robodata upload once` subprocesses are:
* SIGKILLed by themselves right after their journal commits "verified" for an episode (before
  its local delete); then that episode's upstream object is deleted, overwritten or truncated
  and/or bytes are appended to its local file;
* SIGKILLed at random moments (bandwidth-capped, so kills land mid-part);
then resumed until the spool is drained.

kills: all SIGKILLs; kills_after_verified: those right after "verified".
lost: episodes gone locally whose upstream copy is not byte-identical to the local file as it
was last (appends included): every byte ever local must be upstream or still local.
deleted_unverified: episodes that left the spool while upstream was missing or different,
checked straight against the server at the moment they disappeared (tests/core/helpers_upload.Monitor).
"""

from __future__ import annotations

import random
import shutil
import signal
import sqlite3
import subprocess
from pathlib import Path

from bench.common import BENCH_DIR
from tests.core.helpers_upload import (
    BUCKET,
    PART,
    PREFIX,
    Monitor,
    episodes_in,
    moto_server,
    s3,
    upload_once,
    upstream_identical,
    write_config,
    write_episode,
)

# episodes, max bytes per small episode, big (multipart) episodes, kills after verified, random kills
SIZES = {
    "smoke": (4, 100_000, 1, 1, 1),
    "quick": (16, 300_000, 2, 5, 8),
    "full": (60, 600_000, 4, 20, 30),
}
APPENDED = b"<bytes appended after the crash>"


def _verified_local(spool: Path) -> list[str]:
    db = sqlite3.connect(spool / ".robodata-upload" / "journal.sqlite")
    try:
        names = [n for (n,) in db.execute("SELECT name FROM episodes WHERE state = 'verified'")]
    finally:
        db.close()
    return [n for n in names if (spool / n).exists()]


def _tamper(client, spool: Path, name: str, files: dict[str, bytes], rng: random.Random) -> None:
    """Delete, overwrite or truncate one upstream object of `name`, and/or append to its local file."""
    key = rng.choice(sorted(files))
    upstream = rng.choice(["deleted", "overwritten", "truncated", "kept"])
    append = upstream == "kept" or rng.random() < 0.5
    if upstream == "deleted":
        client.delete_object(Bucket=BUCKET, Key=key)
    elif upstream == "overwritten":
        client.put_object(Bucket=BUCKET, Key=key, Body=rng.randbytes(1000), Metadata={"sha256": "0" * 64})
    elif upstream == "truncated":
        client.put_object(Bucket=BUCKET, Key=key, Body=files[key][: len(files[key]) // 2])
    if append:
        rel = key.removeprefix(f"{PREFIX}/{name}").lstrip("/")
        with open(spool / name / rel if rel else spool / name, "ab") as f:
            f.write(APPENDED)
        files[key] += APPENDED  # the local file as it is now: what must end up upstream


def _finish(proc: subprocess.Popen, timeout: float | None) -> int | None:
    """Wait for a run; SIGKILL it after `timeout` s. Returns the exit code (None when we killed it)."""
    try:
        proc.communicate(timeout=timeout)
        return proc.returncode
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        return None


def run(size: str) -> dict:
    n, max_bytes, n_big, n_verified_kills, n_random_kills = SIZES[size]
    root = BENCH_DIR / "robustness_upload"
    shutil.rmtree(root, ignore_errors=True)
    spool = root / "spool"
    spool.mkdir(parents=True)
    rng = random.Random(16)
    expected: dict[str, dict[str, bytes]] = {}
    for i in range(n):
        name = f"ep{i:03d}" + (".mcap" if i % 2 else "")
        expected[name] = write_episode(spool, name, rng, kind="file" if i % 2 else "dir", max_bytes=max_bytes)
    for j in range(n_big):
        name = f"big{j}.mcap"
        expected[name] = write_episode(spool, name, rng, kind="file", max_bytes=20 * PART)
    total = sum(len(v) for files in expected.values() for v in files.values())
    kills = kills_after_verified = runs = tampered = 0
    with moto_server() as url:
        client = s3(url)
        cfg = write_config(root / "upload.yaml", spool, url, bandwidth_bytes_per_s=max(total / 6, 200_000))
        mon = Monitor(spool, client, expected)
        mon.start()
        plan = ["verified"] * n_verified_kills + ["random"] * n_random_kills
        rng.shuffle(plan)
        for kind in plan:
            if not episodes_in(spool):
                break
            runs += 1
            if kind == "verified":
                code = _finish(upload_once(cfg, kill_after_verified=rng.randint(1, 2)), 300)
                if code != -signal.SIGKILL:
                    continue  # fewer episodes left than the kill point: drained
                kills += 1
                kills_after_verified += 1
                for name in _verified_local(spool):
                    _tamper(client, spool, name, expected[name], rng)
                    tampered += 1
            else:
                code = _finish(upload_once(cfg), rng.uniform(0.8, 2.5))
                kills += code is None
        for _ in range(20):  # resume until the spool is drained
            if not episodes_in(spool):
                break
            runs += 1
            if _finish(upload_once(cfg), 600) == 0 and not episodes_in(spool):
                break
        mon.stop.set()
        mon.join()
        local = episodes_in(spool)
        lost = sum(1 for name, files in expected.items() if name not in local and upstream_identical(client, files))
    return {
        "kills": kills,
        "kills_after_verified": kills_after_verified,
        "lost": lost,
        "deleted_unverified": len(mon.deleted_unverified),
        "episodes": len(expected),
        "tampered": tampered,
        "runs": runs,
        "left_local": len(local),
    }
