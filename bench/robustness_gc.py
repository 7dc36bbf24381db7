"""bench.robustness section "gc": what killed ingests leave, and the sweep (issue 44, item 8).

On a local root and on S3 (moto on loopback): one batch is ingested whole (its containers are the
referenced ones); then batches are killed: `KILLS` ingest processes SIGKILLed soon after (0-0.5 s) a container
starts being written, or after the first one is uploaded, and one batch deterministically
between its uploads and the catalog merge.
`robodata.ingest.sweep` then runs past the grace period. Counted: the unreferenced objects under
containers/ and robodata's scratch folders before and after (`orphans_after_gc`), and referenced
containers missing or unreadable afterwards (`referenced_deleted`).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import polars as pl

from bench.common import BENCH_DIR
from robodata.container import EpisodeReader
from robodata.errors import RobodataError
from robodata.ingest.landing.batch import write_manifest
from robodata.ingest.landing.scan import LandingCursor, new_items
from robodata.ingest.pipeline import run_batch
from robodata.ingest.settings import IngestSettings
from robodata.ingest.sweep import SCRATCH_PREFIXES, SweepConfig, sweep
from robodata.ingest.synth import SynthConfig, synthesize
from robodata.ingest.tables import IngestPaths
from robodata.storage import objects

KILLS = {"smoke": 0, "quick": 3, "full": 10}
SMALL: dict[str, Any] = dict(
    duration_s=4.0, height=96, width=128, fps=10.0, state_hz=50.0, cameras=("cam_left", "wrist")
)
RUN = (
    "import sys\nfrom robodata.ingest.pipeline import run_batch\nfrom robodata.ingest.settings import IngestSettings\n"
)
RUN += "run_batch(sys.argv[1], sys.argv[2], IngestSettings(), derived=False)\n"


def _land(work: Path, name: str, seed: int, root: str) -> None:
    land = work / f"land-{name}"
    synthesize(SynthConfig(episodes=3, format="mcap", seed=seed, site=f"site-{name}", **SMALL), land)
    write_manifest(IngestPaths(root), name, new_items(str(land), LandingCursor()))


def _killed_after_upload(root: str, batch: str) -> None:
    import robodata.ingest.steps.episode_metadata as em

    real = em.merge_episodes

    def killed(*a: Any, **k: Any) -> Any:
        raise KeyboardInterrupt

    em.merge_episodes = killed
    try:
        run_batch(root, batch, IngestSettings(), derived=False)
    except KeyboardInterrupt:
        pass
    finally:
        em.merge_episodes = real


def _seen(paths: IngestPaths, batch: str, scratch: Path, trigger: str) -> bool:
    """Whether the ingest of `batch` has got as far as `trigger`: "writing" (a container being
    written: a .tmp under its folder, or a staging folder in scratch) or "uploaded" (a whole
    container in its folder)."""
    if (
        trigger == "writing"
        and scratch.exists()
        and any(e.name.startswith("robodata-out-") for e in os.scandir(scratch))
    ):
        return True
    fs = objects.filesystem(paths.containers, paths.fsspec_options())
    try:
        names = [p.rsplit("/", 1)[-1] for p in fs.find(fs._strip_protocol(f"{paths.containers}/{batch}"))]
    except FileNotFoundError:
        return False
    return any(n.endswith(".tmp" if trigger == "writing" else ".rdep") for n in names)


def _kill(root: str, batch: str, trigger: str, rng: random.Random, env: dict[str, str]) -> str:
    """Run the batch's ingest in a process and SIGKILL it soon after `trigger` is seen."""
    paths, scratch = IngestPaths(root), Path(env["ROBODATA_SCRATCH"])
    proc = subprocess.Popen(
        [sys.executable, "-c", RUN, root, batch], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline and not _seen(paths, batch, scratch, trigger):
        time.sleep(0.05)
    time.sleep(rng.uniform(0.0, 0.5))
    if proc.poll() is not None:
        return f"{trigger}: finished first"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return f"{trigger}: killed"


def _state(paths: IngestPaths, scratch: Path) -> dict[str, Any]:
    fs = objects.filesystem(paths.containers, paths.fsspec_options())
    try:
        listed = set(fs.find(fs._strip_protocol(paths.containers)))
    except FileNotFoundError:
        listed = set()
    scheme = "s3://" if objects.is_remote(paths.root) else ""
    listed = {scheme + p for p in listed}
    rows = pl.read_delta(paths.catalog, storage_options=paths.delta_options() or None)
    referenced = {u for u in rows["uri"].to_list() if u}
    left = [e.name for e in os.scandir(scratch) if e.name.startswith(SCRATCH_PREFIXES)] if scratch.exists() else []
    return {"listed": listed, "referenced": referenced, "scratch": left}


def _unreadable(paths: IngestPaths, uris: set[str]) -> int:
    bad = 0
    for uri in uris:
        try:
            EpisodeReader.open(uri, **paths.fsspec_options()).close()
        except (RobodataError, OSError):
            bad += 1
    return bad


def run_backend(root: str, work: Path, env: dict[str, str], kills: int, rng: random.Random) -> dict[str, Any]:
    paths = IngestPaths(root)
    scratch = Path(env["ROBODATA_SCRATCH"])
    _land(work, "b0", 0, root)
    run_batch(root, "b0", IngestSettings(), derived=False)
    outcomes = []
    for k in range(kills):
        _land(work, f"k{k}", 10 + k, root)
        outcomes.append(_kill(root, f"k{k}", ("writing", "uploaded")[k % 2], rng, env))
    _land(work, "cut", 99, root)
    _killed_after_upload(root, "cut")
    before = _state(paths, scratch)
    dry = sweep(paths, SweepConfig(grace_s=3600.0, dry_run=True), now=time.time() + 7200)
    report = sweep(paths, SweepConfig(grace_s=3600.0), now=time.time() + 7200)
    after = _state(paths, scratch)
    return {
        "kills": outcomes,
        "referenced": len(before["referenced"]),
        "orphans_before": len(before["listed"] - before["referenced"]),
        "scratch_before": len(before["scratch"]),
        "dry_run_listed": len(dry.orphans) + len(dry.scratch),
        "removed": report.deleted,
        "orphans_after_gc": len(after["listed"] - after["referenced"]) + len(after["scratch"]),
        "referenced_deleted": len(before["referenced"] - after["listed"]) + _unreadable(paths, after["referenced"]),
    }


def run(size: str) -> dict[str, Any]:
    from robodata_testing.services import LoopbackS3

    BENCH_DIR.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="robust-gc-", dir=BENCH_DIR)).resolve()
    rng = random.Random(8)
    out: dict[str, Any] = {}
    saved = dict(os.environ)
    try:
        for backend in ("local", "s3"):
            base = work / backend
            base.mkdir()
            os.environ["ROBODATA_SCRATCH"] = str(base / "scratch")
            if backend == "local":
                out[backend] = run_backend(str(base / "state"), base, dict(os.environ), KILLS[size], rng)
                continue
            with LoopbackS3.start(f"gc-{uuid.uuid4().hex[:12]}") as srv:
                os.environ.update(srv.env())
                out[backend] = run_backend(f"s3://{srv.bucket}/state", base, dict(os.environ), KILLS[size], rng)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(work, ignore_errors=True)
    return {
        **out,
        "kills": 2 * (KILLS[size] + 1),
        "orphans_before": sum(v["orphans_before"] + v["scratch_before"] for v in out.values()),
        "orphans_after_gc": sum(v["orphans_after_gc"] for v in out.values()),
        "referenced_deleted": sum(v["referenced_deleted"] for v in out.values()),
    }
