"""bench.ingest's `reads` section: bytes read from each landing item by ingestion, over the item's
size. `bytes_read_vs_item_size` (issue 39's figure) is the ingest run's: raw_episodes, alignment,
pre-QC and conversion, from the batch manifest on (split by stage: `align` holds the conversion
of the formats converted in their alignment's read, robodata.ingest.steps.one_pass, whose
`convert` is a commit). The landing sensor's content digest
(robodata.ingest.landing.dedup: identity by content, read once on the daemon and handed on in the
batch manifest, never recomputed) is one more read of every new item, by design, reported beside
it (`sensor_digest_vs_item_size`, and `with_sensor_digest_vs_item_size` for the whole path).

How it counts: the path runs in a child process under `strace -f` (every thread and process it
starts), tracing read, pread64, readv and preadv with file descriptors shown as paths (-y); the
bytes each returned are summed per landing item (the file's path lies under the item). Reads by
C libraries (libavformat, libjpeg, HDF5) count as Python's do; reads of anything else (tables,
manifests, the containers written, Python's own files) do not. A page served from the kernel's
cache counts (it is a read the program asked for); a file mapped with mmap would not (nothing on
this path maps a landing item). Each stage is marked in the trace by an open of a marker path, so
the figure is also split by stage. Without strace the section reports why and measures nothing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.realdata_fixtures import REAL, present

# the child: one tick of the landing sensor's policy, then the batch's stages in order
CHILD = r"""
import json, os, sys
from pathlib import Path
from robodata.ingest.landing.launches import BatchPolicy, LaunchState, tick
from robodata.ingest.landing.stagger import StaggerPolicy
from robodata.ingest.settings import IngestSettings
from robodata.ingest.tables import IngestPaths
from robodata.ingest.steps.aligned_tracks import align_batch
from robodata.ingest.steps.episodes import convert_batch
from robodata.ingest.steps.qc_results import pre_qc
from robodata.ingest.steps.raw_episodes import observe

landing, root, marks = sys.argv[1], sys.argv[2], sys.argv[3]

def mark(stage):
    try:
        open(os.path.join(marks, "stage-" + stage))
    except OSError:
        pass

s = IngestSettings(workers=1)
paths = IngestPaths(root)
mark("sensor")
t = tick(LaunchState(), landing, paths, BatchPolicy(settle_s=0.0), StaggerPolicy(run_s=0.0, jitter=0.0))
(batch,) = t.new_batches
mark("align")
observe(paths, batch)
align_batch(paths, batch, s)
pre_qc(paths, batch, s.qc)
mark("convert")
out = convert_batch(paths, batch, s)
mark("end")
print(json.dumps({"batch": batch, "converted": out.get("converted")}))
"""

READS = r"(?:read|pread64|readv|preadv|preadv2)"
SYSCALL = re.compile(r"^(\d+)\s+" + READS + r"\((\d+)<([^>]*)>.*\)\s+=\s+(\d+)")
# a call another thread interrupted in the trace: its start names the file, its resumption the bytes
UNFINISHED = re.compile(r"^(\d+)\s+" + READS + r"\((\d+)<([^>]*)>.*<unfinished \.\.\.>$")
RESUMED = re.compile(r"^(\d+)\s+<\.\.\. " + READS + r" resumed>.*\)\s+=\s+(\d+)")
MARK = re.compile(r"stage-(\w+)")
STAGES = ("sensor", "align", "convert")
# every synth format whose items convert with the default settings (ros2-bag-custom needs --msgs)
FORMATS = ("jpeg", "mcap", "ros1-bag", "hdf5-aloha", "hdf5-robomimic", "zarr", "rlds", "lerobot-v2.1", "lerobot-v3.0")
REAL_ITEMS = ("lerobot_v21_g1_av1", "lerobot_v30_open50")  # real LeRobot datasets at their own size
RUN = ("align", "convert")  # the ingest run's stages (the sensor's digest is reported beside them)


def _items(landing: Path) -> dict[str, int]:
    """landing item path -> its size in bytes (every file under it)."""
    out = {}
    for entry in sorted(landing.iterdir()):
        files = [entry] if entry.is_file() else [p for p in entry.rglob("*") if p.is_file()]
        out[str(entry.resolve())] = sum(p.stat().st_size for p in files)
    return out


def count(trace: str, items: dict[str, int]) -> dict[str, dict[str, int]]:
    """item -> stage -> bytes read from files under the item, from an `strace -f -y` log."""
    got = {it: dict.fromkeys(STAGES, 0) for it in items}
    roots = sorted(items, key=len, reverse=True)
    stage = ""
    pending: dict[str, str] = {}  # pid -> file of its unfinished read
    for line in trace.splitlines():
        if "stage-" in line and ("open" in line or "stat" in line):
            m = MARK.search(line)
            stage = m.group(1) if m else stage
            continue
        if (u := UNFINISHED.match(line)) is not None:
            pending[u.group(1)] = u.group(3)
            continue
        if (z := RESUMED.match(line)) is not None:
            path, n = pending.pop(z.group(1), ""), int(z.group(2))
        elif (m := SYSCALL.match(line)) is not None:
            path, n = m.group(3), int(m.group(4))
        else:
            continue
        if stage not in STAGES:
            continue
        for root in roots:
            if path == root or path.startswith(root + "/"):
                got[root][stage] += n
                break
    return got


def _measure(strace: str, tmp: Path, land: Path) -> dict[str, Any]:
    """Run the child over one landing zone under strace; each item's reads over its size."""
    root, marks, log = tmp / "state", tmp / "marks", tmp / "trace.log"
    marks.mkdir(parents=True)
    items = _items(land)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [strace, "-f", "-qq", "-y", "-s", "0", "-o", str(log)]
    cmd += ["-e", "trace=read,pread64,readv,preadv,preadv2,openat,open", "-e", "signal=none"]
    cmd += [sys.executable, "-c", CHILD, str(land), str(root), str(marks)]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    if res.returncode != 0:
        return {"error": res.stderr[-2000:]}
    child = json.loads(res.stdout.strip().splitlines()[-1])
    got = count(log.read_text(errors="replace"), items)
    run = {it: sum(got[it][st] for st in RUN) / items[it] for it in items}
    whole = {it: sum(got[it].values()) / items[it] for it in items}
    return {
        "items": len(items),
        "converted": child["converted"],
        "item_bytes": sorted(items.values()),
        "bytes_read_vs_item_size": round(max(run.values()), 3),
        "with_sensor_digest_vs_item_size": round(max(whole.values()), 3),
        "by_stage_vs_item_size": {st: round(max(got[it][st] / items[it] for it in items), 3) for st in STAGES},
    }


def reads_section(tmp: Path, size: str) -> dict[str, Any]:
    """Synthetic items of every format (`--smoke`: one JPEG episode), then the committed real
    LeRobot fixtures where present (bench.realdata_fixtures), each copied into a landing zone."""
    from robodata.ingest.synth import SynthConfig, synthesize

    strace = shutil.which("strace")
    if strace is None:
        return {"bytes_read_vs_item_size": None, "why": "strace is not installed: nothing measured"}
    tmp = tmp / "reads"
    out: dict[str, Any] = {"method": "strace -f -y: read/pread64/readv/preadv bytes on files under each item"}
    per_format: dict[str, Any] = {}
    smoke = size == "smoke"  # one JPEG episode: strace slows the child's imports down
    for fmt in ("jpeg",) if smoke else FORMATS:
        land = tmp / fmt / "landing"
        cfg = SynthConfig(
            episodes=1 if smoke else 2, duration_s=1.0 if smoke else 3.0, format=fmt, height=240, width=320
        )
        synthesize(cfg, land)
        per_format[fmt] = _measure(strace, tmp / fmt, land)
    for name in () if smoke else REAL_ITEMS:
        if present(f"{name}/meta/info.json"):
            shutil.copytree(REAL / name, tmp / name / "landing" / name)
            per_format[f"real:{name}"] = _measure(strace, tmp / name, tmp / name / "landing")
    done = [v for v in per_format.values() if "bytes_read_vs_item_size" in v]
    worst = {
        k: max((v[k] for v in done), default=None)
        for k in ("bytes_read_vs_item_size", "with_sensor_digest_vs_item_size")
    }
    out.update(worst)  # the worst item of any format
    out["sensor_digest_vs_item_size"] = max((v["by_stage_vs_item_size"]["sensor"] for v in done), default=None)
    out["target"] = 1.05  # issue 39
    out["per_format"] = per_format
    return out
