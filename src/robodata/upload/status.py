"""What the uploader is doing: a status dict, Prometheus text counters, atomic status files."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from robodata.upload.journal import Journal

COUNTER_HELP = {
    "bytes_uploaded": "Bytes sent in PUT and UploadPart requests that the server acknowledged",
    "bytes_verified": "Bytes of episodes verified upstream",
    "episodes_verified": "Episodes whose every object was verified upstream",
    "episodes_deleted": "Episodes deleted locally after verification",
    "episodes_rejected": "Episodes refused (unsafe key, symlink, special file)",
    "episodes_conflict": "Episodes refused because upstream holds other content under the key",
    "episode_failures": "Episode attempts that failed for now and stay local",
    "objects_verified": "Objects verified upstream",
    "parts_resumed": "Multipart parts found upstream after a restart and not sent again",
    "retries": "S3 calls retried after a 5xx, a network error or a wrong ETag",
    "verify_failures": "Objects whose upstream size/ETag/sha256 did not match, uploaded again",
    "passes": "Passes over the spool",
}


def collect(
    journal: Journal, ready: list[str], held: dict[str, str] | None = None, in_trash: list[str] | None = None
) -> dict[str, Any]:
    """`held`: the trash entries the last settle held, with why (robodata.upload.trash: partly
    purged and not re-verified, or refused by the file system); `in_trash`: every entry there,
    a delete in progress included."""
    counters = {k: journal.counters().get(k, 0.0) for k in COUNTER_HELP}
    return {
        "time": time.time(),
        "counters": counters,
        "ready": len(ready),
        "open_multipart_uploads": len(journal.open_uploads()),
        "uploading": [n for n, _ in journal.episodes("uploading")],
        "rejected": {n: d for n, d in journal.episodes("rejected")},
        "conflict": {n: d for n, d in journal.episodes("conflict")},
        "held": sorted(held or {}),
        "held_reasons": dict(sorted((held or {}).items())),
        "in_trash": list(in_trash or []),
    }


def prometheus(status: dict[str, Any]) -> str:
    lines = []
    for name, value in status["counters"].items():
        metric = f"robodata_upload_{name}_total"
        lines += [f"# HELP {metric} {COUNTER_HELP[name]}", f"# TYPE {metric} counter", f"{metric} {value:g}"]
    gauges = {
        "episodes_ready": status["ready"],
        "open_multipart_uploads": status["open_multipart_uploads"],
        "episodes_rejected_present": len(status["rejected"]) + len(status["conflict"]),
        "episodes_held_in_trash": len(status.get("held", [])),
        "last_status_timestamp_seconds": status["time"],
    }
    for name, value in gauges.items():
        metric = f"robodata_upload_{name}"
        lines += [f"# TYPE {metric} gauge", f"{metric} {value:.17g}"]
    return "\n".join(lines) + "\n"


def write_atomic(path: Path, text: str) -> None:
    """Write-to-temp, fsync, rename: readers see the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_status(state_dir: Path, status: dict[str, Any]) -> None:
    write_atomic(state_dir / "status.json", json.dumps(status, indent=1, sort_keys=True))
    write_atomic(state_dir / "metrics.prom", prometheus(status))
