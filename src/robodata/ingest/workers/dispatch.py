"""Pull-based dispatch of a batch's jobs to worker processes.

Jobs are handed out one at a time in the caller's order (largest estimated work first) to
whichever worker finishes first: longest-processing-time list scheduling on the real times,
so an episode that costs more than its estimate delays only its own worker and the rest of
the queue flows around it. Compared with fixed bins cut from estimates up front, the slowest
worker then ends within about one small job of the others.

A worker is `python -m robodata.ingest.workers.worker` (a fresh interpreter: safe inside any host
process). It reads a header line ({"worker", "stage", "settings"}) then one job per line
and writes one JSON row per job. A worker that dies mid-job (a codec crash, OOM kill) costs
only that job, recorded as failed with its stderr; a replacement takes its slot while jobs
remain. Workers stage S3 items under a scratch folder of the pool's own (ROBODATA_SCRATCH
for them), removed when the pool ends, so a killed worker leaves no staged copy behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
from collections import deque
from dataclasses import dataclass, field
from typing import IO, Any

_SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class _Worker:
    slot: int
    proc: subprocess.Popen
    err: IO[bytes]
    job: dict | None = None
    buf: bytearray = field(default_factory=bytearray)


def _env(scratch: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([_SRC, *filter(None, [env.get("PYTHONPATH")])])
    env["ROBODATA_SCRATCH"] = scratch
    return env


def _send(w: _Worker, doc: dict) -> None:
    try:
        w.proc.stdin.write((json.dumps(doc) + "\n").encode())  # type: ignore[union-attr]
        w.proc.stdin.flush()  # type: ignore[union-attr]
    except (BrokenPipeError, OSError):
        pass  # it died: its EOF on stdout records the job


def _failed(job: dict, slot: int, why: str) -> dict:
    return {
        "uri": job["uri"],
        "kind": job.get("kind", ""),
        "episode_id": job.get("episode_id", ""),
        "worker": slot,
        "container_uri": "",
        "ok": False,
        "error": why,
        "seconds": 0.0,
        "size_bytes": job.get("size_bytes", 0),
    }


def run_pool(jobs: list[dict], workers: int, settings: dict[str, Any], stage: str = "convert") -> list[dict]:
    """Run every job on up to `workers` processes; one row per job, in completion order."""
    queue = deque(jobs)
    rows: list[dict] = []
    sel = selectors.DefaultSelector()
    from robodata.storage.objects import scratch_dir

    scratch = tempfile.mkdtemp(prefix="robodata-pool-", dir=scratch_dir())
    env = _env(scratch)

    def spawn(slot: int) -> None:
        err = tempfile.TemporaryFile("w+b")  # noqa: SIM115 - the worker's stderr, closed when it ends
        p = subprocess.Popen(
            [sys.executable, "-m", "robodata.ingest.workers.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            env=env,
        )
        w = _Worker(slot, p, err)
        _send(w, {"worker": slot, "stage": stage, "settings": settings})
        sel.register(p.stdout, selectors.EVENT_READ, w)  # type: ignore[arg-type]
        give(w)

    def give(w: _Worker) -> None:
        if queue:
            w.job = queue.popleft()
            _send(w, w.job)
        else:
            w.job = None
            with contextlib.suppress(OSError):
                w.proc.stdin.close()  # type: ignore[union-attr]

    for slot in range(min(max(1, workers), len(queue))):
        spawn(slot)
    try:
        while sel.get_map():
            for key, _ in sel.select():
                w: _Worker = key.data
                chunk = os.read(key.fd, 1 << 16)
                if chunk:
                    w.buf += chunk
                    while b"\n" in w.buf:
                        line, _, rest = bytes(w.buf).partition(b"\n")
                        w.buf = bytearray(rest)
                        if line.strip():
                            rows.append(json.loads(line))
                            give(w)
                    continue
                sel.unregister(key.fileobj)
                key.fileobj.close()  # type: ignore[union-attr]
                code = w.proc.wait()
                if w.job is not None:
                    w.err.seek(0)
                    tail = w.err.read().decode(errors="replace").strip()[-500:]
                    rows.append(_failed(w.job, w.slot, f"{stage} worker {w.slot} exited with code {code}: {tail}"))
                    w.job = None
                    if queue:
                        spawn(w.slot)
                w.err.close()
    finally:
        for key in list(sel.get_map().values()):
            key.data.proc.kill()
            key.data.proc.wait()
            key.data.err.close()
        sel.close()
        shutil.rmtree(scratch, ignore_errors=True)
    return rows
