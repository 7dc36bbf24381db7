"""Edge-uploader benchmark: a clean one-shot run for throughput, then SIGKILL-and-restart
until a second spool is drained, against a real moto server on loopback.

    python -m bench.upload --quick   # 48 episodes + 2 big files, 20 kills (--smoke: 6 + 2, 3 kills)

lost: episodes neither upstream byte-identical nor still local at the end.
deleted_unverified: episodes that left the spool while upstream was missing or different
(checked independently, straight against the server, the moment they disappear).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import BENCH_DIR, emit, parse, size_of
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

KEYS = (
    "episodes",
    "kills",
    "runs",
    "lost",
    "deleted_unverified",
    "left_local",
    "clean_run_ok",
    "throughput_mb_s",
    "peak_rss_mb",
)


@dataclass(frozen=True)
class Size:
    episodes: int  # small ones; two big multipart files come on top
    max_bytes: int  # largest small episode
    big: int  # bytes of each big file
    part: int  # part size of the kill run (small: kills land between parts)
    clean_part: int  # part size of the clean throughput run
    kills: int  # SIGKILLs before a run is left to finish
    send_s: float  # the kill run's bandwidth cap spreads one spool over about this many seconds


SIZES = {
    "smoke": Size(6, 50_000, 300_000, 64 * 1024, 1 << 20, 3, 3.0),
    "quick": Size(48, 400_000, 3_000_000, 64 * 1024, 1 << 20, 20, 12.0),
    "full": Size(198, 4_000_000, 40_000_000, 1 << 20, 8 << 20, 20, 12.0),
}


def fill(spool: Path, tag: str, n: int, rng: random.Random, max_bytes: int, big: int) -> dict[str, dict[str, bytes]]:
    """n small episodes (files and directories) and two big multipart files, written by rename."""
    spool.mkdir(parents=True)
    exp = {}
    for i in range(n):
        name = f"{tag}{i:04d}" + (".mcap" if i % 2 else "")
        exp[name] = write_episode(spool, name, rng, kind="file" if i % 2 else "dir", max_bytes=max_bytes)
    for j in range(2):
        name = f"{tag}big{j}.mcap"
        data = rng.randbytes(big)
        (spool / f"{name}.partial").write_bytes(data)
        os.rename(spool / f"{name}.partial", spool / name)
        exp[name] = {f"{PREFIX}/{name}": data}
    return exp


def once(cfg: Path, env: dict) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "robodata.cli", "upload", "once", "-c", str(cfg), "--no-progress"]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main() -> None:
    args = parse(__doc__.splitlines()[0])
    size = SIZES[size_of(args)]
    # The clean run uses realistic-ish parts; the kill run small ones, so kills land between parts.
    n, max_bytes, big, part, clean_part = size.episodes, size.max_bytes, size.big, size.part, size.clean_part
    root = BENCH_DIR / "upload"
    shutil.rmtree(root, ignore_errors=True)
    rng = random.Random(0)
    env = {**os.environ, **CREDS}
    with moto_server(min_part_size=part) as url:
        client = s3(url)
        # 1) throughput: one uninterrupted one-shot run, no bandwidth cap
        clean = fill(root / "clean", "c", n, rng, max_bytes, big)
        total = sum(len(v) for files in clean.values() for v in files.values())
        cfg = write_config(root / "clean.yaml", root / "clean", url, part_size=clean_part, min_part_size=part)
        t = time.perf_counter()
        rc = once(cfg, env).wait()
        elapsed = time.perf_counter() - t
        clean_ok = rc == 0 and not episodes_in(root / "clean")
        # 2) crashes: SIGKILL at random points, restart, until the spool is drained
        spool = root / "kill"
        expected = fill(spool, "k", n, rng, max_bytes, big)
        mon = Monitor(spool, client, expected)
        mon.start()
        cfg = write_config(
            root / "kill.yaml",
            spool,
            url,
            part_size=part,
            min_part_size=part,
            bandwidth_bytes_per_s=max(total / size.send_s, 100_000),
        )  # ~send_s seconds of sending: kills land mid-part
        kills = runs = 0
        while runs < 300:
            proc = once(cfg, env)
            runs += 1
            try:
                proc.wait(timeout=rng.uniform(0.6, 2.0) if kills < size.kills else 600)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                kills += 1
                continue
            if proc.returncode == 0 and not episodes_in(spool):
                break
        mon.stop.set()
        mon.join()
        local = episodes_in(spool)
        lost = sum(1 for name, files in expected.items() if name not in local and upstream_identical(client, files))
    emit(
        {
            "part_size_clean": clean_part,
            "part_size_kill": part,
            "episodes": len(expected),
            "kills": kills,
            "runs": runs,
            "lost": lost,
            "deleted_unverified": len(mon.deleted_unverified),
            "left_local": len(local),
            "clean_run_ok": clean_ok,
            "throughput_mb_s": round(total / elapsed / 1e6, 2),
            "mb_per_spool": round(total / 1e6, 1),
        }
    )


if __name__ == "__main__":
    main()
